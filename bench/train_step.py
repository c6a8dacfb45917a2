"""Seconds per verl training step on CPU and where they go: the CPU smoke (configs/cpu_smoke.yaml:
verl's own trainer, our agent loop, 2 steps of 2 tasks x 8 episodes, a random tiny Qwen3) run once
through scripts/run_train.sh, then each step's timings from verl's own metrics (the file logger):

    uv run python bench/train_step.py [--json] [--keep DIR] [--metrics FILE]

    rollout   timing_s/gen             the episodes: generation on the hf_cpu engine, sandbox, tools,
                                       user, grading (the reward is the verdict, computed in the loop)
    reward    timing_s/reward          verl's reward stage (the scores are already there)
    old_logp  timing_s/old_log_prob    the actor's log-probs of the rollouts
    adv       timing_s/adv             GRPO advantages
    update    timing_s/update_actor    the FSDP actor's PPO update
    sync      timing_s/update_weights  actor -> rollout engine weight sync
    save      timing_s/save_checkpoint
    step      timing_s/step            the whole step
plus the launch's wall time (Ray start, model and dataset load, both steps, exit).
`--metrics FILE` reads an existing run's metrics.jsonl instead of running one. The last line with
`--json` is one JSON object. A CPU-path figure: a GPU run spends its time elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = [("rollout", "timing_s/gen"), ("reward", "timing_s/reward"), ("old_logp", "timing_s/old_log_prob"),
         ("adv", "timing_s/adv"), ("update", "timing_s/update_actor"), ("sync", "timing_s/update_weights"),
         ("save", "timing_s/save_checkpoint"), ("step", "timing_s/step")]


def read_metrics(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            rows.append({"step": rec.get("step"), **(rec.get("data") or rec)})
    return rows


def run_smoke(work: Path) -> tuple[float, int]:
    env = {**os.environ, "CONFIG": "configs/cpu_smoke.yaml", "SMOKE_DIR": str(work / "smoke"),
           "CKPT_DIR": str(work / "checkpoints")}
    env.pop("RAY_ADDRESS", None)
    t = time.perf_counter()
    with open(work / "run.log", "w") as log:
        rc = subprocess.call([str(ROOT / "scripts" / "run_train.sh")], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - t, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", type=Path, help="run in DIR and keep it (default: a temp dir, removed)")
    ap.add_argument("--metrics", type=Path, help="an existing run's metrics.jsonl (no run)")
    args = ap.parse_args()
    wall = None
    if args.metrics:
        metrics = args.metrics
    else:
        work = args.keep or Path(tempfile.mkdtemp(prefix="tbt-train-bench-"))
        work.mkdir(parents=True, exist_ok=True)
        wall, rc = run_smoke(work)
        if rc != 0:
            print(f"the CPU smoke failed (exit {rc}); log: {work / 'run.log'}", file=sys.stderr)
            return rc
        metrics = work / "checkpoints" / "metrics.jsonl"
    steps = read_metrics(metrics)
    out = {"launch_wall_s": round(wall, 1) if wall is not None else None, "steps": []}
    print(f"{'step':>4}  " + "  ".join(f"{name:>8}" for name, _ in PARTS))
    for s in steps:
        row = {name: float(s[key]) for name, key in PARTS if key in s}
        out["steps"].append({"step": s["step"], **{k: round(v, 2) for k, v in row.items()}})
        print(f"{s['step']:>4}  " + "  ".join(f"{row[n]:8.1f}" if n in row else f"{'-':>8}" for n, _ in PARTS))
    if steps:
        mean = {n: sum(st.get(n, 0.0) for st in out["steps"]) / len(out["steps"]) for n, _ in PARTS}
        out["mean"] = {k: round(v, 2) for k, v in mean.items()}
        share = {n: (mean[n] / mean["step"] if mean["step"] else 0.0) for n, _ in PARTS if n != "step"}
        print("mean  " + "  ".join(f"{mean[n]:8.1f}" for n, _ in PARTS))
        print("share of a step: " + ", ".join(f"{n} {100 * v:.0f}%" for n, v in share.items()))
    if wall is not None:
        print(f"launch wall time (Ray, load, {len(steps)} steps, exit): {wall:.1f} s")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
