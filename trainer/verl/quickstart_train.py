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
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

ROOT = Path(__file__).resolve().parents[2]
LAPTOP_LIST = ROOT / "data" / "samples" / "lists" / "laptop.yaml"
CONFIG = "configs/laptop_grpo.yaml"


class StageError(RuntimeError):
    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclass
class TrainPlan:
    out: Path
    dataset: Path = ROOT / "data" / "samples"
    test_list: Path = LAPTOP_LIST
    steps: int = 4
    k: int = 8
    epochs: float = 48.0
    warm_lr: float = 3e-2
    lr: float = 5e-4
    seed: int = 0
    control: bool = False  # the permuted-reward control (advantage.CONTROL) instead of GRPO
    progress: bool = True
    estimator: str = "grpo"  # verl's advantage estimator when not the control (grpo_positive: ours)
    # another run's directory whose warm start and base evaluation this one starts from (a control
    # beside its GRPO run: the same weights, the same base episodes), instead of its own stages 1-2
    start: Path | None = None
    # verl overrides appended to the GRPO stage's launch (`key=value`, as scripts/run_train.sh takes
    # them): the settings bench/learning.py searches (Adam's betas, warmup, ...)
    overrides: tuple[str, ...] = ()

    @property
    def adv_estimator(self) -> str:
        return "grpo_permuted" if self.control else self.estimator


def tbt(*args: Any) -> list[str]:
    return [sys.executable, "-m", "trainer.cli", *map(str, args)]


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


class Runner:
    def __init__(self, plan: TrainPlan, say: Callable[[str], None]):
        self.plan, self.say = plan, say
        self.logs = plan.out / "logs"
        self.seconds: dict[str, float] = {}
        # every stage plays the toy loans' wall-clock stamp (`recorded_at`, shown to the agent in
        # tool results) at the session's fixed clock, as the warm start's golden episodes do: with
        # real time, two runs of the same seeds differ in those tokens and the tiny model's draws
        # after them (trainer/domains/kit.py; a TBT_WALL_CLOCK the caller set is kept)
        from trainer.domains.kit import WALL_CLOCK_ENV  # here: this module's import stays stdlib-only

        self.env = {WALL_CLOCK_ENV: os.environ.get(WALL_CLOCK_ENV, "").strip() or "session"}

    def stage(self, i: int, name: str, cmd: list[str], *, env: dict[str, str] | None = None,
              watch: Callable[[], str] | None = None) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{i}-{name.replace(' ', '-')}.log"
        shown_cmd = ["tbt", *cmd[3:]] if cmd[:3] == tbt() else cmd
        self.say(f"[{i}/6] {name}: {' '.join(shown_cmd)}  (log {log})")
        t0 = time.monotonic()
        shown = ""
        with log.open("ab") as f:  # a rerun adds to the log of the run before it
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(map(str, cmd))}\n".encode())
            f.flush()
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **self.env, **(env or {})})
            while p.poll() is None:
                time.sleep(2)
                now = watch() if watch else ""
                if self.plan.progress and now and now != shown:
                    self.say(f"[{i}/6] {name}: {now} ({time.monotonic() - t0:.0f} s)")
                    shown = now
        self.seconds[name] = round(time.monotonic() - t0, 1)
        if p.returncode:
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
            raise StageError(f"{name} failed (exit {p.returncode}); the end of {log}:\n" + "\n".join(tail),
                             p.returncode if 0 < p.returncode < 128 else 1)
        self.say(f"[{i}/6] {name}: done in {self.seconds[name]:.0f} s")

    def kept(self, i: int, name: str, what: Path, why: str = "remove it to redo this stage") -> None:
        self.seconds[name] = 0.0
        self.say(f"[{i}/6] {name}: kept {what} ({why})")


def agent_turn_cap(env: Mapping[str, str], config: Path = ROOT / CONFIG) -> int:
    """The agent-turn cap of the training config's episodes (`+thinkingbox.max_agent_turns`, which
    the launch hands verl as it is; the episode's default cap where the config sets none)."""
    from trainer.rollout.episode import EpisodeConfig
    from trainer.verl.launch import read_config

    cfg = read_config(config, env)
    return int(cfg.get("+thinkingbox.max_agent_turns", cfg.get("thinkingbox.max_agent_turns",
                                                                 EpisodeConfig.max_agent_turns)))


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


def pool_tasks(run: Runner, env: dict[str, str], config: Path = ROOT / CONFIG) -> int:
    """The tasks GRPO trains on: the config's `prepare:` step (the Jeffreys bands of the base
    evaluation's records, data/prepare_data.py) run as the launch runs it, its pool counted. None
    is a stop: no task has mixed verdicts, so every group would have zero variance."""
    from trainer.verl.launch import PREPARE, read_config

    full = {**os.environ, **env}
    log = run.logs / "3-GRPO.log"
    run.logs.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as f:
        for c in read_config(config, full).get(PREPARE, []):
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} the pool: python {' '.join(c)}\n".encode())
            f.flush()
            rc = subprocess.call([sys.executable, *c], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=full)
            if rc:
                raise StageError(f"the pool's prepare step failed (exit {rc}): python {' '.join(c)} (log {log})", rc)
    train = Path(env["LAPTOP_DIR"]) / "pool" / "train.yaml"
    n = sum(1 for line in train.read_text(encoding="utf-8").splitlines() if line.strip().startswith("- "))
    if not n:
        raise StageError(f"{train}: no task of the base evaluation has mixed verdicts (bands.csv beside it), so "
                         "every GRPO group would have zero variance: warm-start for more or fewer epochs")
    return n


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
        run.stage(i, name, eval_command(plan, model, label, turns),
                  watch=lambda: f"{min(_records(records), episodes)}/{episodes} episodes")
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
            run.stage(1, "warm start", tbt("warm-start", plan.dataset, "--test-list", plan.test_list, "-o", warm,
                                           "--epochs", plan.epochs, "--lr", plan.warm_lr, "--seed", plan.seed,
                                           "--no-progress"))
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
        run.stage(3, "GRPO", ["bash", str(ROOT / "scripts" / "run_train.sh"), *plan.overrides], env=env,
                  watch=lambda: f"step {min(_steps(metrics), plan.steps)}/{plan.steps} done")
    if (trained / "config.json").is_file():
        run.kept(4, "merge", trained)
    else:
        run.stage(4, "merge", tbt("checkpoint", "merge", ckpt, "--step", plan.steps, "--target", trained, "--full-precision"))
    cand_agg = evaluate(5, "trained evaluation", trained, "trained")

    say(f"[6/6] compare: tbt compare {base_agg} {cand_agg} --json")
    res = subprocess.run(tbt("compare", base_agg, cand_agg, "--json", "--seed", plan.seed), cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode:
        raise StageError(f"compare failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}", res.returncode)
    (out / "compare.json").write_text(res.stdout, encoding="utf-8")
    cmp = json.loads(res.stdout)
    report = out / "report.html"
    run.stage(6, "report", tbt("report", base_agg, cand_agg, "--html", report, "--training", metrics))
    from trainer.verl.trainlog import curve, read

    return {"algorithm": algorithm(plan), "lr": plan.lr, "control": plan.control, "overrides": list(plan.overrides),
            **verdict(cmp), "steps": plan.steps,
            "k": plan.k, "max_agent_turns": turns,
            "reward_per_step": [r["score"] for r in curve(read(metrics))],
            "report": str(report), "seconds": run.seconds, "total_seconds": round(sum(run.seconds.values()), 1)}


def verdict(cmp: Mapping[str, Any]) -> dict[str, Any]:
    """What the summary takes from `tbt compare --json`: pass@1 of both runs (Table 1) and compare's
    one verdict on the change (`change`: trainer/eval/compare.py), `delta`, `delta_interval`,
    `distinguishable`, the `method` and the `pairing` of the attempts, over `tasks` tasks."""
    pass1 = next(r for r in cmp["table1"] if r["metric"].startswith("pass@1"))
    ch = cmp["change"]
    return {"base_pass_at_1": pass1["base"]["share"], "trained_pass_at_1": pass1["candidate"]["share"],
            "delta": ch["delta"], "delta_interval": ch["delta_interval"], "distinguishable": ch["distinguishable"],
            "method": ch["method"], "pairing": ch["pairing"], "tasks": ch["tasks"]}


def algorithm(plan: TrainPlan, config: Path = ROOT / CONFIG) -> dict[str, Any]:
    """What the GRPO stage trains with, as the launch reads the laptop config: the advantage
    estimator this plan sets and the loss aggregation."""
    from trainer.verl.launch import read_config

    cfg = read_config(config, {"LR": str(plan.lr), "ADV": plan.adv_estimator})
    return {"adv_estimator": cfg["algorithm.adv_estimator"], "loss_agg_mode": cfg["actor_rollout_ref.actor.loss_agg_mode"]}


__all__ = ["StageError", "TrainPlan", "agent_turn_cap", "algorithm", "eval_command", "train_loop", "verdict"]
