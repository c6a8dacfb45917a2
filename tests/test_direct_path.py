"""The direct in-process path (`DomainServer.direct_call`, no `mcp.Client`) against the MCP path.

The same call sequences run through a `Sandbox` whose in-process servers are called directly and
one forced through `mcp.Client` (`ServerSpec(..., direct=False)`), on the real toy and property
domains: tool listings, init results, every reply and the effects must be equal. The toy domain
stamps loans with wall-clock time (`recorded_at`, an unstable field), so those values are dropped
before comparing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from trainer.domains import DOMAINS, domain
from trainer.domains.kit import Domain, Session
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerConnection, ServerRegistry, ServerSpec, result_text
from trainer.env.taskformat.tasks import load_dataset

ROOT = Path(__file__).parents[1]
FIX = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIX / "servers"))
from notes_server import create_server as create_notes_server  # noqa: E402

pytestmark = pytest.mark.anyio



@pytest.fixture(scope="module")
def ds():
    return load_dataset(ROOT / "data" / "samples")


def registry(direct: bool) -> ServerRegistry:
    return ServerRegistry({name: ServerSpec(name, "in-process", factory=DOMAINS[name], direct=direct)
                           for name in ("toy", "property")})


TOY_M2 = {"member_id": "M-002", "book_id": "B-004"}
SEQUENCES: dict[str, list[tuple[str, dict[str, Any], str | None]]] = {
    "toy_loans.py:test_checkout_book": [
        ("find_member", {"email": "ben@example.org"}, None),
        ("checkout_book", TOY_M2, None),  # a successful write
        ("checkout_book", {"member_id": "M-004", "book_id": "B-002"}, None),  # ToolError: suspended
        ("checkout_book", TOY_M2, None),  # ToolError: no longer available
        ("checkout_book", {"member_id": 2, "book_id": "B-002"}, None),  # invalid type
        ("checkout_book", {**TOY_M2, "note": "x"}, None),  # extra argument
        ("checkout_book", {"member_id": "M-001"}, None),  # missing required argument
        ("list_loans", {"member_id": "M-002", "include_returned": "yes"}, None),  # invalid type
        ("search_policy", {"query": "fines borrow"}, None),
        ("no_such_tool", {"x": 1}, "toy"),  # unknown at the server
        ("no_such_tool", {}, None),  # unknown to the agent
        ("__reserved__geteffects", {}, None),  # reserved: hidden from the agent
        ("__reserved__init", {"config": {}, "bogus": 1}, "toy"),  # refused, the session stays
    ],
    "property_accounts.py:test_update_phone": [
        ("verify_tenant_identity", {"email": "lucia.romero@example.net", "full_name": "Lucia Romero",
                                    "date_of_birth": "1988-11-30"}, None),
        ("update_tenant_contact", {"tenant_id": "T-0902", "phone": "555-310-7788"}, None),  # a write
        ("update_tenant_contact", {"tenant_id": "T-0902"}, None),  # ToolError: nothing to change
        ("get_tenant", {"tenant_id": "T-9999"}, None),  # ToolError: not found
        ("update_tenant_contact", {"tenant_id": "T-0902", "phone": "call me"}, None),  # pattern
        ("update_tenant_contact", {"tenant_id": 902, "phone": 5553107788}, None),  # invalid types
        ("get_tenant", {"tenant_id": "T-0902", "verbose": True}, None),  # extra argument
        ("get_tenant", {}, None),  # missing required argument
        ("no_such_tool", {}, "property"),  # unknown at the server
    ],
}


def _drop(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_drop(v, keys) for v in value]
    return value


def stable(value: Any, server: str) -> Any:
    """`value` without the domain's unstable fields (wall-clock stamps), anywhere in it."""
    return _drop(value, {f for fields in domain(server).unstable.values() for f in fields})


def stable_text(text: str, server: str) -> Any:
    try:
        return stable(json.loads(text), server)
    except json.JSONDecodeError:
        return text


async def run(task, direct: bool, steps) -> dict[str, Any]:
    (server,) = task.world_state()
    async with Sandbox(task, registry(direct), session_id="same-session") as sb:
        conn = sb.connections[server]
        assert conn.direct is direct and (conn._client is None) is direct  # the path under test
        replies = [await sb.call_tool(name, args, server=srv) for name, args, srv in steps]
        fx_text = await sb.call_tool("__reserved__geteffects", {}, server=server)
        fx_dict = (await sb.effects())[server]
        assert stable(json.loads(fx_text), server) == stable(json.loads(json.dumps(fx_dict)), server)
        return {"tools": sb.tools, "init": sb.init_result,
                "listing": [t.model_dump() for t in conn.tools.values()],
                "replies": [stable_text(r, server) for r in replies],
                "effects": stable(json.loads(fx_text), server)}


@pytest.mark.parametrize("uid", sorted(SEQUENCES))
async def test_direct_equals_mcp(ds, uid):
    task = ds.tasks[uid]
    direct, mcp = await run(task, True, SEQUENCES[uid]), await run(task, False, SEQUENCES[uid])
    for key in ("tools", "init", "listing", "effects"):
        assert direct[key] == mcp[key], key
    for (name, args, _), a, b in zip(SEQUENCES[uid], direct["replies"], mcp["replies"]):
        assert a == b, (name, args)
    # the listing includes the reserved tools, as the MCP listing shows them
    names = [t["name"] for t in direct["listing"]]
    assert names[-3:] == ["__reserved__init", "__reserved__geteffects", "__reserved__teardown"]
    # and the sequences did what they say: a write, refusals, schema errors
    replies = direct["replies"]
    if uid.startswith("toy"):
        assert replies[1]["loan"]["member_id"] == "M-002"
        assert replies[2] == {"error": "member M-004 is suspended and may not borrow"}
        assert "Invalid arguments" in replies[4]["error"] and "Invalid arguments" in replies[5]["error"]
        assert "'book_id' is a required property" in replies[6]["error"]
        assert replies[9] == {"error": "Unknown tool: no_such_tool"}
        assert replies[10] == "Error: function 'no_such_tool' does not exist"
        assert replies[12]["status"] == "error"
        fx = direct["effects"]  # the golden checkout, and nothing else
        assert fx["diff"] == [] and fx["result_db_hash"] == fx["golden_db_hash"]
        assert len(fx["result_db_state"]["loans"]) == len(fx["initial_db_state"]["loans"]) + 1
    else:
        assert replies[1]["phone"] == "555-310-7788"
        assert replies[2] == {"error": "give at least one of phone, email, forwarding_address"}
        assert "required property" in replies[7]["error"]


async def test_failing_tool_is_the_same_error_result():
    """A `Session.call` that raises (here: a tool result JSON cannot encode) is an error result
    with the exception's text on both paths, as the SDK's `tools/call` handler makes it."""
    d = Domain("loopy", schema="CREATE TABLE t (id TEXT PRIMARY KEY);")

    @d.tool("Returns a value that refers to itself.")
    def loop(db: Session) -> dict:
        x: dict = {}
        x["x"] = x
        return x

    out = []
    for direct in (True, False):
        async with ServerConnection(ServerSpec("loopy", "in-process", factory=d.create_server, direct=direct)) as conn:
            assert conn.direct is direct
            r = await conn.call("loop", {})
            out.append((r.is_error, result_text(r)))
    assert out[0] == out[1] and out[0][0] is True and "Circular reference" in out[0][1]


@pytest.mark.parametrize("direct", [True, False])
async def test_closed_connection_refuses_calls_after_teardown(ds, direct):
    servers = []

    def factory():
        servers.append(DOMAINS["toy"]())
        return servers[-1]

    reg = ServerRegistry({"toy": ServerSpec("toy", "in-process", factory=factory, direct=direct)})
    async with Sandbox(ds.tasks["toy_loans.py:test_checkout_book"], reg) as sb:
        assert "loan" in await sb.call_tool("checkout_book", TOY_M2)
        conn = sb.connections["toy"]
        assert not conn.closed and not servers[0].session.closed
    assert conn.closed and servers[0].session.closed  # __reserved__teardown ran, then the close
    with pytest.raises(SandboxError, match="the connection is closed") as e:
        await sb.call_tool("find_member", {"email": "ben@example.org"})
    assert (e.value.server, e.value.stage) == ("toy", "call")
    with pytest.raises(SandboxError, match="the connection is closed"):
        await conn.call("__reserved__geteffects", {}, "effects")


async def test_generic_in_process_server_keeps_mcp_client(ds):
    """A plain `MCPServer` without the direct interface is still served through `mcp.Client`."""
    async with ServerConnection(ServerSpec("notes", "in-process", factory=create_notes_server)) as conn:
        assert not conn.direct and conn._client is not None
        assert "__reserved__init" in conn.tools


def test_servers_yaml_direct_flag(tmp_path):
    (tmp_path / "toy_factory.py").write_text(
        "from trainer.domains import DOMAINS\n\ndef make():\n    return DOMAINS['toy']()\n")
    y = tmp_path / "servers.yaml"
    y.write_text("servers:\n  a: {type: in-process, factory: 'toy_factory.py:make'}\n"
                 "  b: {type: in-process, factory: 'toy_factory.py:make', direct: false}\n")
    reg = ServerRegistry.from_yaml(y)
    assert reg.get("a").direct is True and reg.get("b").direct is False
    assert ServerRegistry(domains=DOMAINS).get("toy").direct is True  # our domains by name: direct




async def test_values_json_would_change_reach_the_server_as_json_carries_them(ds):
    """A YAML date in a golden step or a patch: both paths see its ISO text, and agree."""
    import datetime

    task = ds.tasks["toy_loans.py:test_checkout_book"]
    ws = task.world_state()
    ws["toy"]["data_patch"]["loans"] = [{"id": "L-0300", "member_id": "M-002", "book_id": "B-005",
                                         "checked_out": datetime.date(2025, 3, 1), "due": datetime.date(2025, 3, 15)}]
    ws["toy"]["golden_test_case"]["tool_interactions"].append(
        {"tool": "find_member", "parameters": {"email": "ben@example.org", "asked_on": datetime.date(2025, 3, 3)}})
    effects = []
    for direct in (True, False):
        async with Sandbox(task, registry(direct), world_state=ws) as sb:
            await sb.call_tool("checkout_book", TOY_M2)
            effects.append(stable((await sb.effects())["toy"], "toy"))
    assert effects[0] == effects[1]
    assert {r["id"]: r["due"] for r in effects[0]["result_db_state"]["loans"]}["L-0300"] == "2025-03-15"
    assert effects[0]["golden_errors"] == effects[1]["golden_errors"]  # the extra argument is refused alike


async def test_a_failing_in_process_effects_is_a_system_error(ds):
    class Broken(DOMAINS["toy"]().__class__):
        def effects(self):
            raise RuntimeError("effects blew up")

    reg = ServerRegistry({"toy": ServerSpec("toy", "in-process", factory=lambda: Broken(domain("toy")))})
    async with Sandbox(ds.tasks["toy_loans.py:test_checkout_book"], reg) as sb:
        with pytest.raises(SandboxError) as e:
            await sb.effects()
    assert e.value.stage == "effects" and "RuntimeError: effects blew up" in e.value.cause
