"""The MCP host with real servers: in-process (mcp 2.x), stdio processes, streamable HTTP, SSE.

Fault tests inject crash, hang, init rejection and non-JSON effects into the notes fixture server
(tests/fixtures/servers/notes_core.py) through its init config, and check that each one is a
`SandboxError` naming the cause, and that no server process outlives its session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes import refusing_port
from trainer.domains import DOMAINS
from trainer.env.errors import TaskFormatError
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, ServerSpec, strip_sources
from trainer.env.taskformat.tasks import ToolSpec, load_dataset

FIX = Path(__file__).parent / "fixtures"
DATASET = FIX / "datasets" / "sandbox"
SERVER = FIX / "servers" / "notes_server.py"
sys.path.insert(0, str(FIX / "servers"))
from notes_server import create_server  # noqa: E402

pytestmark = pytest.mark.anyio



@pytest.fixture(scope="module")
def ds():
    return load_dataset(DATASET, strict=True)


@pytest.fixture(scope="module")
def task(ds):
    return ds.tasks["notes_tasks.py:test_add_note"]


def inproc() -> ServerRegistry:
    return ServerRegistry({"notes": ServerSpec("notes", "in-process", factory=create_server)})


def stdio(pidfile: Path | None = None) -> ServerRegistry:
    env = {"NOTES_PIDFILE": str(pidfile)} if pidfile else {}
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-process", command=[sys.executable, str(SERVER)],
                                               env=env)})


def with_config(task, **extra):
    ws = task.world_state()
    ws["notes"] = {**ws["notes"], **extra}
    return ws


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def pids(pidfile: Path) -> list[int]:
    return [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else []


# ---------------------------------------------------------------------------- registry

def test_servers_yaml(tmp_path):
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv2").mkdir()
    y = tmp_path / "servers.yaml"
    y.write_text("""servers:
  proc:
    type: mcp-process
    env: {A: "1"}
    cwd: srv
    command: ["{python}", "server.py", "--transport", "stdio"]
  remote:
    type: mcp-remote
    endpoint: http://127.0.0.1:1/mcp/
    transport: streamable-http
    headers: {X-Team: blue}
  events: {type: mcp-remote, endpoint: "http://127.0.0.1:1/sse", transport: sse}
  mine:
    type: in-process
    factory: %s:create_server
""" % SERVER)
    reg = ServerRegistry.from_yaml(y, python="/opt/py/bin/python", domains=DOMAINS)
    p = reg.get("proc")
    assert p.command == ["/opt/py/bin/python", "server.py", "--transport", "stdio"]
    assert p.env == {"A": "1"} and p.cwd == tmp_path / "srv" and p.mode == "legacy"
    assert ServerRegistry.from_yaml(y).get("proc").command[0] == sys.executable
    r = reg.get("remote")
    assert (r.type, r.endpoint, r.headers) == ("mcp-remote", "http://127.0.0.1:1/mcp/", {"X-Team": "blue"})
    assert r.transport == "streamable-http" and reg.get("events").transport == "sse"
    assert reg.get("mine").factory().name == "notes"
    assert reg.get("toy").type == "in-process"  # our domains, by name
    with pytest.raises(SandboxError, match="no such server"):
        reg.get("nowhere")
    y.write_text("servers:\n  bad: {type: mcp-ftp}\n")
    with pytest.raises(TaskFormatError, match="servers.bad"):
        ServerRegistry.from_yaml(y)
    y.write_text("servers:\n  bad: {type: mcp-remote, endpoint: 'http://x/ws', transport: websocket}\n")
    with pytest.raises(TaskFormatError) as e:
        ServerRegistry.from_yaml(y)
    msg = str(e.value)
    assert str(y) in msg and "servers.bad" in msg and "'websocket' is not supported (streamable-http or sse)" in msg
    y.write_text("use_internal_servers: 'no'\nservers: {}\n")
    with pytest.raises(TaskFormatError, match="use_internal_servers: must be true or false"):
        ServerRegistry.from_yaml(y)


def test_servers_yaml_errors_name_file_line_and_entry(tmp_path):
    """A missing, unreadable, malformed or wrongly shaped servers.yaml is a `TaskFormatError`
    naming the file, the line and the entry; never a bare OSError, YAMLError or TypeError."""
    y = tmp_path / "servers.yaml"
    cases = {
        None: f"{y}: cannot read: no such file",
        "servers:\n  a: {type: mcp-process\n": f"{y}:3: invalid YAML: expected ',' or '}}'",
        "- a\n- b\n": f"{y}: servers: must hold",
        "servers: [a, b]\n": f"{y}:1: servers: must hold",
        "servers:\n  ok: {type: mcp-remote, endpoint: 'http://x'}\n  bad: 3\n": f"{y}:3: servers.bad: must be a mapping",
        "servers:\n  ok: {type: mcp-remote, endpoint: 'http://x'}\n  bad: {type: mcp-process, command: 3}\n":
            f"{y}:3: servers.bad: needs a command",
        "servers:\n  bad: {type: mcp-process, command: x, env: [A]}\n": f"{y}:2: servers.bad: env must be a mapping",
        "servers:\n  bad: {type: in-process, factory: 'nowhere_at_all:make'}\n":
            f"{y}:2: servers.bad: cannot load factory 'nowhere_at_all:make': ModuleNotFoundError",
    }
    for text, message in cases.items():
        if text is not None:
            y.write_text(text)
        with pytest.raises(TaskFormatError) as e:
            ServerRegistry.from_yaml(y)
        assert str(e.value).startswith(message), (text, str(e.value))
    with pytest.raises(TaskFormatError, match="cannot read"):
        ServerRegistry.from_yaml(tmp_path)  # a folder


def test_internal_servers_are_what_the_caller_passes():
    """env imports no domain: without `domains` a registry has no internal servers."""
    with pytest.raises(SandboxError, match=r"not an internal server \(internal: none\)"):
        ServerRegistry().get("toy")
    assert ServerRegistry(domains=DOMAINS).get("toy").factory is DOMAINS["toy"]


# ---------------------------------------------------------------------------- in-process

async def test_session_view_calls_effects(task, ds):
    async with Sandbox(task, inproc(), ds.agent()) as sb:
        assert sb.init_result == {"notes": {"session_id": sb.session_id, "note_count": 2}}
        names = [t["name"] for t in sb.tools]
        assert names == ["escalate_to_human", "list_notes", "add_note", "set_label", "delete_note"]
        add = next(t for t in sb.tools if t["name"] == "add_note")
        assert add["description"] == "Create a note for the current user."  # scenario override
        assert await sb.call_tool("add_note", {"text": "buy milk", "label": "shopping"}) == '{"id": 3}'
        # the agent's mistakes are text, and the session goes on
        assert await sb.call_tool("__reserved__geteffects", {}) == "Error: function '__reserved__geteffects' does not exist"
        assert await sb.call_tool("drop_table", {}) == "Error: function 'drop_table' does not exist"
        bad = await sb.call_tool("set_label", {"note_id": "one", "label": "x"})
        assert "validation error" in bad and "note_id" in bad
        missing = await sb.call_tool("delete_note", {})
        assert "note_id" in missing and "Field required" in missing
        fx = await sb.effects()
        assert [n["text"] for n in fx["notes"]["result_db_state"]["notes"]] == ["call mom", "quarterly report", "buy milk"]
        assert fx["notes"]["result_db_hash"] == fx["notes"]["golden_db_hash"]


async def test_teardown_is_called():
    seen = []

    def factory():
        s = create_server()
        seen.append(s)
        return s

    reg = ServerRegistry({"notes": ServerSpec("notes", "in-process", factory=factory)})
    ds = load_dataset(DATASET)
    async with Sandbox(ds.tasks["notes_tasks.py:test_add_note"], reg) as sb:
        await sb.call_tool("add_note", {"text": "x"})
    after = await seen[0].call_tool("list_notes", {})
    assert "call mom" not in str(after)  # __reserved__teardown emptied the world


async def test_init_rejection_is_a_system_error(task):
    with pytest.raises(SandboxError) as e:
        async with Sandbox(task, inproc(), world_state=with_config(task, reject_init="tenant locked")):
            pass
    assert e.value.stage == "init" and "tenant locked" in e.value.cause


async def test_hang_times_out(task):
    async with Sandbox(task, inproc(), world_state=with_config(task, fault={"hang_on": "add_note"}),
                       call_timeout=0.3) as sb:
        t = time.perf_counter()
        with pytest.raises(SandboxError, match="no answer within 0.3s") as e:
            await sb.call_tool("add_note", {"text": "x"})
        assert e.value.stage == "call" and time.perf_counter() - t < 2


async def test_effects_not_json(task):
    async with Sandbox(task, inproc(), world_state=with_config(task, fault={"effects": "not-json"})) as sb:
        with pytest.raises(SandboxError, match="not a JSON object") as e:
            await sb.effects()
    assert e.value.stage == "effects"


async def test_unknown_server_and_unoffered_tool(task):
    with pytest.raises(SandboxError, match="no such server"):
        async with Sandbox(task, inproc(), world_state={"ghost": {}}):
            pass
    ghost = dataclasses.replace(task, scenario=dataclasses.replace(
        task.scenario, tools=task.scenario.tools + [ToolSpec("send_email")]))
    with pytest.raises(TaskFormatError, match="send_email"):
        async with Sandbox(ghost, inproc()):
            pass


def test_strip_sources(task):
    ws = task.world_state()
    assert "sources" in ws["notes"] and "sources" not in strip_sources(ws)["notes"]
    assert "sources" in ws["notes"]  # a copy


async def test_thousand_concurrent_sessions_are_isolated():
    """1,000 sessions of one task (the toy domain, in-process) open at once, each with its own
    member and its own checkout: every session's effects show its own writes and nobody else's."""
    toy = load_dataset(Path(__file__).parents[1] / "data" / "samples").tasks["toy_loans.py:test_checkout_book"]
    books = ["B-002", "B-004", "B-005", "B-006", "B-007"]
    gate, opened = asyncio.Event(), [0]

    async def one(i: int):
        member = f"M-9{i:03d}"
        ws = toy.world_state()
        ws["toy"]["data_patch"] = {"members": [{"id": member, "name": f"Member {i}", "email": f"m{i}@example.org",
                                                "status": "active", "fines_due": 0}]}
        async with Sandbox(toy, ServerRegistry(domains=DOMAINS), world_state=ws) as sb:
            assert sb.connections["toy"].direct  # our domains: the direct in-process path
            opened[0] += 1
            if opened[0] == 1000:
                gate.set()
            await gate.wait()  # every session is open before anyone writes
            reply = await sb.call_tool("checkout_book", {"member_id": member, "book_id": books[i % 5]})
            assert "error" not in reply, reply
            fx = (await sb.effects())["toy"]
        before = {r["id"] for r in fx["initial_db_state"]["loans"]}
        new = [(r["member_id"], r["book_id"]) for r in fx["result_db_state"]["loans"] if r["id"] not in before]
        members = {r["id"] for r in fx["result_db_state"]["members"] if r["id"].startswith("M-9")}
        return new == [(member, books[i % 5])] and members == {member}

    assert all(await asyncio.gather(*(one(i) for i in range(1000))))


# ---------------------------------------------------------------------------- stdio processes

async def test_stdio_session_and_no_leak(task, tmp_path):
    pidfile = tmp_path / "pids"
    async with Sandbox(task, stdio(pidfile)) as sb:
        assert await sb.call_tool("add_note", {"text": "buy milk", "label": "shopping"}) == '{"id": 3}'
        assert "validation error" in await sb.call_tool("set_label", {"note_id": "x", "label": "y"})
        fx = await sb.effects()
        assert fx["notes"]["result_db_hash"] == fx["notes"]["golden_db_hash"]
        (pid,) = pids(pidfile)
        assert alive(pid)
    assert not alive(pid)


async def test_stdio_crash_hang_and_cancel_leave_no_process(task, tmp_path):
    pidfile = tmp_path / "pids"
    reg = stdio(pidfile)
    # crash in the middle of a tool call
    async with Sandbox(task, reg, world_state=with_config(task, fault={"crash_on": "add_note"})) as sb:
        with pytest.raises(SandboxError, match="Connection closed") as e:
            await sb.call_tool("add_note", {"text": "x"})
        assert e.value.stage == "call"
        assert str(e.value).count("notes: crashing in add_note") == 1  # the server's stderr, once
    # crash during init
    with pytest.raises(SandboxError) as e:
        async with Sandbox(task, reg, world_state=with_config(task, fault={"crash_on": "__reserved__init"})):
            pass
    assert e.value.stage == "init"
    # a hang
    async with Sandbox(task, reg, world_state=with_config(task, fault={"hang_on": "list_notes"}),
                       call_timeout=0.5) as sb:
        with pytest.raises(SandboxError, match="no answer within"):
            await sb.call_tool("list_notes", {})
    # an episode cancelled while a call hangs
    async def episode():
        async with Sandbox(task, reg, world_state=with_config(task, fault={"hang_on": "add_note"})) as sb:
            await sb.call_tool("add_note", {"text": "x"})

    job = asyncio.create_task(episode())
    while len(pids(pidfile)) < 4:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert len(pids(pidfile)) == 4 and not any(alive(p) for p in pids(pidfile))


async def test_unstartable_process_is_a_system_error(task):
    reg = ServerRegistry({"notes": ServerSpec("notes", "mcp-process", command=[sys.executable, "-c",
                                                                               "import sys; sys.exit('boom: no config')"])})
    with pytest.raises(SandboxError) as e:
        async with Sandbox(task, reg, open_timeout=10):
            pass
    assert e.value.stage == "connect" and e.value.cause.count("boom: no config") == 1  # stderr once


# ---------------------------------------------------------------------------- remote (streamable HTTP)

def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve(flag: str, env: dict[str, str] | None = None):
    """The notes fixture served over HTTP (`--http` or `--sse`): yields its port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), flag, str(port)], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def http_endpoint():
    for port in serve("--http"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def teardown_log(tmp_path_factory):
    return tmp_path_factory.mktemp("sse") / "teardowns"


@pytest.fixture(scope="module")
def sse_endpoint(teardown_log):
    """The SSE fixture server; it rejects an init without `X-Team: blue` and logs teardowns."""
    for port in serve("--sse", {"NOTES_REQUIRE_HEADER": "X-Team: blue", "NOTES_TEARDOWN_LOG": str(teardown_log)}):
        yield f"http://127.0.0.1:{port}/sse"


async def test_remote_sessions_are_isolated(task, http_endpoint):
    reg = ServerRegistry({"notes": ServerSpec("notes", "mcp-remote", endpoint=http_endpoint,
                                              headers={"X-Team": "blue"})})

    async def one(i: int):
        async with Sandbox(task, reg) as sb:
            assert sb.init_result["notes"]["session_id"] == sb.session_id
            await sb.call_tool("add_note", {"text": f"remote {i}"})
            return [n["text"] for n in (await sb.effects())["notes"]["result_db_state"]["notes"]]

    results = await asyncio.gather(*(one(i) for i in range(3)))
    assert results == [["call mom", "quarterly report", f"remote {i}"] for i in range(3)]


async def test_remote_unreachable(task):
    with refusing_port() as port, pytest.raises(SandboxError) as e:
        reg = ServerRegistry({"notes": ServerSpec("notes", "mcp-remote", endpoint=f"http://127.0.0.1:{port}/mcp")})
        async with Sandbox(task, reg, open_timeout=5, call_timeout=5):
            pass
    assert e.value.stage == "connect"


# ---------------------------------------------------------------------------- remote (SSE)

def sse(endpoint: str, headers: dict[str, str] | None = None) -> ServerRegistry:
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-remote", endpoint=endpoint, transport="sse",
                                               headers={"X-Team": "blue"} if headers is None else headers)})


async def test_sse_sessions_are_isolated(task, sse_endpoint, teardown_log):
    reg = sse(sse_endpoint)

    async def one(i: int):
        async with Sandbox(task, reg) as sb:
            assert sb.init_result["notes"] == {"session_id": sb.session_id, "note_count": 2}
            assert [t["name"] for t in sb.tools] == ["list_notes", "add_note", "set_label", "delete_note"]
            assert await sb.call_tool("add_note", {"text": f"sse {i}"}) == '{"id": 3}'
            assert "validation error" in await sb.call_tool("set_label", {"note_id": "x", "label": "y"})
            fx = (await sb.effects())["notes"]
            conn = sb.connections["notes"]
        assert conn.closed
        return sb.session_id, [n["text"] for n in fx["result_db_state"]["notes"]]

    results = await asyncio.gather(*(one(i) for i in range(3)))
    assert [notes for _, notes in results] == [["call mom", "quarterly report", f"sse {i}"] for i in range(3)]
    # every session's __reserved__teardown reached the server
    assert {sid for sid, _ in results} <= set(teardown_log.read_text().split())


async def test_sse_headers_timeouts_and_errors(task, sse_endpoint):
    # the entry's headers travel with the requests: without them, the fixture rejects init
    with pytest.raises(SandboxError, match="X-Team") as e:
        async with Sandbox(task, sse(sse_endpoint, headers={})):
            pass
    assert e.value.stage == "init"
    # a hang is bounded by the call timeout; the session still closes
    async with Sandbox(task, sse(sse_endpoint), world_state=with_config(task, fault={"hang_on": "add_note"}),
                       call_timeout=0.5) as sb:
        t = time.perf_counter()
        with pytest.raises(SandboxError, match="no answer within 0.5s") as e:
            await sb.call_tool("add_note", {"text": "x"})
        assert e.value.stage == "call" and time.perf_counter() - t < 3
    # the agent's mistakes are still text
    async with Sandbox(task, sse(sse_endpoint)) as sb:
        assert await sb.call_tool("drop_table", {}) == "Error: function 'drop_table' does not exist"
        assert "note_id" in await sb.call_tool("delete_note", {})


async def test_sse_unreachable_is_a_connect_error(task, sse_endpoint):
    # nobody listens
    with refusing_port() as port, pytest.raises(SandboxError) as e:
        async with Sandbox(task, sse(f"http://127.0.0.1:{port}/sse"), open_timeout=5, call_timeout=5):
            pass
    assert e.value.stage == "connect" and "ConnectError" in e.value.cause
    # a live server, but no event stream at that path
    with pytest.raises(SandboxError) as e:
        async with Sandbox(task, sse(sse_endpoint.replace("/sse", "/nope")), open_timeout=5, call_timeout=5):
            pass
    assert e.value.stage == "connect" and "404" in e.value.cause
    # a listener that never answers: bounded by the open timeout
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        t = time.perf_counter()
        with pytest.raises(SandboxError) as e:
            async with Sandbox(task, sse(f"http://127.0.0.1:{silent.getsockname()[1]}/sse"),
                               open_timeout=1, call_timeout=5):
                pass
        assert e.value.stage == "connect" and "no answer within 1" in e.value.cause
        assert time.perf_counter() - t < 4
    finally:
        silent.close()


async def test_reference_shaped_servers_yaml(task, tmp_path, http_endpoint, sse_endpoint):
    """A `servers.yaml` written like the reference's tests/servers.yaml loads, and all three
    servers open, init, answer, report effects and close; `use_internal_servers: false` leaves out
    our domains."""
    pidfile = tmp_path / "pids"
    y = tmp_path / "servers.yaml"
    y.write_text(f"""use_internal_servers: false
servers:
  test_tool_http: {{type: mcp-remote, endpoint: "{http_endpoint}/", transport: streamable-http}}
  test_tool_sse: {{type: mcp-remote, endpoint: "{sse_endpoint}", transport: sse, headers: {{X-Team: blue}}}}
  test_tool_process: {{type: mcp-process, env: {{TEST_TOOL: "hello", NOTES_PIDFILE: "{pidfile}"}}, cwd: "{SERVER.parent}", command: ["{{python}}", "{SERVER.name}", "--transport", "stdio"]}}
""")
    reg = ServerRegistry.from_yaml(y, domains=DOMAINS)
    assert not reg.use_internal_servers
    assert [(reg.get(n).type, reg.get(n).transport) for n in ("test_tool_http", "test_tool_sse")] == [
        ("mcp-remote", "streamable-http"), ("mcp-remote", "sse")]
    p = reg.get("test_tool_process")
    assert p.command == [sys.executable, SERVER.name, "--transport", "stdio"] and p.cwd == SERVER.parent
    assert p.env["TEST_TOOL"] == "hello"
    with pytest.raises(SandboxError, match="use_internal_servers is false") as e:
        reg.get("toy")
    assert e.value.stage == "connect"
    with pytest.raises(SandboxError, match="use_internal_servers is false"):
        async with Sandbox(task, reg, world_state={"toy": {}}):
            pass
    assert reg.get("test_tool_sse").headers == {"X-Team": "blue"}
    y2 = tmp_path / "internal.yaml"
    y2.write_text(y.read_text().replace("use_internal_servers: false", "use_internal_servers: true"))
    assert ServerRegistry.from_yaml(y2, domains=DOMAINS).get("toy").type == "in-process"

    config = task.world_state()["notes"]
    servers = ["test_tool_http", "test_tool_sse", "test_tool_process"]
    async with Sandbox(task, reg, world_state={s: config for s in servers}) as sb:
        for s in servers:
            assert sb.init_result[s]["note_count"] == 2
            assert await sb.call_tool("add_note", {"text": f"via {s}"}, server=s) == '{"id": 3}'
        fx = await sb.effects()
        (pid,) = pids(pidfile)
        assert alive(pid)
    assert {s: fx[s]["result_db_state"]["notes"][-1]["text"] for s in servers} == {s: f"via {s}" for s in servers}
    assert not alive(pid)
