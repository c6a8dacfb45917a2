"""Does `tbt compare`'s verdict on a pass@1 change hold its level? Coverage by simulation, where the truth is known.

    uv run python bench/compare_coverage.py [--reps 2000] [--flips 2000] [--seed 0] [--json]   # ~1 min; --reps 4000 ~2 min

Each simulated comparison draws T tasks (8 or 50) from a scenario's population: a base pass rate
p_t per task and the candidate's q_t. Each run plays 8 attempts per task. **Paired** (the same
episode seeds, as `tbt eval --seed` gives both runs): attempt r of task t draws one uniform u_tr
for both runs, passing in the base when u_tr < p_t and in the candidate when u_tr < q_t (a
policy that changes nothing then changes no outcome). **Unpaired**: each run its own draws.
The verdict is trainer/eval/metrics.py's `pass_at_1_change` itself (the sign-flip test over the
tasks and its interval at 95%, `flips` random sign patterns above 16 tasks: the bench's default
2000 keeps it quick, `tbt compare`'s is 20,000), with the pairing said as compare would.

The truth: the population's mean change E[q − p] (the question the verdict answers: would the
change hold on other tasks like these), computed once from 2 million tasks of the scenario;
"these tasks" is the mean of q_t − p_t over the comparison's own T tasks. Per scenario, T and
pairing, the table gives the share of comparisons whose interval covers the truth (nominal 95%;
with --reps 2000 a share is within about ±1 pt of its true value), the share called
distinguishable, and the same for three methods that are not the verdict: the t-interval over the
same per-task changes (`metrics.t_interval`), and the two `tbt compare` printed before: the paired
percentile bootstrap over the tasks (2000 draws of T tasks, both runs' together; "boot cover") and
the independent-attempt noise test (|Δ| > 1.96·SE, SE² = Σ σ²/n of both runs' attempts as if
independent, over T² tasks: it asks about these tasks, so its coverage is of "these tasks").

Scenarios (p ~ the base's spread; the change):
  spread       p ~ Beta(1, 1); q = logistic(logit p + 0.5)          every task up a little
  piled        p ~ Beta(0.5, 0.5) (most near 0 or 1, as real tasks are); logit + 0.7
  mixed        p ~ U(0.2, 0.8); q = clip(p + N(0.05, 0.10²))      some tasks up, some down
  few          p ~ Beta(1, 1); 20% of tasks q = min(1, p + 0.5), the rest unchanged
  null         p ~ Beta(1, 1); q = p                               no change (coverage = 1 − false calls)
  null-skewed  p ~ U(0.2, 0.6); 20% of tasks +0.4, 80% −0.1        no change on average, skewed

Then `needed.tasks`, the tasks the verdict names when a change is not distinguishable (80% power
at the spread of the per-task changes): at the count it gives for a scenario's true change and
spread (the population's, from 400,000 tasks), the share of comparisons called (nominal 0.80).

"warned": the share of comparisons whose verdict carries a `coverage_warning` (few tasks, the change
carried by few of them: metrics.coverage_warning); "cover unwarned": the coverage of the others.

The last line with --json: {"SCENARIO/T/paired|unpaired": {"cover", "warned", "cover_unwarned"}}.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.eval.metrics import tasks_needed, pass_at_1_change, t_interval, task_changes  # noqa: E402
from trainer.formats.attempts import Tally  # noqa: E402

K = 8
LEVEL = 0.95


def _logit_shift(b: float) -> Callable[[np.random.Generator, np.ndarray], np.ndarray]:
    def change(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
        x = np.log(np.clip(p, 1e-12, 1 - 1e-12)) - np.log1p(-np.clip(p, 1e-12, 1 - 1e-12))
        return 1 / (1 + np.exp(-(x + b)))
    return change


def _few(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    return np.where(rng.random(p.shape) < 0.2, np.minimum(1.0, p + 0.5), p)


def _mixed(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    return np.clip(p + rng.normal(0.05, 0.10, p.shape), 0.0, 1.0)


def _null_skewed(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    return p + np.where(rng.random(p.shape) < 0.2, 0.4, -0.1)


SCENARIOS: dict[str, tuple[Callable[[np.random.Generator, int], np.ndarray], Callable[..., np.ndarray]]] = {
    "spread": (lambda r, n: r.beta(1, 1, n), _logit_shift(0.5)),
    "piled": (lambda r, n: r.beta(0.5, 0.5, n), _logit_shift(0.7)),
    "mixed": (lambda r, n: r.uniform(0.2, 0.8, n), _mixed),
    "few": (lambda r, n: r.beta(1, 1, n), _few),
    "null": (lambda r, n: r.beta(1, 1, n), lambda r, p: p),
    "null-skewed": (lambda r, n: r.uniform(0.2, 0.6, n), _null_skewed),
}


def truth(scenario: str) -> float:
    """The population's mean change E[q − p] of a scenario (2 million tasks, its own seed)."""
    if scenario in ("null", "null-skewed"):
        return 0.0
    base, change = SCENARIOS[scenario]
    rng = np.random.default_rng(12345)
    p = base(rng, 2_000_000)
    return float((change(rng, p) - p).mean())


def _old_noise_called(b: list[Tally], c: list[Tally]) -> tuple[bool, float, float]:
    """The independent-attempt noise test tbt compare used: (called, Δ, SE)."""
    nb, nc = sum(t.n for t in b), sum(t.n for t in c)
    delta = sum(t.c for t in c) / nc - sum(t.c for t in b) / nb

    def within(t: Tally) -> float:
        return t.c * (t.n - t.c) / (t.n * (t.n - 1))

    se = math.sqrt(sum((x.n / nb) ** 2 * within(x) / x.n for x in b) + sum((x.n / nc) ** 2 * within(x) / x.n for x in c))
    return (se == 0 and delta != 0) or (se > 0 and abs(delta) > 1.959964 * se), delta, se


def simulate(scenario: str, tasks: int, paired: bool, *, reps: int, seed: int = 0, flips: int = 2000,
             true_change: float | None = None) -> dict[str, Any]:
    """`reps` comparisons of one scenario at `tasks` tasks: coverage and calls of the verdict and
    of the two other methods (module docstring)."""
    base, change = SCENARIOS[scenario]
    tr = truth(scenario) if true_change is None else true_change
    rng = np.random.default_rng([seed, tasks, int(paired), sum(map(ord, scenario))])
    boot = np.random.default_rng([seed, tasks, int(paired), sum(map(ord, scenario)), 1])  # the bootstrap's own draws
    n = {"cover": 0, "cover_these": 0, "called": 0, "t_cover": 0, "t_called": 0, "boot_cover": 0, "old_cover_these": 0,
         "old_called": 0, "width": 0.0, "warned": 0, "cover_unwarned": 0}
    for i in range(reps):
        p = base(rng, tasks)
        q = change(rng, p)
        u = rng.random((tasks, K))
        v = u if paired else rng.random((tasks, K))
        b = [Tally(K, int(x)) for x in (u < p[:, None]).sum(axis=1)]
        c = [Tally(K, int(x)) for x in (v < q[:, None]).sum(axis=1)]
        these = float((q - p).mean())
        res = pass_at_1_change(b, c, pairing="seed" if paired else "task", flips=flips, seed=i)
        lo, hi = res["delta_interval"]
        eps = 1e-12
        n["cover"] += lo - eps <= tr <= hi + eps
        warned = res["coverage_warning"] is not None
        n["warned"] += warned
        n["cover_unwarned"] += (not warned) and lo - eps <= tr <= hi + eps
        n["cover_these"] += lo - eps <= these <= hi + eps
        n["called"] += bool(res["distinguishable"])
        n["width"] += hi - lo
        t = t_interval(task_changes(b, c), LEVEL)
        assert t is not None
        tlo, thi = t["interval"]
        n["t_cover"] += tlo - eps <= tr <= thi + eps
        n["t_called"] += not tlo <= 0 <= thi
        d = np.asarray(task_changes(b, c))
        draws = boot.integers(0, tasks, size=(2000, tasks))
        blo, bhi = np.quantile(d[draws].mean(axis=1), [0.025, 0.975])
        n["boot_cover"] += blo - eps <= tr <= bhi + eps
        called, delta, se = _old_noise_called(b, c)
        n["old_called"] += called
        n["old_cover_these"] += abs(delta - these) <= 1.959964 * se + eps
    out: dict[str, Any] = {k: v / reps for k, v in n.items()}
    unwarned = reps - n["warned"]
    out["cover_unwarned"] = n["cover_unwarned"] / unwarned if unwarned else None  # of the comparisons not warned about
    out.update(scenario=scenario, tasks=tasks, paired=paired, reps=reps, truth=tr)
    return out


def needed_tasks(scenario: str, paired: bool) -> tuple[int, float]:
    """(`needed.tasks` for the scenario's true change at its population spread of d_t, that spread)."""
    base, change = SCENARIOS[scenario]
    rng = np.random.default_rng(54321)
    p = base(rng, 400_000)
    q = change(rng, p)
    u = rng.random((len(p), K))
    v = u if paired else rng.random((len(p), K))
    sd = float(((v < q[:, None]).mean(axis=1) - (u < p[:, None]).mean(axis=1)).std())
    return tasks_needed(truth(scenario), sd, 1 - LEVEL, 0.8), sd


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--flips", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows, summary = [], {}
    head = ("scenario", "truth", "T", "pairing", "cover", "warned", "cover unwarned", "cover these", "called", "width",
            "t cover", "t called", "boot cover", "old called", "old cover these")
    for sc in a.scenarios.split(","):
        for tasks in (8, 50):
            for paired in (True, False):
                r = simulate(sc, tasks, paired, reps=a.reps, seed=a.seed, flips=a.flips)
                rows.append((sc, f"{r['truth'] * 100:+.2f}", str(tasks), "seed" if paired else "task",
                             f"{r['cover']:.3f}", f"{r['warned']:.3f}",
                             "—" if r["cover_unwarned"] is None else f"{r['cover_unwarned']:.3f}",
                             f"{r['cover_these']:.3f}", f"{r['called']:.3f}",
                             f"{r['width'] * 100:.1f}", f"{r['t_cover']:.3f}", f"{r['t_called']:.3f}",
                             f"{r['boot_cover']:.3f}", f"{r['old_called']:.3f}", f"{r['old_cover_these']:.3f}"))
                summary[f"{sc}/{tasks}/{'paired' if paired else 'unpaired'}"] = {
                    "cover": round(r["cover"], 4), "warned": round(r["warned"], 4),
                    "cover_unwarned": None if r["cover_unwarned"] is None else round(r["cover_unwarned"], 4)}
                print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print(f"{a.reps} comparisons per row, 8 attempts per task, 95% level; the verdict's sign-flip interval "
          f"({a.flips} random patterns above 16 tasks) against the truth (the population's mean change)")
    for r in (head, *rows):
        print("  ".join(x.rjust(w) for x, w in zip(r, widths)))
    print(f"\nneeded.tasks at 80% power: the share called at that many tasks ({a.reps // 4} comparisons a row)")
    rows = [("scenario", "pairing", "spread of d_t", "tasks needed", "called")]
    for sc in ("spread", "piled", "mixed"):
        for paired in (True, False):
            tasks, sd = needed_tasks(sc, paired)
            r = simulate(sc, tasks, paired, reps=a.reps // 4, seed=a.seed, flips=a.flips)
            rows.append((sc, "seed" if paired else "task", f"{sd * 100:.1f} pt", str(tasks), f"{r['called']:.3f}"))
    widths = [max(len(x) for x in col) for col in zip(*rows)]
    for r in rows:
        print("  ".join(x.rjust(w) for x, w in zip(r, widths)))
    if a.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
