"""Episodes per second: the synthetic policy + the scripted user on the sample domains, in one run.

    uv run python bench/episodes.py [--repeat 3] [--concurrency 8] [--process-tasks 10] [--json]

What is measured (all in this run, on this machine):
  (a) the runner: every sample task `--repeat` times through `run_episodes` (the code `tbt run`
      runs: sandbox, synthetic turns written as Qwen text and read by tb_interpret, tool calls,
      scripted user, effects, verdict, one fsynced JSONL line per episode), warm (a first pass
      fills the domains' golden caches and compiles the test files, as any long run does);
      goal: >= 100 episodes/s on the 2-core machine;
  (b) the floor: the same episodes' golden calls replayed straight into a `Sandbox` with the
      same verdicts (no policy, no interpretation, no user, no records): what the world itself
      costs. Framework overhead per episode = (a) - (b) per episode; per tool call = the episode
      layer's time around each call (episode time not spent inside the sandbox, the grader or
      the record writer, over the calls);
  (c) the process-per-session path: the same runner and policy with the domains served as stdio
      processes (`tbt serve-domain`, one process per session: the reference's design), on
      `--process-tasks` tasks, and the ratio of (a) to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from trainer.env.grading.context import TestContext, ToolCall, ToolCallRecord  # noqa: E402
from trainer.env.grading.grader import grade_async  # noqa: E402
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry, ServerSpec  # noqa: E402
from trainer.formats.record import read_records  # noqa: E402
from trainer.rollout.runner import local_execute, run_episodes  # noqa: E402
from trainer.rollout.setup import RunSpec, build_setup, load_run_dataset  # noqa: E402

SAMPLES = ROOT / "data" / "samples"


async def runner_pass(tasks, setup, out: Path, repeat: int, concurrency: int) -> float:
    t = time.perf_counter()
    res = await run_episodes(tasks, repeat, local_execute(setup), output=out, concurrency=concurrency)
    dt = time.perf_counter() - t
    assert not res.unresolved and res.written == len(tasks) * repeat, res
    return dt


async def floor_pass(tasks, setup, repeat: int) -> tuple[float, int]:
    """Golden calls straight into a sandbox + effects + the same grading: the world's own cost."""
    calls = 0
    t = time.perf_counter()
    for _ in range(repeat):
        for task in tasks:
            async with Sandbox(task, setup.registry, setup.agent) as sb:
                done = []
                for _, tool, params in task.golden_paths()[0] if task.golden_paths() else []:
                    done.append(ToolCallRecord(ToolCall(tool, params), await sb.call_tool(tool, params)))
                    calls += 1
                effects = await sb.effects()
            await grade_async(task, TestContext(response="", effects=effects, tool_calls=done), setup.judge)
    return time.perf_counter() - t, calls


def process_setup(spec: RunSpec, ds):
    setup = build_setup(spec, ds)
    specs = {name: ServerSpec(name, "mcp-process", command=[sys.executable, "-m", "trainer.domains.serve", name])
             for name in ("toy", "property", "procurement", "telecom")}
    setup.registry = ServerRegistry(specs)
    return setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--process-tasks", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.7")
    ds = load_run_dataset(spec)
    tasks = [t for t in ds.tasks.values() if not t.skip]
    setup = build_setup(spec, ds)
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(runner_pass(tasks, setup, Path(d) / "warm.jsonl", 1, args.concurrency))  # caches, compiles
        out = Path(d) / "r.jsonl"
        t_run = asyncio.run(runner_pass(tasks, setup, out, args.repeat, args.concurrency))
        recs = read_records(out)
        seq = Path(d) / "seq.jsonl"
        t_seq = asyncio.run(runner_pass(tasks, setup, seq, 1, 1))
        t_floor, floor_calls = asyncio.run(floor_pass(tasks, setup, 1))
        n = len(recs)
        n_calls = sum(len(r.tool_calls) for r in recs)
        inside = statistics.fmean(r.timings["open"] + r.timings["tools"] + r.timings["effects"] + r.timings["grade"]
                                  + r.timings["close"] for r in read_records(seq))
        per_ep_seq = t_seq / len(tasks)
        ptasks = tasks[: args.process_tasks]
        psetup = process_setup(spec, ds)
        t_proc = asyncio.run(runner_pass(ptasks, psetup, Path(d) / "proc.jsonl", 1, min(args.concurrency, 4)))
        proc_recs = read_records(Path(d) / "proc.jsonl")
        same = all(p.verdict["passed"] == q.verdict["passed"]
                   for p, q in zip(proc_recs, (r for r in read_records(seq) if r.uid in {t.uid for t in ptasks})))
    eps = n / t_run
    proc_eps = len(ptasks) / t_proc
    floor_per_ep = t_floor / len(tasks)
    result = {
        "episodes": n, "tool_calls": n_calls, "concurrency": args.concurrency, "seconds": round(t_run, 3),
        "episodes_per_s": round(eps, 1), "goal_episodes_per_s": 100, "meets_goal": eps >= 100,
        "pass_rate": round(sum(r.passed for r in recs) / n, 3),
        "sequential_ms_per_episode": round(per_ep_seq * 1e3, 3),
        "floor_ms_per_episode": round(floor_per_ep * 1e3, 3),
        "overhead_ms_per_episode": round((per_ep_seq - floor_per_ep) * 1e3, 3),
        "overhead_ms_per_tool_call": round((per_ep_seq - inside) / max(1e-9, n_calls / n) * 1e3, 3),
        "episode_over_floor": round(per_ep_seq / floor_per_ep, 2),
        "process_per_session_episodes_per_s": round(proc_eps, 2),
        "in_process_over_process_per_session": round(eps / proc_eps, 1),
        "process_verdicts_same": same,
    }
    print(f"runner (synthetic + scripted user, {len(tasks)} sample tasks x {args.repeat}, concurrency "
          f"{args.concurrency}): {n} episodes in {t_run:.2f} s = {eps:.1f} episodes/s (goal >= 100: "
          f"{'met' if eps >= 100 else 'NOT met'}), pass rate {result['pass_rate']:.1%}")
    print(f"one episode, sequential: {per_ep_seq * 1e3:.2f} ms; the world alone (golden calls + effects + "
          f"verdict): {floor_per_ep * 1e3:.2f} ms -> framework overhead {result['overhead_ms_per_episode']:.2f} ms "
          f"per episode ({result['episode_over_floor']}x the floor), {result['overhead_ms_per_tool_call']:.3f} ms "
          f"per tool call ({n_calls / n:.1f} calls per episode)")
    print(f"process per session (stdio, one process per session, {len(ptasks)} tasks): {proc_eps:.2f} episodes/s "
          f"-> in-process is {result['in_process_over_process_per_session']}x faster; same verdicts: {same}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
