"""`start: fork` (trainer/env/sandbox/forkserver.py): sessions forked from a pre-imported template, proven
against spawned processes, with the planted servers of tests/fixtures/servers (a module-level
counter, a pid cached at import, a thread started at import)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainer.env.errors import TaskFormatError
from trainer.env.golden import summary_text, validate_golden
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerConnection, ServerRegistry, ServerSpec, prove_start
from trainer.env.taskformat.tasks import load_dataset

FIX = Path(__file__).parent / "fixtures"
SERVERS = FIX / "servers"
DATASET = FIX / "datasets" / "sandbox"
sys.path.insert(0, str(SERVERS))
from notes_core import SEED  # noqa: E402

pytestmark = pytest.mark.anyio


# what the mcp 2.x server imports as it runs (its logging, its stdio transport): the template does it once
PRELOAD = ["rich.logging", "rich.console", "anyio.streams.stapled", "anyio._core._sockets"]


def notes(start: str, **kw) -> ServerRegistry:
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-process", start=start, preload=PRELOAD,
                                               command=[sys.executable, str(SERVERS / "notes_server.py")], **kw)})


def planted(script: str, start: str = "fork", **kw) -> ServerSpec:
    return ServerSpec("planted", "mcp-process", start=start, command=[sys.executable, str(SERVERS / script)], **kw)


def started(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22; None: no such
    process): with its pid, it names the process even where the kernel has wrapped its pids and
    reused one."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
    except FileNotFoundError:
        return None


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def ds():
    return load_dataset(DATASET, strict=True)


def test_servers_yaml_start_key(tmp_path):
    y = tmp_path / "servers.yaml"
    y.write_text("servers:\n  a: {type: mcp-process, command: ['{python}', 's.py'], start: fork, proof_rate: 0.1,"
                 " preload: [rich.console]}\n"
                 "  b: {type: mcp-process, command: ['{python}', 's.py']}\n")
    reg = ServerRegistry.from_yaml(y)
    assert (reg.get("a").start, reg.get("a").proof_rate, reg.get("b").start) == ("fork", 0.1, "spawn")
    assert reg.get("a").preload == ["rich.console"] and reg.get("b").preload == []
    assert reg.uses_fork() and not ServerRegistry.from_yaml(DATASET / "servers_stdio.yaml").uses_fork()
    for bad, msg in (("start: clone", "start 'clone' is not supported"), ("proof_rate: 2", "proof_rate must be"),
                     ("preload: rich", "preload must be a list")):
        y.write_text(f"servers:\n  a: {{type: mcp-process, command: ['{{python}}', 's.py'], {bad}}}\n")
        with pytest.raises(TaskFormatError, match=msg):
            ServerRegistry.from_yaml(y)


async def test_validate_golden_fork_same_verdicts_as_spawn(ds):
    """The fixture dataset over stdio notes servers: `start: fork` gives spawn's verdicts, with a
    proof."""
    tasks = list(ds.tasks.values())
    out = {}
    for start in ("spawn", "fork"):
        reg = notes(start)
        out[start] = await validate_golden(tasks, reg, noop=True, strip=True, concurrency=2)
        reg.close()
    verdicts = {s: [(r["uid"], r["golden"], r["noop"]) for r in out[s]["results"]] for s in out}
    assert verdicts["fork"] == verdicts["spawn"] and out["fork"]["passed"] == len(tasks)
    assert "process_starts" not in out["spawn"]
    st = out["fork"]["process_starts"]["notes"]
    assert (st["mode"], st["proofs"], st["proofs_failed"], st["fallback"]) == ("fork", 1, 0, None)
    assert st["forks"] == 2 * len(tasks) + 1 and st["spawns"] == 1  # the proof: one of each
    assert "server notes: start fork -> fork:" in summary_text(out["fork"])
    # speed is a benchmark's business, not a test's: bench/golden_start.py (this replay, spawn vs
    # fork, in one run) and bench/sandbox.py (one session, spawn / fork / reuse)


def test_cli_reports_process_starts():
    from typer.testing import CliRunner

    from trainer.cli import app

    args = ["validate-golden", str(DATASET), "--servers", str(DATASET / "servers_fork.yaml"), "--noop"]
    r = CliRunner().invoke(app, [*args, "--json"])
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.exit_code == 0 and s["failures"] == [], s["failures"]
    st = s["process_starts"]["notes"]
    assert (st["start"], st["mode"], st["proofs"], st["proofs_failed"], st["spawns"]) == ("fork", "fork", 1, 0, 1)
    text = CliRunner().invoke(app, args).stdout
    assert "server notes: start fork -> fork: " in text and "1 proof(s), 0 failed" in text


async def test_module_command_forks(tmp_path):
    """`{python} -m MODULE` forks too: the template reads the module's source (cwd on sys.path)."""
    spec = ServerSpec("planted", "mcp-process", start="fork", cwd=SERVERS,
                      command=[sys.executable, "-m", "counter_server"])
    reg = ServerRegistry({"planted": spec})
    assert await prove_start(reg, spec, {"items": ["a"]}, [("add_item", {"name": "b"})], "s1")
    async with ServerConnection(spec, starts=reg.starts) as conn:
        await conn.call("__reserved__init", {"config": {"items": ["z"]}})
        fx = await conn.effects()
        assert fx["result_db_state"] == {"items": ["z"]} and fx["sessions_seen"] == 1 and conn.pid
    assert reg.process_stats()["planted"]["template"]["modules"] > 100  # mcp and its dependencies
    reg.close()


async def test_counter_server_passes_the_fork_proof():
    spec = planted("counter_server.py")
    reg = ServerRegistry({"planted": spec})
    assert await prove_start(reg, spec, {"items": ["a"]}, [("add_item", {"name": "b"})], "s1")
    async with ServerConnection(spec, starts=reg.starts) as conn:  # forked: a fresh counter
        await conn.call("__reserved__init", {"config": {}})
        assert (await conn.effects())["sessions_seen"] == 1 and conn.pid is not None
    st = reg.process_stats()["planted"]
    assert (st["mode"], st["proofs"], st["forks"], st["spawns"]) == ("fork", 1, 2, 1)
    reg.close()


async def test_counter_server_fails_the_reuse_proof():
    """A module-level counter survives `__reserved__init`: a second session on one process differs
    from a fresh one, so `start: reuse` goes back to spawning (fork passed the same task above)."""
    spec = planted("counter_server.py", start="reuse")
    reg = ServerRegistry({"planted": spec})
    assert not await prove_start(reg, spec, {"items": ["a"]}, [("add_item", {"name": "b"})], "s1")
    st = reg.process_stats()["planted"]
    assert (st["mode"], st["proofs_failed"], st["differing"]) == ("spawn", 1, ["effects.sessions_seen"])
    assert "reuse proof failed" in st["fallback"] and not reg.starts.idle.get("planted")
    async with ServerConnection(spec, starts=reg.starts) as conn:  # spawned: a fresh counter
        await conn.call("__reserved__init", {"config": {}})
        assert (await conn.effects())["sessions_seen"] == 1
    reg.close()


async def test_reuse_serves_sessions_in_turn_from_one_process(ds):
    """The notes server resets its world at `__reserved__init`: it passes the reuse proof, and its
    sessions run in turn on one process, each from its task's initial state; a session that hit a
    system error does not give its process back."""
    reg = notes("reuse")
    tasks = list(ds.tasks.values())
    for i in range(12):
        task = tasks[i % len(tasks)]
        ws = task.world_state()
        async with Sandbox(task, reg, world_state=ws) as sb:
            fx = (await sb.effects())["notes"]
            assert fx["initial_db_state"] == expected_initial(ws["notes"]) == fx["result_db_state"]
            await sb.call_tool("add_note", {"text": f"n{i}"})
    st = reg.process_stats()["notes"]
    assert (st["mode"], st["proofs"], st["proofs_failed"], st["reuses"]) == ("reuse", 1, 0, 12)
    assert st["spawns"] == 2 and len(reg.starts.idle["notes"]) == 1  # the proof's process, then the spawned one
    [process] = reg.starts.idle["notes"]
    ws = tasks[0].world_state()
    ws["notes"]["fault"] = {"effects": "not-json"}
    with pytest.raises(SandboxError, match="not a JSON object"):
        async with Sandbox(tasks[0], reg, world_state=ws) as sb:
            await sb.effects()
    assert not reg.starts.idle["notes"] and not process.alive()
    reg.close()


async def test_pid_cached_at_import_fails_the_fork_proof():
    """A dependency caching its pid at import: forked children differ from spawned processes, the
    proof says where, and the server goes back to spawning (its sessions still work)."""
    spec = planted("counter_server.py", env={"COUNTER_REPORT_PID": "1"})
    reg = ServerRegistry({"planted": spec})
    assert not await prove_start(reg, spec, {}, [], "s1")
    st = reg.process_stats()["planted"]
    assert (st["mode"], st["proofs_failed"], st["differing"]) == ("spawn", 1, ["effects.import_pid_is_own"])
    assert "effects.import_pid_is_own" in st["fallback"]
    async with ServerConnection(spec, starts=reg.starts) as conn:
        await conn.call("__reserved__init", {"config": {}})
        assert (await conn.effects())["import_pid_is_own"] is True and conn.pid is None  # spawned
    reg.close()


async def test_thread_at_import_is_refused_not_hung():
    spec = planted("thread_server.py")
    reg = ServerRegistry({"planted": spec})
    t = time.perf_counter()
    async with ServerConnection(spec, starts=reg.starts, open_timeout=20) as conn:
        await conn.call("__reserved__init", {"config": {}})
        assert conn.pid is None  # spawned instead
    assert time.perf_counter() - t < 15
    st = reg.process_stats()["planted"]
    assert st["mode"] == "spawn" and "thread is running" in st["fallback"], st
    assert "telemetry-flusher" in st["fallback"] and "unsafe" in st["fallback"]
    with pytest.raises(SandboxError, match="fork: .*thread is running"):  # a forced fork says why
        async with ServerConnection(spec, starts=reg.starts, start="fork"):
            pass
    reg.close()


async def test_template_restarted_and_crash_is_one_sessions_error(ds):
    task = ds.tasks["notes_tasks.py:test_add_note"]
    reg = notes("fork")
    async with Sandbox(task, reg):
        pass
    os.kill(reg.process_stats()["notes"]["template"]["pid"], signal.SIGKILL)
    time.sleep(0.1)
    async with Sandbox(task, reg) as sb:  # a dead template is restarted
        assert json.loads(await sb.call_tool("add_note", {"text": "x"}))["id"] == 3
        assert sb.connections["notes"].pid is not None
    assert reg.process_stats()["notes"]["template_starts"] == 2
    ws = task.world_state()
    ws["notes"]["fault"] = {"crash_on": "add_note"}
    with pytest.raises(SandboxError, match="crashing in add_note"):  # the child's stderr tail
        async with Sandbox(task, reg, world_state=ws) as sb:
            pid = sb.connections["notes"].pid
            await sb.call_tool("add_note", {"text": "x"})
    assert not alive(pid)
    ws["notes"]["fault"] = {"hang_on": "add_note"}
    with pytest.raises(SandboxError, match="no answer within 1"):  # a hung child: its session's error
        async with Sandbox(task, reg, world_state=ws, call_timeout=1) as sb:
            pid = sb.connections["notes"].pid
            await sb.call_tool("add_note", {"text": "x"})
    assert not alive(pid)
    async with Sandbox(task, reg) as sb:  # the next session is unaffected
        assert sb.init_result["notes"]["note_count"] == 2
    assert reg.process_stats()["notes"]["mode"] == "fork"
    reg.close()


async def test_proof_rate_samples_later_sessions(ds):
    task = ds.tasks["notes_tasks.py:test_add_note"]
    reg = notes("fork", proof_rate=0.5)
    for _ in range(6):
        async with Sandbox(task, reg):
            pass
    st = reg.process_stats()["notes"]
    assert (st["proofs"], st["proofs_failed"], st["mode"]) == (1 + 3, 0, "fork")  # the first, then every 2nd
    reg.close()


HOST = textwrap.dedent("""
    import asyncio, json, sys, time
    from trainer.env.sandbox.mcp_host import ServerConnection, ServerRegistry, ServerSpec
    spec = ServerSpec("notes", "mcp-process", start="fork", command=[sys.executable, sys.argv[1]])
    reused = ServerSpec("again", "mcp-process", start="reuse", command=[sys.executable, sys.argv[1]])
    reg = ServerRegistry({"notes": spec, "again": reused})
    async def main():
        async with ServerConnection(reused, starts=reg.starts):
            pass  # its process waits in the pool for the next session
        async with ServerConnection(spec, starts=reg.starts) as conn:
            print(json.dumps([conn.pid, reg.process_stats()["notes"]["template"]["pid"],
                              reg.starts.idle["again"][0].proc.pid]), flush=True)
            time.sleep(3600)
    asyncio.run(main())
""")


def test_children_and_template_die_with_the_host():
    host = subprocess.Popen([sys.executable, "-c", HOST, str(SERVERS / "notes_server.py")],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    try:
        procs = json.loads(host.stdout.readline())  # a forked child, its template, an idle reused process
        assert all(alive(p) for p in procs)
    finally:
        host.kill()
        host.wait()
    deadline = time.time() + 5
    while any(alive(p) for p in procs) and time.time() < deadline:
        time.sleep(0.05)
    assert not [p for p in procs if alive(p)]


def expected_initial(config: dict) -> dict:
    state = {"notes": [dict(n) for n in SEED["notes"]]}
    for row in (config.get("data_patch") or {}).get("notes") or []:
        state["notes"] = [n for n in state["notes"] if n["id"] != row["id"]] + [dict(row)]
    state["notes"].sort(key=lambda n: n["id"])
    return state


async def test_many_forked_sessions_start_exact_and_leave_nothing(ds):
    """Leak test: many sessions (TBT_FORK_SESSIONS, default 120; the suite's default run has a
    10-minute budget, set 1000 or more for a soak), each from its task's exact initial state,
    random writes checked against a model; no child outlives its session."""
    import anyio

    n = int(os.environ.get("TBT_FORK_SESSIONS", "120"))
    tasks = list(ds.tasks.values())
    reg = notes("fork")
    rng = random.Random(12)
    pids: list[int] = []
    children: set[tuple[int, int]] = set()  # (pid, start time): one a session

    async def session(i: int) -> None:
        task = tasks[i % len(tasks)]
        ws = task.world_state()
        model = expected_initial(ws["notes"])
        async with Sandbox(task, reg, world_state=ws) as sb:
            pids.append(sb.connections["notes"].pid)
            children.add((pids[-1], started(pids[-1])))
            fx = await sb.effects()
            assert fx["notes"]["initial_db_state"] == model == fx["notes"]["result_db_state"], i
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.6 or not model["notes"]:
                    text = f"n{rng.randint(0, 999)}"
                    new_id = json.loads(await sb.call_tool("add_note", {"text": text}))["id"]
                    model["notes"].append({"id": new_id, "text": text, "label": ""})
                else:
                    victim = rng.choice(model["notes"])["id"]
                    await sb.call_tool("delete_note", {"note_id": victim})
                    model["notes"] = [x for x in model["notes"] if x["id"] != victim]
            assert (await sb.effects())["notes"]["result_db_state"] == model, i

    t = time.perf_counter()
    gate = anyio.Semaphore(4)

    async def one(i: int) -> None:
        async with gate:
            await session(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    secs = time.perf_counter() - t
    st = reg.process_stats()["notes"]
    template = st["template"]["pid"]
    print(f"\n{n} forked sessions in {secs:.1f} s ({secs / n * 1000:.0f} ms each, 4 at a time)")
    assert st["forks"] == n + 1 and st["mode"] == "fork" and len(children) == n  # a process of its own each
    assert not [p for p, start in children if alive(p) and started(p) == start]
    assert not Path(f"/proc/{template}/task/{template}/children").read_text().split()
    reg.close()
    assert not alive(template)
