"""Golden replay over stdio process servers, `start: spawn` against `start: fork`, in one run.

    uv run python bench/golden_start.py [--tasks 100] [--json]

The workload is `tbt validate-golden` (golden replay + no-op of every task) on a dataset of
`--tasks` tasks made from the sandbox fixture (tests/fixtures/datasets/sandbox, its notes tasks
copied under new file names), each session served by the ThinkingBox-protocol notes server over
stdio. Spawn starts a fresh Python process per session (the reference's design); fork starts each
from a pre-imported template (trainer/env/sandbox/forkserver.py), whose start and first proof (a forked
and a spawned session compared) are inside the fork time. Printed: both wall times, the ratio,
whether every verdict is the same, and the fork side's process statistics.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from trainer.env.golden import validate_golden  # noqa: E402
from trainer.env.sandbox.mcp_host import ServerRegistry, ServerSpec  # noqa: E402
from trainer.env.taskformat.tasks import load_dataset  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "datasets" / "sandbox"
SERVER = ROOT / "tests" / "fixtures" / "servers" / "notes_server.py"
# what the mcp 2.x server imports as it runs (logging, stdio transport): once, in the template
PRELOAD = ["rich.logging", "rich.console", "anyio.streams.stapled", "anyio._core._sockets"]


def make_dataset(root: Path, n_tasks: int) -> Path:
    """The fixture with its test file copied until there are at least `n_tasks` tasks."""
    ds = root / "ds"
    shutil.copytree(FIXTURE, ds, ignore=shutil.ignore_patterns("servers*.yaml", "lists"))
    src = ds / "test_case" / "notes_tasks.py"
    per_file = len(load_dataset(ds, strict=True).tasks)
    for k in range(1, -(-n_tasks // per_file)):
        shutil.copy(src, src.with_name(f"notes_tasks_{k}.py"))
    return ds


def registry(start: str) -> ServerRegistry:
    return ServerRegistry({"notes": ServerSpec("notes", "mcp-process", start=start, preload=PRELOAD,
                                               command=[sys.executable, str(SERVER)])})


async def replay(tasks: list, start: str) -> tuple[float, dict]:
    reg = registry(start)
    t = time.perf_counter()
    try:
        out = await validate_golden(tasks, reg, noop=True, strip=True, concurrency=2)
    finally:
        reg.close()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100, help="tasks in the generated dataset (default 100)")
    ap.add_argument("--json", action="store_true", help="also print one JSON object, last line")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tasks = list(load_dataset(make_dataset(Path(tmp), args.tasks), strict=True).tasks.values())
        spawn_s, spawn = asyncio.run(replay(tasks, "spawn"))
        fork_s, fork = asyncio.run(replay(tasks, "fork"))
    same = [(r["uid"], r["golden"], r["noop"]) for r in spawn["results"]] == \
           [(r["uid"], r["golden"], r["noop"]) for r in fork["results"]]
    res = {"tasks": len(tasks), "sessions": 2 * len(tasks), "spawn_s": round(spawn_s, 2),
           "fork_s": round(fork_s, 2), "ratio_spawn_vs_fork": round(spawn_s / fork_s, 1),
           "same_verdicts": same, "passed": fork["passed"], "system_errors": fork["system_errors"],
           "fork_stats": fork.get("process_starts", {}).get("notes")}
    for k, v in res.items():
        print(f"{k:22s} {v}")
    if args.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
