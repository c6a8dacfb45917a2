"""Does GRPO, as the cluster configs run it, make the laptop's tiny policy better, and is the reward why?

    uv run python bench/learning.py [--json] [--seeds 0 1] [--lr 1e-4 ...] [--steps 4] [--k 8] [--out DIR]
                                    [--control | --no-control] [--estimator grpo grpo_positive]

For each seed and learning rate: `tbt quickstart --train`'s loop (trainer/quickstart_train_cli.py:
golden warm start, base evaluation, GRPO through scripts/run_train.sh and configs/laptop_grpo.yaml
with verl's own trainer, merge, trained evaluation, `tbt compare`) with standard GRPO
(adv_estimator grpo, token-mean, no KL), then the same loop with the permuted-reward control
(`grpo_permuted`: each step's rewards permuted across its episodes). Every run of a seed (any lr,
GRPO or control) starts from the seed's one warm start and base evaluation, its first finished
run's (TrainPlan.start: the same weights and the same base episodes, not recomputed), so the runs
differ only in what training did. `--control` runs only the
controls, `--no-control` only GRPO; `--estimator grpo_positive` adds (or, alone, plays instead) the
loop with our `grpo_positive` advantages (GRPO's with the failures' set to 0), its own rows.

It prints one row per run (seed, lr, algorithm, pass@1 before and after, the change, its interval
and `tbt compare`'s verdict, minutes) and, with --json, a last line

    {"grpo": [{"seed", "lr", "steps", "overrides", "delta", "delta_interval", "distinguishable"}...],
     "control": [...]}

(and a "grpo_positive" list when that estimator is played).

The loop's stages resume: a rerun with the same --out keeps every finished run. Each run is
~15-20 min on 2 cores (the warm start ~4 of them, once a seed), so the default (2 seeds, one
learning rate, GRPO and control) is about an hour. docs/training.md has the measured table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainer.quickstart_train_cli import TrainPlan, train_loop  # noqa: E402

def setting(lr: float, steps: int, overrides: list[str]) -> str:
    """A run's directory name under its seed: lr, steps where not the default, the overrides."""
    name = f"lr{lr:g}" + ("" if steps == TrainPlan.steps else f"-steps{steps}")
    for o in overrides:
        if "=" not in o:
            raise SystemExit(f"error: --override {o!r}: expected KEY=VALUE (a verl override)")
        key, value = o.split("=", 1)
        name += "-" + key.rsplit(".", 1)[-1] + "=" + "".join(c if c.isalnum() or c in ".-" else "_" for c in value)
    return name


def seed_start(seed_dir: Path) -> Path | None:
    """A finished run of this seed (any lr, any kind) whose warm start and base evaluation the others
    start from: one warm start and one base evaluation a seed, so its runs differ only in training."""
    for d in sorted(seed_dir.glob("lr*/*")):
        if (d / "warm" / "config.json").is_file() and (d / "base.agg.json").is_file() and (d / "base.jsonl").is_file():
            return d
    return None


def run(out: Path, seed: int, lr: float, steps: int, k: int, control: bool, say, estimator: str = "grpo",
        start: Path | None = None, overrides: tuple[str, ...] = ()) -> dict:
    plan = TrainPlan(out=out, seed=seed, lr=lr, steps=steps, k=k, control=control, progress=False,
                     estimator=estimator, start=start, overrides=overrides)
    t = time.time()
    s = train_loop(plan, say)
    verdict = s.get("distinguishable")
    if verdict is None:  # a compare without the one verdict: the interval's own
        lo, hi = s["delta_interval"] or (None, None)
        verdict = lo is not None and (lo > 0 or hi < 0)
    return {"seed": seed, "lr": lr, "steps": steps, "overrides": list(overrides), "algorithm": s["algorithm"]["adv_estimator"], "base": s["base_pass_at_1"],
            "trained": s["trained_pass_at_1"], "delta": s["delta"], "delta_interval": s["delta_interval"],
            "distinguishable": bool(verdict), "reward_per_step": s["reward_per_step"],
            "minutes": round((time.time() - t) / 60, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--lr", type=float, nargs="+", default=[TrainPlan.lr])
    ap.add_argument("--steps", type=int, default=TrainPlan.steps)
    ap.add_argument("--k", type=int, default=TrainPlan.k)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tbt-bench-learning"))
    ap.add_argument("--json", action="store_true")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--control", action="store_true", help="only the permuted-reward controls")
    which.add_argument("--no-control", action="store_true", help="only the GRPO runs, no control")
    ap.add_argument("--estimator", nargs="+", default=["grpo"], choices=["grpo", "grpo_positive"],
                    help="the advantage estimators played (each its own rows; the control permutes grpo's)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a verl override for every run's GRPO stage (repeatable), e.g. "
                         "actor_rollout_ref.actor.optim.betas=[0.9,0.99]; its own directory")
    args = ap.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    played = [] if args.control else args.estimator
    rows: dict[str, list[dict]] = {kind: [] for kind in [*played, *([] if args.no_control else ["control"])]}
    for seed in args.seeds:
        first = seed_start(args.out / f"seed{seed}")
        for lr in args.lr:
            for kind in rows:
                d = args.out / f"seed{seed}" / setting(lr, args.steps, args.override) / kind
                rows[kind].append(run(d, seed, lr, args.steps, args.k, kind == "control", say,
                                      estimator="grpo" if kind == "control" else kind,
                                      start=first if first is not None and first != d else None,
                                      overrides=tuple(args.override)))
                first = first or d
    print(f"{'seed':>4} {'lr':>8} {'steps':>5} {'run':<13} {'pass@1 base':>11} {'trained':>8} {'change':>8} "
          f"{'95% interval':>18} {'verdict':<20} {'min':>5}  overrides")
    for kind in rows:
        for r in rows[kind]:
            lo, hi = r["delta_interval"] or (float("nan"), float("nan"))
            print(f"{r['seed']:>4} {r['lr']:>8g} {r['steps']:>5} {kind:<13} {r['base']:>11.1%} {r['trained']:>8.1%} "
                  f"{r['delta'] * 100:>+7.2f}  [{lo * 100:+6.2f}, {hi * 100:+6.2f}] "
                  f"{'distinguishable' if r['distinguishable'] else 'not distinguishable':<20} {r['minutes']:>5}  "
                  f"{' '.join(r['overrides']) or '-'}")
    if args.json:
        keep = ("seed", "lr", "steps", "overrides", "delta", "delta_interval", "distinguishable")
        print(json.dumps({kind: [{key: r[key] for key in keep} for r in rows[kind]] for kind in rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
