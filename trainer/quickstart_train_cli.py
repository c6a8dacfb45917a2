"""`tbt quickstart --train`: the whole learning loop on a laptop's CPU, each stage the command
docs/training.md shows, run in order, resumable, with progress:

1. warm start   `tbt warm-start` of a tiny Qwen3 on the laptop pool's golden trajectories (OUT/warm)
2. base eval    `tbt eval` of the warm start, k attempts per task (OUT/base.jsonl, OUT/base.agg.json):
                also the probes whose Jeffreys bands pick the tasks GRPO trains on
3. GRPO         `scripts/run_train.sh` with configs/laptop_grpo.yaml: verl's trainer, N steps
                (OUT/checkpoints, its metrics.jsonl the reward per step)
4. merge        `tbt checkpoint merge --full-precision` of the last step (OUT/trained)
5. trained eval `tbt eval` of it, as the base (OUT/trained.jsonl, OUT/trained.agg.json); both
                evaluations two turns at a time on one model (`hf:...,threads=2,slots=2`)
6. compare      `tbt compare --json` and `tbt report --training` (OUT/report.html)

Both evaluations end an episode at the agent-turn cap GRPO ends its episodes at (the training
config's `thinkingbox.max_agent_turns`, `agent_turn_cap`; the summary's `max_agent_turns`): the base
evaluation's records are also the probes that pick GRPO's tasks, and a pass rate measured with
another cap than training's is a pass rate on other episodes (`tbt eval`'s own default is 200).
Both play the float32 weights the rollouts played: the warm start as written, and the
trained step as verl's checkpoint manager saved it beside the shards (configs/laptop_grpo.yaml
saves `hf_model`). Not verl's merger: it casts to bfloat16, and a few GRPO steps move this tiny
model's weights by less than bfloat16's rounding (after 4 steps at lr 5e-4 the rounding error's
norm was 3.5x the update's), so a bfloat16 comparison measures the rounding. A stage whose
output is complete is kept on a rerun (the evaluations resume their records); a failing stage
stops the run with its exit code and the tail of its log (OUT/logs/STAGE.log).

A module of the command line's layer: its stages are `tbt` commands of several packages (the warm
start's trainer/data, the evaluations' trainer/eval, verl's checkpoint merge), each run as the
process `python -m trainer.cli ...` and shown as the `tbt ...` a user would type. Its plan, the
stage runner and what the GRPO stage reads of the laptop config are trainer/verl/quickstart_train.py's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trainer.verl.quickstart_train import (
    CONFIG, ROOT, Runner, StageError, TrainPlan, agent_turn_cap, algorithm, pool_tasks
)


def tbt(*args: Any) -> list[str]:
    """The process that runs `tbt ARGS` (this interpreter's trainer.cli)."""
    return [sys.executable, "-m", "trainer.cli", *map(str, args)]


def shown(cmd: Sequence[str]) -> list[str]:
    """A `tbt` process (`tbt(...)`) as the user types it: `tbt ARGS`."""
    return ["tbt", *cmd[3:]]


def _records(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError:
        return 0


def _steps(metrics: Path) -> int:
    """Steps logged so far (a step logged again after a resume counts once)."""
    try:
        lines = metrics.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    steps = set()
    for line in lines:
        try:
            steps.add(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue  # a line being written
    return len(steps)


def eval_command(plan: TrainPlan, model: Path, label: str, turns: int) -> list[str]:
    """`tbt eval` of `model` as both evaluations run it: the laptop list, k attempts per task, the
    laptop sampling, training's agent-turn cap, records and agg.json under the loop's directory;
    two turns at once on the one model, two threads each (each turn draws from its own seeded
    generator: the same ids as one at a time; 94 s for the 64 episodes on 2 cores, against 102 s for
    one single-thread model per core on Ray's local workers, whose start is most of the difference)."""
    return tbt("eval", plan.dataset, "--test-list", plan.test_list, "--policy",
               f"hf:{model},dtype=float32,threads=2,slots=2",
               "--sampling", ROOT / "configs" / "sampling_laptop.yaml", "--user", "scripted",
               "--judge", "synthetic", "-n", plan.k, "--seed", plan.seed, "--max-agent-turns", turns,
               "-o", plan.out / f"{label}.jsonl", "--aggregate-output", plan.out / f"{label}.agg.json",
               "--label", label, "--no-progress")


def train_loop(plan: TrainPlan, say: Callable[[str], None]) -> dict[str, Any]:
    """The six stages (module docstring); the summary of the comparison."""
    out = plan.out.resolve()
    plan.out = out
    out.mkdir(parents=True, exist_ok=True)
    run = Runner(plan, say)
    n_tasks = sum(1 for line in plan.test_list.read_text(encoding="utf-8").splitlines() if line.strip().startswith("- "))
    episodes = n_tasks * plan.k
    warm, trained = out / "warm", out / "trained"
    ckpt = out / "checkpoints"
    metrics = ckpt / "metrics.jsonl"
    env = {"LAPTOP_DIR": str(out), "CKPT_DIR": str(ckpt), "STEPS": str(plan.steps), "SAVE_FREQ": "1",
           "LR": str(plan.lr), "ADV": plan.adv_estimator, "CONFIG": CONFIG, "EXPERIMENT": "quickstart-train"}
    turns = agent_turn_cap({**os.environ, **env})

    def evaluate(i: int, name: str, model: Path, label: str) -> Path:
        records = out / f"{label}.jsonl"
        cmd = eval_command(plan, model, label, turns)
        run.stage(i, name, cmd, shown=shown(cmd), watch=lambda: f"{min(_records(records), episodes)}/{episodes} episodes")
        return out / f"{label}.agg.json"

    if plan.start is not None:
        src = plan.start.resolve()
        base_agg, base_records = src / "base.agg.json", src / "base.jsonl"
        if not ((src / "warm" / "config.json").is_file() and base_agg.is_file() and base_records.is_file()):
            raise StageError(f"{src}: no finished warm start and base evaluation to start from "
                             "(warm/config.json, base.jsonl, base.agg.json)", 2)
        if not (warm / "config.json").is_file():  # GRPO trains from OUT/warm (configs/laptop_grpo.yaml)
            shutil.copytree(src / "warm", warm, dirs_exist_ok=True)
        run.kept(1, "warm start", src / "warm", "the run this one starts from")
        run.kept(2, "base evaluation", base_agg, "the run this one starts from")
    else:
        if (warm / "config.json").is_file():
            run.kept(1, "warm start", warm)
        else:
            cmd = tbt("warm-start", plan.dataset, "--test-list", plan.test_list, "-o", warm, "--epochs", plan.epochs,
                      "--lr", plan.warm_lr, "--seed", plan.seed, "--no-progress")
            run.stage(1, "warm start", cmd, shown=shown(cmd))
        base_agg, base_records = evaluate(2, "base evaluation", warm, "base"), out / "base.jsonl"
    probes = out / "probes.jsonl"
    probes.write_bytes(base_records.read_bytes())  # the prepare step bands these (configs/laptop_grpo.yaml)

    last = ckpt / f"global_step_{plan.steps}"
    if last.is_dir():
        run.kept(3, "GRPO", last)
    else:
        # every pool task in every step, one update over all their groups (configs/laptop_grpo.yaml),
        # unless the caller set BATCH
        if os.environ.get("BATCH"):
            env["BATCH"] = os.environ["BATCH"]
        else:  # pool_tasks runs the config's prepare step: the launch then only checks the pool it made
            env.update(BATCH=str(pool_tasks(run, {**env, **run.env})), SKIP_PREPARE="true")
        run.stage(3, "GRPO", ["bash", str(ROOT / "scripts" / "run_train.sh"), *plan.grpo_overrides], env=env,
                  watch=lambda: f"step {min(_steps(metrics), plan.steps)}/{plan.steps} done")
    if (trained / "config.json").is_file():
        run.kept(4, "merge", trained)
    else:
        cmd = tbt("checkpoint", "merge", ckpt, "--step", plan.steps, "--target", trained, "--full-precision")
        run.stage(4, "merge", cmd, shown=shown(cmd))
    cand_agg = evaluate(5, "trained evaluation", trained, "trained")

    say(f"[6/6] compare: tbt compare {base_agg} {cand_agg} --json")
    res = subprocess.run(tbt("compare", base_agg, cand_agg, "--json", "--seed", plan.seed), cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode:
        raise StageError(f"compare failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}", res.returncode)
    (out / "compare.json").write_text(res.stdout, encoding="utf-8")
    cmp = json.loads(res.stdout)
    report = out / "report.html"
    cmd = tbt("report", base_agg, cand_agg, "--html", report, "--training", metrics)
    run.stage(6, "report", cmd, shown=shown(cmd))
    from trainer.verl.trainlog import curve, read

    steps = read(metrics)
    return {"algorithm": algorithm(plan), "lr": plan.lr, "control": plan.control, "overrides": list(plan.overrides),
            "lora": {"rank": plan.lora_rank, "alpha": 2 * plan.lora_rank} if plan.lora_rank else None,
            **verdict(cmp), "steps": plan.steps,
            "k": plan.k, "max_agent_turns": turns,
            "reward_per_step": [r["score"] for r in curve(steps)],
            "update": update_cost(steps, last),
            "report": str(report), "seconds": run.seconds, "total_seconds": round(sum(run.seconds.values()), 1)}


def update_cost(steps: Sequence[tuple[int, Mapping[str, Any]]], last: Path) -> dict[str, Any]:
    """What the GRPO steps cost, from verl's metrics and the last checkpoint: seconds per step (mean
    of `timing_s/step`) and of its update (`timing_s/update_actor`), the actor worker's largest
    resident memory (`actor/perf/cpu_memory_used_gb`), and the optimizer state the update keeps
    (the step's optimizer shards, bytes): a LoRA run's holds the adapter's moments alone."""
    def mean(key: str) -> float | None:
        vals = [m[key] for _, m in steps if isinstance(m.get(key), (int, float))]
        return round(sum(vals) / len(vals), 1) if vals else None

    memory = [m["actor/perf/cpu_memory_used_gb"] for _, m in steps
              if isinstance(m.get("actor/perf/cpu_memory_used_gb"), (int, float))]
    optim = sum(p.stat().st_size for p in (last / "actor").glob("optim_world_size_*_rank_*.pt"))
    return {"seconds_per_step": mean("timing_s/step"), "update_seconds": mean("timing_s/update_actor"),
            "actor_memory_gb": round(max(memory), 2) if memory else None, "optimizer_state_bytes": optim or None}


def verdict(cmp: Mapping[str, Any]) -> dict[str, Any]:
    """What the summary takes from `tbt compare --json`: pass@1 of both runs (Table 1) and compare's
    one verdict on the change (`change`: trainer/eval/compare.py), `delta`, `delta_interval`,
    `distinguishable`, the `method` and the `pairing` of the attempts, over `tasks` tasks, and its
    `coverage_warning` (why the interval may cover less often than its level at few tasks, or None)."""
    pass1 = next(r for r in cmp["table1"] if r["metric"].startswith("pass@1"))
    ch = cmp["change"]
    return {"base_pass_at_1": pass1["base"]["share"], "trained_pass_at_1": pass1["candidate"]["share"],
            "delta": ch["delta"], "delta_interval": ch["delta_interval"], "distinguishable": ch["distinguishable"],
            "method": ch["method"], "pairing": ch["pairing"], "tasks": ch["tasks"],
            "coverage_warning": ch.get("coverage_warning")}


__all__ = ["StageError", "TrainPlan", "eval_command", "shown", "tbt", "train_loop", "update_cost", "verdict"]
