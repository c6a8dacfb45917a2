"""The laptop learning loop's pieces of this layer (`tbt quickstart --train`, whose stages
trainer/quickstart_train_cli.py runs in order): its plan (`TrainPlan`: steps, k, learning rates,
the control, a run to start from), the stage runner (`Runner`: each stage a process of its own,
its output in OUT/logs/STAGE.log, its progress said, a failing stage a `StageError` with its exit
code and the tail of its log), and what the GRPO stage reads of the laptop config
(configs/laptop_grpo.yaml) as the launch reads it: the agent-turn cap its episodes end at
(`agent_turn_cap`, which both evaluations play to), the pool of tasks its `prepare:` step bands
from the base evaluation (`pool_tasks`: GRPO's batch) and its algorithm (`algorithm`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

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
    # LoRA instead of every weight (0: full fine-tuning): the adapter's rank on every linear layer,
    # alpha twice the rank, merged into the weights the rollout plays at each sync
    # (configs/cpu_smoke_lora.yaml's settings; docs/training-cpu-engines.md, "LoRA")
    lora_rank: int = 0

    @property
    def adv_estimator(self) -> str:
        return "grpo_permuted" if self.control else self.estimator

    @property
    def grpo_overrides(self) -> tuple[str, ...]:
        """The GRPO stage's verl overrides: LoRA's (with lora_rank), then the caller's."""
        lora = () if not self.lora_rank else (
            f"actor_rollout_ref.model.lora_rank={self.lora_rank}", f"actor_rollout_ref.model.lora_alpha={2 * self.lora_rank}",
            "actor_rollout_ref.model.target_modules=all-linear", "actor_rollout_ref.model.lora.merge=true")
        return lora + tuple(self.overrides)


# LoRA's learning rate: about 10x full fine-tuning's ("LoRA Without Regret", Schulman et al., Thinking
# Machines 2025), the quickstart's default with --lora
LORA_LR = 10 * TrainPlan.lr


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
              watch: Callable[[], str] | None = None, shown: Sequence[str] | None = None) -> None:
        """Run `cmd` as stage `i`, said as `shown` (default: `cmd`), its output appended to its log."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{i}-{name.replace(' ', '-')}.log"
        self.say(f"[{i}/6] {name}: {' '.join(map(str, shown or cmd))}  (log {log})")
        t0 = time.monotonic()
        progress = ""
        with log.open("ab") as f:  # a rerun adds to the log of the run before it
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(map(str, cmd))}\n".encode())
            f.flush()
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **self.env, **(env or {})})
            while p.poll() is None:
                time.sleep(2)
                now = watch() if watch else ""
                if self.plan.progress and now and now != progress:
                    self.say(f"[{i}/6] {name}: {now} ({time.monotonic() - t0:.0f} s)")
                    progress = now
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
    from trainer.verl.config_read import read_config

    cfg = read_config(config, env)
    return int(cfg.get("+thinkingbox.max_agent_turns", cfg.get("thinkingbox.max_agent_turns",
                                                                 EpisodeConfig.max_agent_turns)))


def pool_tasks(run: Runner, env: dict[str, str], config: Path = ROOT / CONFIG) -> int:
    """The tasks GRPO trains on: the config's `prepare:` step (the Jeffreys bands of the base
    evaluation's records, data/prepare_data.py) run as the launch runs it, its pool counted. None
    is a stop: no task has mixed verdicts, so every group would have zero variance."""
    from trainer.verl.config_read import PREPARE, read_config

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


def algorithm(plan: TrainPlan, config: Path = ROOT / CONFIG) -> dict[str, Any]:
    """What the GRPO stage trains with, as the launch reads the laptop config: the advantage
    estimator this plan sets and the loss aggregation."""
    from trainer.verl.config_read import read_config

    cfg = read_config(config, {"LR": str(plan.lr), "ADV": plan.adv_estimator})
    return {"adv_estimator": cfg["algorithm.adv_estimator"], "loss_agg_mode": cfg["actor_rollout_ref.actor.loss_agg_mode"]}


__all__ = ["CONFIG", "LAPTOP_LIST", "ROOT", "Runner", "StageError", "TrainPlan", "agent_turn_cap", "algorithm",
           "pool_tasks"]
