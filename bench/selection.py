"""Which tasks to roll out: five selection strategies on one simulated pool, side by side.

    uv run python bench/selection.py [--seeds 20] [--steps 50] [--groups 18] [--frontier] [--json]

The simulated pool (the shape the seed warns about): 200 tasks whose initial success
probabilities come from a skewed mixture, 40% near 0 (Beta(0.5, 12)), 40% near 1
(Beta(12, 0.5)), 20% in between (uniform on [0.15, 0.85]; `--middle` sets that share). Every
task is probed offline 8 times and banded as data preparation does (trainer/data/bands.py:
Jeffreys posterior, largest band mass; rarely/nearly-always solved are dropped). Training: `--steps` steps x `--groups` groups x 8
rollouts, each reward Bernoulli(p). **Learning**: each group that is trained on with mixed rewards
(non-zero GRPO advantage) raises its task's logit by `--logit-step` (0.05: a task at p = 0.5
reaches 0.9 after 44 such groups, one at p = 0.05 reaches 0.10 after 15); nothing else moves the
policy.

Strategies (all on the same seeds: same pool, same probes):
  none          every task, shuffled epochs (a dataloader over an unfiltered pool)
  offline       the offline-kept pool, shuffled epochs (the seed)
  offline_dapo  offline + verl 0.9.0's sync DAPO: uniform groups are evicted, each adds 2 refill
                credits, at most `--groups` prompts in flight, surplus mixed groups discarded
  offline_skip  offline + skip any task whose last group was uniform (refilled in dataloader order
                from the tasks not skipped; when fewer remain, the skipped ones fill the step)
  online        ours (trainer/verl/difficulty.py with its defaults): the offline Jeffreys posteriors
                updated by every group (faded per group), each pick the task with the best
                P(mixed group) + tilt x (1 - mean), 5% of picks to the task picked longest ago, DAPO as
                the safety net (production keeps filter_groups on) with one refill per evicted
                group, as trainer/verl/difficulty_verl.py's replay buffer does (stock: two)
  oracle        (a ceiling, not a strategy) online's rule and refills on the true p: what a
                perfectly known pool would give

Reported per strategy (mean over seeds): the share of rollouts that land in groups trained on with
non-zero advantage ("useful"; DAPO's discarded surplus is not), rollouts, wasted rollouts,
rollouts spent per useful group, the pool's pass@1 and pass@20 after training (all 200 tasks: so
saving rollouts is not bought by starving hard tasks), and "starved": tasks of the strategy's
pool never rolled out in the whole run.
Goal: online >= 90% useful, fewer wasted rollouts than offline_dapo and offline_skip on every seed,
pass@20 not lower (the mean paired difference over the seeds, printed with its standard error);
each line says ok or MISS (the exit status is 0 either way). With --json the last line is {"none": f, "offline": f, "offline_dapo": f,
"offline_skip": f, "online": f} of useful-rollout fractions.

`--frontier` adds what the pick rule can trade: online at several tilts, and a **bound**: a
pick rule that knows the true p and scores a task by exactly what the pass@20 check rewards,
P(mixed) x d pass@20 / d logit - lambda x P(uniform) (the expected pass@20 gain of rolling it out
minus lambda for each expected wasted group; greedy on this is the best trade of wasted rollouts
for pass@20 a sampler can make here, one task at a time). Each row says on how many seeds it
wastes fewer rollouts than offline_dapo and offline_skip, and its paired pass@20 difference to
both; the last line names the rows that meet all three bars (none, in this simulator: a sampler
that wastes fewer rollouts than the skip rule must roll out fewer near-hopeless tasks, and those
are where DAPO's blind draws buy their pass@20).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from trainer.data.bands import Bands, assign  # noqa: E402
from trainer.verl.difficulty import DifficultyConfig, DifficultyState, mixed_probability  # noqa: E402

N_TASKS, PROBES, G = 200, 8, 8
STRATEGIES = ("none", "offline", "offline_dapo", "offline_skip", "online")
ROWS = (*STRATEGIES, "oracle")
MAX_ROUNDS = 100  # DAPO refill rounds per step (verl has no cap; a pool with no mixed task would spin)


def make_pool(seed: int, middle: float = 0.2) -> tuple[list[float], list[int]]:
    """(initial p per task, offline successes out of PROBES); `middle`: the share in between."""
    rng = random.Random(f"pool:{seed}")
    ps, low = [], (1.0 - middle) / 2
    for _ in range(N_TASKS):
        u = rng.random()
        ps.append(rng.betavariate(0.5, 12) if u < low else rng.betavariate(12, 0.5) if u < 2 * low else rng.uniform(0.15, 0.85))
    ks = [sum(rng.random() < p for _ in range(PROBES)) for p in ps]
    return ps, ks


@dataclass
class Run:
    rollouts: int = 0
    useful_groups: int = 0
    groups: int = 0
    capped_steps: int = 0


class Sim:
    def __init__(self, ps: list[float], seed: int, strategy: str, logit_step: float):
        self.logit = [math.log(max(p, 1e-6) / max(1 - p, 1e-6)) for p in ps]
        self.rng = random.Random(f"{strategy}:{seed}")
        self.step_size = logit_step
        self.run = Run()
        self.seen: set[int] = set()

    def p(self, i: int) -> float:
        return 1.0 / (1.0 + math.exp(-self.logit[i]))

    def rollout(self, i: int) -> list[float]:
        self.seen.add(i)
        self.run.rollouts += G
        self.run.groups += 1
        p = self.p(i)
        return [1.0 if self.rng.random() < p else 0.0 for _ in range(G)]

    def train(self, groups: list[tuple[int, list[float]]]) -> None:
        for i, rs in groups:
            if min(rs) != max(rs):
                self.run.useful_groups += 1
                self.logit[i] += self.step_size

    def ab(self, i: int, strength: float = 1e6) -> tuple[float, float]:
        """The true p as a Beta of huge strength (for the oracle's P(mixed))."""
        return self.p(i) * strength, (1 - self.p(i)) * strength

    def pass_at(self, k: int) -> float:
        return sum(1.0 - (1.0 - self.p(i)) ** k for i in range(len(self.logit))) / len(self.logit)


class Epochs:
    """A dataloader's shuffled epochs over `pool`."""

    def __init__(self, pool: list[int], rng: random.Random):
        self.pool, self.rng, self.order = list(pool), rng, []

    def next(self) -> int:
        if not self.order:
            self.order = self.rng.sample(self.pool, len(self.pool))
        return self.order.pop()


def dapo_step(sim: Sim, draw, batch: int, observe=None, credit: int = 2) -> None:
    """verl 0.9.0 sync DAPO: evict uniform groups, `credit` refills each (stock: 2), <= batch in
    flight, surplus dropped once enough are sampleable."""
    kept: list[tuple[int, list[float]]] = []
    dispatch, owed = batch, 0
    for _ in range(MAX_ROUNDS):
        finished = [(i, sim.rollout(i)) for i in [draw() for _ in range(dispatch)]]
        if observe is not None:
            observe(finished)
        mixed = [(i, rs) for i, rs in finished if min(rs) != max(rs)]
        kept += mixed
        if len(kept) >= batch:
            break
        owed += credit * (len(finished) - len(mixed))
        dispatch = min(owed, batch)
        owed -= dispatch
        if dispatch == 0:
            break
    else:
        sim.run.capped_steps += 1
    sim.train(kept[:batch])


def simulate(strategy: str, seed: int, steps: int, batch: int, logit_step: float, cfg: DifficultyConfig,
             bound_lambda: float = 0.0, middle: float = 0.2) -> dict:
    ps, ks = make_pool(seed, middle)
    sim = Sim(ps, seed, strategy, logit_step)
    bands = Bands()
    kept = [i for i in range(N_TASKS) if assign(ks[i], PROBES, bands)[0] in bands.keep]
    if strategy == "none":
        ep = Epochs(list(range(N_TASKS)), sim.rng)
        for _ in range(steps):
            sim.train([(i, sim.rollout(i)) for i in [ep.next() for _ in range(batch)]])
    elif strategy == "offline":
        ep = Epochs(kept, sim.rng)
        for _ in range(steps):
            sim.train([(i, sim.rollout(i)) for i in [ep.next() for _ in range(batch)]])
    elif strategy == "offline_dapo":
        ep = Epochs(kept, sim.rng)
        for _ in range(steps):
            dapo_step(sim, ep.next, batch)
    elif strategy == "offline_skip":
        ep, uniform_last = Epochs(kept, sim.rng), set()
        for _ in range(steps):
            chosen: list[int] = []
            for _ in range(len(kept)):  # at most one epoch's worth of draws to find open tasks
                if len(chosen) == batch or len(uniform_last) >= len(kept) - len(chosen):
                    break
                i = ep.next()
                if i not in uniform_last and i not in chosen:
                    chosen.append(i)
            rest = [i for i in kept if i not in chosen]
            chosen += sim.rng.sample(rest, batch - len(chosen)) if len(chosen) < batch else []
            groups = [(i, sim.rollout(i)) for i in chosen]
            for i, rs in groups:
                (uniform_last.add if min(rs) == max(rs) else uniform_last.discard)(i)
            sim.train(groups)
    elif strategy == "online":
        state = DifficultyState.from_counts({str(i): (PROBES, ks[i]) for i in kept}, cfg)
        pick_rng = random.Random(f"pick:{seed}")
        for step in range(1, steps + 1):
            this_step: list[str] = []

            def draw() -> int:
                uid = state.pick(pick_rng, exclude=this_step)
                this_step.append(uid)
                return int(uid)

            def observe(finished):
                for i, rs in finished:
                    state.observe(str(i), rs, step)

            dapo_step(sim, draw, batch, observe, credit=1)
            state.end_step(step)
    elif strategy in ("oracle", "bound"):
        if strategy == "oracle":
            def score(i: int) -> float:
                return mixed_probability(*sim.ab(i)) + cfg.tilt * (1 - sim.p(i))
        else:
            def score(i: int) -> float:
                p, mixed = sim.p(i), mixed_probability(*sim.ab(i))
                return mixed * 20 * p * (1 - p) ** 20 - bound_lambda * (1 - mixed)
        for _ in range(steps):
            this_step = []

            def draw() -> int:
                free = [i for i in kept if i not in this_step] or kept
                best = max(free, key=score)
                this_step.append(best)
                return best

            dapo_step(sim, draw, batch, credit=1)
    else:
        raise ValueError(strategy)
    r = sim.run
    return {"useful": r.useful_groups * G / r.rollouts, "per_useful": r.rollouts / max(1, r.useful_groups),
            "rollouts": r.rollouts, "wasted": r.rollouts - r.useful_groups * G, "pass1": sim.pass_at(1),
            "pass20": sim.pass_at(20), "capped": r.capped_steps, "kept": len(kept),
            "starved": len(set(range(N_TASKS) if strategy == "none" else kept) - sim.seen)}


def paired(a: list[dict], b: list[dict], key: str) -> tuple[float, float]:
    """Mean of the per-seed differences a - b and its standard error."""
    d = [x[key] - y[key] for x, y in zip(a, b)]
    m = sum(d) / len(d)
    var = sum((x - m) ** 2 for x in d) / (len(d) - 1) if len(d) > 1 else 0.0
    return m, math.sqrt(var / len(d))


FRONTIER_TILTS = (0.6, 0.8, 1.0, 1.2, 1.4)
BOUND_LAMBDAS = (0.12, 0.16, 0.2, 0.24, 0.3, 0.4)
BASELINES = ("offline_dapo", "offline_skip")


def frontier(res: dict[str, list[dict]], a: argparse.Namespace, cfg: DifficultyConfig) -> None:
    """The trade the pick rule can make (module docstring, `--frontier`)."""
    def runs(strategy: str, c: DifficultyConfig, lam: float = 0.0) -> list[dict]:
        return [simulate(strategy, seed, a.steps, a.groups, a.logit_step, c, lam, a.middle) for seed in range(a.seeds)]

    rows = [(f"online tilt {t}", runs("online", replace(cfg, tilt=t))) for t in FRONTIER_TILTS]
    rows += [(f"bound lambda {lam}", runs("bound", cfg, lam)) for lam in BOUND_LAMBDAS]
    print(f"# frontier: fewer wasted = seeds (of {a.seeds}) with fewer wasted rollouts than the baseline; "
          "pass@20 = mean paired difference (standard error)")
    print(f"{'rule':<20}{'useful':>8}{'fewer than dapo':>17}{'fewer than skip':>17}"
          f"{'pass@20 - dapo':>22}{'pass@20 - skip':>22}")
    meets = []
    for name, rs in rows:
        fewer = [sum(o["wasted"] < r["wasted"] for o, r in zip(rs, res[c])) for c in BASELINES]
        diffs = [paired(rs, res[c], "pass20") for c in BASELINES]
        useful = sum(r["useful"] for r in rs) / len(rs)
        print(f"{name:<20}{useful:>8.1%}{fewer[0]:>17}{fewer[1]:>17}"
              + "".join(f"{f'{d:+.4f} ({se:.4f})':>22}" for d, se in diffs))
        if all(f == a.seeds for f in fewer) and all(d >= 0 for d, _ in diffs):
            meets.append(name)
    print(f"# meets every bar (fewer wasted than both on every seed, pass@20 not below either): "
          f"{', '.join(meets) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--groups", type=int, default=18)
    ap.add_argument("--logit-step", type=float, default=0.05)
    ap.add_argument("--middle", type=float, default=0.2, help="share of the pool in between (the rest: half near 0, half near 1)")
    ap.add_argument("--forget", type=float, default=DifficultyConfig.forget)
    ap.add_argument("--discount", type=float, default=DifficultyConfig.discount)
    ap.add_argument("--tilt", type=float, default=DifficultyConfig.tilt)
    ap.add_argument("--explore", type=float, default=DifficultyConfig.explore)
    ap.add_argument("--frontier", action="store_true", help="also online at several tilts and the bound (docstring)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not 0.0 <= a.middle <= 1.0:
        ap.error(f"--middle {a.middle}: must be in [0, 1]")
    cfg = DifficultyConfig(forget=a.forget, discount=a.discount, tilt=a.tilt, explore=a.explore)
    t0 = time.perf_counter()
    res = {s: [simulate(s, seed, a.steps, a.groups, a.logit_step, cfg, middle=a.middle) for seed in range(a.seeds)]
           for s in ROWS}
    mean = {s: {k: sum(r[k] for r in rs) / len(rs) for k in rs[0]} for s, rs in res.items()}
    print(f"# {N_TASKS} tasks, {a.steps} steps x {a.groups} groups x {G}, logit step {a.logit_step}, "
          f"seeds 0..{a.seeds - 1}, offline pool {mean['offline']['kept']:.0f} tasks (mean); "
          f"online: forget {cfg.forget}, discount {cfg.discount}, tilt {cfg.tilt}, explore {cfg.explore}")
    print(f"{'strategy':<14}{'useful':>8}{'rollouts':>10}{'wasted':>9}{'per useful':>12}{'pass@1':>9}{'pass@20':>9}"
          f"{'starved':>9}")
    for s in ROWS:
        m = mean[s]
        print(f"{s:<14}{m['useful']:>8.1%}{m['rollouts']:>10.0f}{m['wasted']:>9.0f}{m['per_useful']:>12.2f}"
              f"{m['pass1']:>9.4f}{m['pass20']:>9.4f}{m['starved']:>9.1f}"
              + (f"  ({m['capped'] * a.seeds:.0f} capped steps)" if m["capped"] else ""))
    on = res["online"]
    fewer = {c: all(o["wasted"] < r["wasted"] for o, r in zip(on, res[c])) for c in ("offline_dapo", "offline_skip")}
    diff = {c: paired(on, res[c], "pass20") for c in ("offline_dapo", "offline_skip")}
    checks = {"online >= 90% useful": mean["online"]["useful"] >= 0.90,
              "online wastes fewer rollouts than offline_dapo on every seed": fewer["offline_dapo"],
              "online wastes fewer rollouts than offline_skip on every seed": fewer["offline_skip"]}
    for c, (d, se) in diff.items():
        checks[f"online pass@20 >= {c} (paired difference {d:+.4f}, standard error {se:.4f})"] = d >= 0
    for k, ok in checks.items():
        print(f"{'ok  ' if ok else 'MISS'}  {k}")
    od, ose = paired(res["oracle"], res["offline_dapo"], "pass20")
    print(f"# oracle (true p, online's rule) pass@20 - offline_dapo: {od:+.4f} (standard error {ose:.4f}): "
          "what the rule trains, not what it estimates")
    if a.frontier:
        frontier(res, a, cfg)
    print(f"# {time.perf_counter() - t0:.1f} s")
    if a.json:
        print(json.dumps({s: round(mean[s]["useful"], 4) for s in STRATEGIES}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
