"""Our domains can share one scenario: their tool names never collide, and a sandbox serving two
of them routes each call to its own server. An agent's call to a tool that two servers offer is a
system error naming both, never a call sent to whichever server came first (golden steps, which
name their server, still run: the reference's own servers.yaml serves one server three times)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from trainer.domains import DOMAINS, domain
from trainer.domains.kit import RESERVED
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, ServerSpec
from trainer.env.taskformat.tasks import load_dataset

pytestmark = pytest.mark.anyio
PAIRS = list(itertools.combinations(sorted(DOMAINS), 2))


def tools_of(name: str) -> dict[str, dict]:
    return {t.name: t.input_schema for t in domain(name).create_server().direct_tools() if t.name not in RESERVED}


def test_there_are_domains_to_pair():
    assert len(DOMAINS) >= 2 and PAIRS


@pytest.mark.parametrize("a,b", PAIRS, ids=["+".join(p) for p in PAIRS])
def test_tool_names_do_not_collide(a, b):
    shared = tools_of(a).keys() & tools_of(b).keys()
    assert not shared, f"{a} and {b} both offer {sorted(shared)}"


def dataset(tmp_path: Path, servers: list[str], tools: list[str]) -> Path:
    """A one-task dataset whose scenario loads `servers` together and lists `tools`."""
    root = tmp_path / "together"
    (root / "agent").mkdir(parents=True)
    (root / "scenario").mkdir()
    (root / "test_case").mkdir()
    (root / "agent" / "think.yaml").write_text("system_instructions: Help.\nbuiltin_tools: []\n")
    scenario = {"world_state": {s: {"data_patch": {}, "golden_test_case": None} for s in servers},
                "tools": [{"name": t} for t in tools]}
    (root / "scenario" / "together.yaml").write_text(yaml.safe_dump(scenario))
    (root / "test_case" / "together.py").write_text(
        '"""!\nscenario: together\n"""\n\n\ndef test_both(x, judge):\n    """!\n    query: hi\n    """\n')
    return root


@pytest.mark.parametrize("a,b", PAIRS, ids=["+".join(p) for p in PAIRS])
async def test_one_sandbox_serves_two_domains_and_routes_each_call(tmp_path, a, b):
    ta, tb = tools_of(a), tools_of(b)
    task = load_dataset(dataset(tmp_path, [a, b], [*ta, *tb]), strict=True).tasks["together.py:test_both"]
    async with Sandbox(task, ServerRegistry(domains=DOMAINS)) as sb:
        listed = {t["name"]: t for t in sb.tools}
        assert listed.keys() == ta.keys() | tb.keys()
        for name, schema in {**ta, **tb}.items():  # each tool keeps its own domain's schema
            assert listed[name]["input_schema"] == schema, name
        assert {sb._route[n] for n in ta} == {a} and {sb._route[n] for n in tb} == {b}
        effects = await sb.effects()
        assert set(effects) == {a, b} and all(e["result_db_hash"] == e["golden_db_hash"] for e in effects.values())


async def test_an_agent_call_to_a_tool_two_servers_offer_is_an_error_naming_both(tmp_path):
    name = sorted(DOMAINS)[0]
    tool = "list_loans" if name == "toy" else sorted(tools_of(name))[0]
    twin = ServerSpec("twin", "in-process", factory=domain(name).create_server)
    registry = ServerRegistry({"twin": twin}, domains=DOMAINS)
    task = load_dataset(dataset(tmp_path, [name, "twin"], [tool]), strict=True).tasks["together.py:test_both"]
    async with Sandbox(task, registry) as sb:
        with pytest.raises(SandboxError, match=f"tool '{tool}' is offered by servers {name} and twin") as e:
            await sb.call_tool(tool, {})
        assert e.value.stage == "call"
        json.dumps(e.value.to_dict())  # recordable as it stands
        assert await sb.call_tool("__reserved__geteffects", {}, server="twin")  # a named server still answers
