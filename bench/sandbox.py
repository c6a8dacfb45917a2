"""Sandbox bench: what one GRPO rollout pays for its world, ours against two baselines, in one run.

    uv run python bench/sandbox.py            # a table with ratios
    uv run python bench/sandbox.py --json     # ... and, last line, one JSON object

On a ~5k-row domain database (1,000 customers, 4,000 orders; built here with the domain kit):
  (a) fresh backend + session open + close   (in-process `Sandbox`: private SQLite copy, a fresh
      domain server called directly (its `direct_call`: no MCP client, no JSON-RPC; see
      docs/sandbox.md), `__reserved__init`, tool listing, `__reserved__teardown`). The copy comes
      from the connection pool (a previous session's connection, rolled back to the snapshot,
      schema parsed); the "cold" row shows a session that must deserialize and parse the schema.
  (b) one tool call                           (a write, a direct in-process call)
  (c) effects + verdict                       (what `__reserved__geteffects` returns, as the dict the
                                               server hands over directly, + the task's check)
Baselines, measured in the same run:
  - process per session (the reference's design): the same domain served over stdio, one
    process per session, open + init + close;
  - the process path three ways (`start:` of a servers.yaml entry, trainer/env/sandbox/forkserver.py):
    spawn (a fresh process), fork (a child of a pre-imported template) and reuse (one process,
    sessions in turn), each as session open (+ init), one tool call, effects, close, and the ratio
    of each to spawn (the proofs run before the timed sessions, and are reported);
  - JSON reload (tau2-bench's design): load the database from JSON, deep-copy it, hash it as
    canonical JSON.
All figures are medians. `python bench/sandbox.py --serve` is the stdio server of the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.domains.kit import Domain, Session, ToolError  # noqa: E402

N_CUSTOMERS, N_ORDERS = 1000, 4000
SCHEMA = """
CREATE TABLE customers (id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, tier TEXT NOT NULL);
CREATE TABLE orders (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, total REAL NOT NULL, note TEXT);
"""


def _seed(conn) -> None:
    conn.executemany("INSERT INTO customers VALUES (?,?,?,?)",
                     [(f"C-{i:04d}", f"Customer {i}", f"c{i}@example.org", ("gold", "silver", "basic")[i % 3])
                      for i in range(N_CUSTOMERS)])
    conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?)",
                     [(f"O-{i:05d}", f"C-{i % N_CUSTOMERS:04d}", ("open", "shipped", "delivered")[i % 3],
                       round(10 + (i * 7.31) % 490, 2), None) for i in range(N_ORDERS)])


SHOP = Domain("benchshop", schema=SCHEMA, seed=_seed)


@SHOP.tool("Cancel an open order.", params={"order_id": {"type": "string"}, "reason": {"type": "string"}})
def cancel_order(db: Session, order_id: str, reason: str) -> dict:
    order = db.one("SELECT * FROM orders WHERE id = ?", (order_id,))
    if order is None or order["status"] != "open":
        raise ToolError(f"order {order_id} is not open")
    db.conn.execute("UPDATE orders SET status = 'cancelled', note = ? WHERE id = ?", (reason, order_id))
    return {"order_id": order_id, "status": "cancelled"}


DATASET_FILES = {
    "agent/a.yaml": "system_instructions: You help shop customers.\n",
    "scenario/benchshop.yaml": "world_state:\n  benchshop: {data_patch: null, golden_test_case: null}\n"
                               "tools:\n- name: cancel_order\n",
    "test_case/bench.py": '''
def test_cancel(x, judge):
    """!
    scenario: benchshop
    query: Cancel order O-00003, I changed my mind.
    init:
      benchshop:
        golden_test_case:
          tool_interactions:
          - {tool: cancel_order, parameters: {order_id: O-00003, reason: changed mind}}
    """
    fx = x.effects["benchshop"]
    assert fx["result_db_hash"] == fx["golden_db_hash"], fx["diff"]
''',
}


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


async def bench(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="tbt-bench-") as tmp:
        return await _bench(args, Path(tmp))


async def _bench(args: argparse.Namespace, tmp: Path) -> dict:
    from trainer.env.grading.context import TestContext
    from trainer.env.grading.grader import grade
    from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry, ServerSpec
    from trainer.env.taskformat.tasks import load_dataset

    for rel, text in DATASET_FILES.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    task = load_dataset(tmp, strict=True).tasks["bench.py:test_cancel"]
    rows = sum(len(t) for t in SHOP.snapshot.state().state.values())
    inproc = ServerRegistry({"benchshop": ServerSpec("benchshop", "in-process", factory=SHOP.create_server)})

    async with Sandbox(task, inproc):  # warm-up: snapshot, tool schemas, golden cache
        pass
    async def open_close(registry: ServerRegistry, n: int) -> list[float]:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            async with Sandbox(task, registry):
                pass
            times.append(time.perf_counter() - t)
        return times

    fresh = await open_close(inproc, args.sessions)

    from trainer.env.db.backend import POOL

    cold = []  # the same without a pooled connection: deserialize + the first statement's schema parse
    for _ in range(args.sessions // 4):
        POOL.clear()
        t = time.perf_counter()
        async with Sandbox(task, inproc) as sb:
            await sb.call_tool("cancel_order", {"order_id": "O-99999", "reason": "parse the schema"})
        cold.append(time.perf_counter() - t)

    calls, verdicts = [], []
    for i in range(args.calls):
        async with Sandbox(task, inproc) as sb:
            t = time.perf_counter()
            reply = await sb.call_tool("cancel_order", {"order_id": f"O-{3 * (i % 1300):05d}", "reason": "bench"})
            calls.append(time.perf_counter() - t)
            assert "error" not in reply, reply
            t = time.perf_counter()
            fx = await sb.effects()
            grade(task, TestContext(effects=fx))
            verdicts.append(time.perf_counter() - t)

    proc = ServerRegistry({"benchshop": ServerSpec("benchshop", "mcp-process",
                                                   command=[sys.executable, str(Path(__file__).resolve()), "--serve"])})
    process = await open_close(proc, args.processes)
    paths = await process_paths(task, args)

    json_path = tmp / "db.json"
    json_path.write_text(json.dumps(SHOP.snapshot.state().state))
    reload = []
    for _ in range(args.sessions // 4):
        t = time.perf_counter()
        db = json.loads(json_path.read_text())
        db = copy.deepcopy(db)
        hashlib.sha256(json.dumps(db, sort_keys=True).encode()).hexdigest()
        reload.append(time.perf_counter() - t)

    return {"rows": rows, "fresh_session_ms": median_ms(fresh), "cold_session_ms": median_ms(cold),
            "tool_call_ms": median_ms(calls),
            "verdict_ms": median_ms(verdicts), "baseline_process_session_ms": median_ms(process),
            "baseline_json_reload_ms": median_ms(reload), "process_paths": paths,
            "samples": {"fresh": len(fresh), "cold": len(cold), "calls": len(calls), "process": len(process),
                        "reload": len(reload)}}


# what the stdio server imports as it runs (logging, transport): the fork template imports it once
PRELOAD = ["rich.logging", "rich.console", "anyio.streams.stapled", "anyio._core._sockets"]


async def process_paths(task, args: argparse.Namespace) -> dict:
    """Session open (+ init), one call, effects, close over stdio, for each `start:`; medians."""
    from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry, ServerSpec

    out = {}
    for start, n in (("spawn", args.processes), ("fork", args.forks), ("reuse", args.forks)):
        reg = ServerRegistry({"benchshop": ServerSpec(
            "benchshop", "mcp-process", command=[sys.executable, str(Path(__file__).resolve()), "--serve"],
            start=start, preload=PRELOAD)})
        if start != "spawn":
            async with Sandbox(task, reg):  # the template (fork), the proof
                pass
        phases: dict[str, list[float]] = {"open": [], "call": [], "effects": [], "close": [], "session": []}
        for i in range(n):
            t0 = time.perf_counter()
            sb = Sandbox(task, reg)
            await sb.__aenter__()
            t1 = time.perf_counter()
            await sb.call_tool("cancel_order", {"order_id": f"O-{3 * (i % 1300):05d}", "reason": "bench"})
            t2 = time.perf_counter()
            await sb.effects()
            t3 = time.perf_counter()
            await sb.aclose()
            t4 = time.perf_counter()
            for k, v in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                phases[k].append(v)
        out[start] = {k: median_ms(v) for k, v in phases.items()}
        out[start]["stats"] = reg.process_stats()["benchshop"]
        reg.close()
    for start in ("fork", "reuse"):  # the whole session, and what the start decides (open + close)
        out[start]["speedup_vs_spawn"] = out["spawn"]["session"] / out[start]["session"]
        out[start]["open_close_speedup_vs_spawn"] = ((out["spawn"]["open"] + out["spawn"]["close"])
                                                     / (out[start]["open"] + out[start]["close"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    ap.add_argument("--serve", action="store_true", help="serve the bench domain over stdio (baseline)")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--processes", type=int, default=5, help="sessions timed on spawned processes")
    ap.add_argument("--forks", type=int, default=20, help="sessions timed on forked / reused processes")
    args = ap.parse_args()
    if args.serve:
        SHOP.create_server().run("stdio")
        return
    r = asyncio.run(bench(args))
    rows = [("fresh backend + session open + close", r["fresh_session_ms"], 1.0, "<= 1 ms"),
            ("  same, cold (no pooled connection) + 1 call", r["cold_session_ms"],
             r["cold_session_ms"] / r["fresh_session_ms"], "(info)"),
            ("one tool call", r["tool_call_ms"], None, "<= 0.4 ms"),
            ("effects + verdict", r["verdict_ms"], None, "<= 5 ms"),
            ("baseline: process per session", r["baseline_process_session_ms"],
             r["baseline_process_session_ms"] / r["fresh_session_ms"], ""),
            ("baseline: JSON reload + deepcopy + hash", r["baseline_json_reload_ms"],
             r["baseline_json_reload_ms"] / r["fresh_session_ms"], "")]
    print(f"sandbox bench on a {r['rows']}-row database (medians)")
    print(f"{'measure':42} {'ms':>10} {'× ours':>9}  target")
    for name, ms, ratio, target in rows:
        print(f"{name:42} {ms:10.3f} {'' if ratio is None else f'{ratio:8.0f}x':>9}  {target}")
    paths = r["process_paths"]
    print("\nprocess path, one session over stdio (medians, ms; proofs before the timed sessions)")
    print(f"{'start':8} {'open+init':>10} {'call':>8} {'effects':>8} {'close':>8} {'session':>9} {'vs spawn':>9} "
          f"{'open+close vs spawn':>20}  proofs")
    s0 = paths["spawn"]
    for start, p in paths.items():
        st = p["stats"]
        print(f"{start:8} {p['open']:10.1f} {p['call']:8.2f} {p['effects']:8.2f} {p['close']:8.1f} {p['session']:9.1f} "
              f"{s0['session'] / p['session']:8.1f}x {(s0['open'] + s0['close']) / (p['open'] + p['close']):19.1f}x  "
              f"{st['proofs']} ({st['proofs_failed']} failed)"
              f"{'; fallback: ' + st['fallback'] if st['fallback'] else ''}")
    if args.json:
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}))


if __name__ == "__main__":
    main()
