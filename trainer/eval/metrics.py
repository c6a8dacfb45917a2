"""Evaluation metrics over per-task tallies: pure functions, each formula in its docstring.

A task's tally is (n, c): n scored attempts, c of them passed. System errors are not attempts:
they are re-run (`tbt eval`) and never counted, neither as failures nor in n (the reference's
aggregation counts them as failures, docs/tasks.md). Over a set of tasks i = 1..T:

    pass@1          Σc / Σn                                       (every attempt weighs the same)
    pass@k          mean over tasks of 1 − C(n−c, k) / C(n, k)    (chance of ≥ 1 pass in k draws)
    pass^k          mean over tasks of C(c, k) / C(n, k)          (chance that k draws all pass)
    observed k/k    share of tasks with c = n = k                 (passed every recorded attempt)

pass@k and pass^k are the unbiased estimators (sampling k of the n attempts without replacement);
the reference's pass^k = mean((c/n)^k) is biased upward for k > 1. With uneven n (a campaign with
gaps), pass@k and pass^k at k are taken over the tasks with n ≥ k only (`k_tasks` says how many)
and observed k/k over the tasks with n = k, k the most attempts any task has.
"""

from __future__ import annotations

import math
from math import comb
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trainer.rollout.attempts import Tally  # (n, c, system_errors): the one tally type

LEVEL = 0.95
RESAMPLES = 2000


def pass_at_1(tallies: Sequence[Tally]) -> float | None:
    """pass@1 = Σc / Σn (None without attempts)."""
    n = sum(t.n for t in tallies)
    return sum(t.c for t in tallies) / n if n else None


def jeffreys_interval(c: int, n: int, level: float = LEVEL) -> tuple[float, float] | None:
    """Jeffreys interval for a binomial rate: the (1−level)/2 and (1+level)/2 quantiles of the
    posterior Beta(½ + c, ½ + n − c), with the lower end 0 when c = 0 and the upper end 1 when
    c = n (Brown, Cai & DasGupta 2001). Applied to pass@1 with c = Σc, n = Σn."""
    if n <= 0:
        return None
    from scipy.stats import beta  # imported here: scipy costs seconds at import

    a = (1 - level) / 2
    lo = 0.0 if c == 0 else float(beta.ppf(a, c + 0.5, n - c + 0.5))
    hi = 1.0 if c == n else float(beta.ppf(1 - a, c + 0.5, n - c + 0.5))
    return lo, hi


def bootstrap_interval(tallies: Sequence[Tally], *, resamples: int = RESAMPLES, seed: int = 0,
                       level: float = LEVEL) -> tuple[float, float] | None:
    """Task-clustered percentile bootstrap of pass@1: draw T tasks with replacement (a task's
    attempts stay together: they share the task's difficulty), take Σc*/Σn* of the draw; the
    interval is the (1−level)/2 and (1+level)/2 quantiles over `resamples` draws (numpy's
    default_rng(seed): the same interval on every run)."""
    if not tallies or not sum(t.n for t in tallies):
        return None
    n = np.array([t.n for t in tallies], dtype=np.int64)
    c = np.array([t.c for t in tallies], dtype=np.int64)
    idx = np.random.default_rng(seed).integers(0, len(tallies), size=(resamples, len(tallies)))
    nn = n[idx].sum(axis=1)
    rates = np.divide(c[idx].sum(axis=1), nn, out=np.zeros(resamples), where=nn > 0)
    a = (1 - level) / 2
    return float(np.quantile(rates, a)), float(np.quantile(rates, 1 - a))


def pass_at_k(tallies: Sequence[Tally], k: int) -> tuple[float | None, int]:
    """pass@k = mean over tasks with n ≥ k of 1 − C(n−c, k) / C(n, k); (value, tasks used).
    With n = k it is the share of tasks solved at least once."""
    used = [t for t in tallies if t.n >= k]
    if not used:
        return None, 0
    return sum(1 - comb(t.n - t.c, k) / comb(t.n, k) for t in used) / len(used), len(used)


def pass_hat_k(tallies: Sequence[Tally], k: int) -> tuple[float | None, int]:
    """pass^k = mean over tasks with n ≥ k of C(c, k) / C(n, k); (value, tasks used). The chance
    that k attempts drawn without replacement all pass; pass^1 = mean(c/n)."""
    used = [t for t in tallies if t.n >= k]
    if not used:
        return None, 0
    return sum(comb(t.c, k) / comb(t.n, k) for t in used) / len(used), len(used)


def observed_k_of_k(tallies: Sequence[Tally]) -> dict[str, Any]:
    """Tasks that passed every attempt: k = the most attempts any task has, `tasks` = #{c = n = k},
    `over` = #{n = k} (all tasks when n is even), `share` = tasks / over."""
    k = max((t.n for t in tallies), default=0)
    over = sum(t.n == k for t in tallies) if k else 0
    hit = sum(t.n == k and t.c == k for t in tallies) if k else 0
    return {"k": k, "tasks": hit, "over": over, "share": hit / over if over else None}


def solved_at_least_once(tallies: Sequence[Tally]) -> dict[str, Any]:
    """Tasks with c ≥ 1 (the observed coverage; pass@n when every task has n attempts)."""
    hit = sum(t.c > 0 for t in tallies)
    return {"tasks": hit, "over": len(tallies), "share": hit / len(tallies) if tallies else None}


def summarize(tallies: Sequence[Tally], *, resamples: int = RESAMPLES, seed: int = 0,
              level: float = LEVEL) -> dict[str, Any]:
    """Every metric of a set of tasks, JSON-ready (k keys are strings "1".."K"). `k_tasks` and
    `note` appear only when n is uneven (then some k are over fewer tasks)."""
    passes, attempts = sum(t.c for t in tallies), sum(t.n for t in tallies)
    kmax = max((t.n for t in tallies), default=0)
    at_k = {k: pass_at_k(tallies, k) for k in range(1, kmax + 1)}
    hat_k = {k: pass_hat_k(tallies, k) for k in range(1, kmax + 1)}
    block: dict[str, Any] = {
        "tasks": len(tallies), "attempts": attempts, "passes": passes,
        "pass_at_1": {"value": pass_at_1(tallies), "level": level,
                      "jeffreys": _pair(jeffreys_interval(passes, attempts, level)),
                      "bootstrap": _pair(bootstrap_interval(tallies, resamples=resamples, seed=seed, level=level))},
        "pass_at_k": {str(k): v for k, (v, _) in at_k.items()},
        "pass_hat_k": {str(k): v for k, (v, _) in hat_k.items()},
        "observed_k_of_k": observed_k_of_k(tallies),
        "solved_at_least_once": solved_at_least_once(tallies),
    }
    noise = noise_floor(tallies, level=level)
    block["flip_rate"] = noise.pop("flip_rate")
    block["min_detectable_difference"] = noise.pop("min_detectable_difference")
    block["noise"] = noise
    if any(t.n != kmax for t in tallies):
        block["k_tasks"] = {str(k): used for k, (_, used) in at_k.items()}
        block["note"] = (f"uneven attempts per task (n from {min(t.n for t in tallies)} to {kmax}): pass@k and "
                         f"pass^k are over the tasks with n >= k, observed {kmax}/{kmax} over the tasks with n = {kmax}")
    return block


POWER = 0.8  # of the minimum detectable difference


def _within(t: Tally) -> float:
    """Unbiased estimate of a task's outcome variance p(1 − p) from its n attempts, c passed."""
    return t.c * (t.n - t.c) / (t.n * (t.n - 1)) if t.n > 1 else 0.0


def _z(level: float) -> float:
    from scipy.stats import norm  # imported here: scipy costs seconds at import

    return float(norm.ppf(1 - (1 - level) / 2))


def noise_floor(tallies: Sequence[Tally], *, level: float = LEVEL, power: float = POWER) -> dict[str, Any]:
    """How noisy pass@1 of these tasks is when the same policy runs them again (tasks with n ≥ 1):

        flip_rate              share of tasks with mixed outcomes (0 < c < n): they can flip between runs
        within_task_variance   mean over tasks of the unbiased p(1 − p) = c(n − c) / (n(n − 1))
        icc                    intra-class correlation of outcomes within tasks (one-way ANOVA
                               estimator: (MSB − MSW) / (MSB + (n₀ − 1) MSW), clipped to [0, 1])
        design_effect          1 + (n̄ − 1) · icc;  effective_samples = Σn / design_effect
                               (independent attempts the Σn correlated ones are worth)
        min_detectable_difference  of pass@1 between this run and another run of the same tasks
                               with the same attempts (paired: task difficulty cancels, only the
                               attempts' own noise stays): (z_{1−α/2} + z_power) · SE₀, with
                               SE₀² = 2 Σ wᵢ² σᵢ² / nᵢ, wᵢ = nᵢ/Σn, σᵢ² the within-task variance;
                               None with fewer than 2 attempts per task (no variance estimate)

    at `level` (two-sided) and `power` (scipy's normal quantiles)."""
    ts = [t for t in tallies if t.n > 0]
    N = sum(t.n for t in ts)
    out: dict[str, Any] = {"flip_rate": None, "within_task_variance": None, "icc": None, "design_effect": None,
                           "effective_samples": None, "min_detectable_difference": None, "level": level,
                           "power": power}
    if not ts:
        return out
    out["flip_rate"] = sum(0 < t.c < t.n for t in ts) / len(ts)
    multi = [t for t in ts if t.n > 1]
    if not multi:
        return out
    out["within_task_variance"] = sum(_within(t) for t in multi) / len(multi)
    T = len(ts)
    pbar = sum(t.c for t in ts) / N
    if T > 1 and N > T:
        msb = sum(t.n * (t.c / t.n - pbar) ** 2 for t in ts) / (T - 1)
        msw = sum(t.c * (t.n - t.c) / t.n for t in ts) / (N - T)
        n0 = (N - sum(t.n ** 2 for t in ts) / N) / (T - 1)
        denom = msb + (n0 - 1) * msw
        icc = 0.0 if denom <= 0 else min(1.0, max(0.0, (msb - msw) / denom))
        out["icc"] = icc
        out["design_effect"] = 1 + (N / T - 1) * icc
        out["effective_samples"] = N / out["design_effect"]
    se0 = math.sqrt(2 * sum((t.n / N) ** 2 * _within(t) / t.n for t in ts))
    out["min_detectable_difference"] = (_z(level) + _z_one(power)) * se0
    return out


def _z_one(power: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(power))


def paired_noise_test(base: Sequence[Tally], cand: Sequence[Tally], *, level: float = LEVEL, power: float = POWER,
                      tests: int = 1) -> dict[str, Any]:
    """Is the pass@1 change between two runs of the same tasks (base[i], cand[i]: task i) more than
    the attempts' own noise? Δ = Σc'/Σn' − Σc/Σn; SE² = Σ w'ᵢ² σ'ᵢ²/n'ᵢ + Σ wᵢ² σᵢ²/nᵢ (within-task
    variances, task difficulty cancels); distinguishable when |Δ| > z · SE with z at level
    1 − (1 − level)/tests (Bonferroni over the `tests` changes judged together: overall, each
    domain, each tag). When not: the repeats per task, or tasks of the same kind, that would make a
    change of this size detectable with `power` (SE shrinks as 1/√n: factor ((z + z_power)·SE/|Δ|)²)."""
    if len(base) != len(cand):
        raise ValueError("paired noise test: the two runs must list the same tasks")
    pairs = [(b, c) for b, c in zip(base, cand) if b.n > 0 and c.n > 0]
    nb, nc = sum(b.n for b, _ in pairs), sum(c.n for _, c in pairs)
    out: dict[str, Any] = {"delta": None, "se": None, "distinguishable": None, "level": level, "tests": tests,
                           "repeats_needed": None, "tasks_needed": None}
    if not pairs or min(b.n for b, _ in pairs) < 2 or min(c.n for _, c in pairs) < 2:
        return out
    delta = sum(c.c for _, c in pairs) / nc - sum(b.c for b, _ in pairs) / nb
    var = sum((b.n / nb) ** 2 * _within(b) / b.n + (c.n / nc) ** 2 * _within(c) / c.n for b, c in pairs)
    se = math.sqrt(var)
    z = _z(1 - (1 - level) / tests)
    out.update(delta=delta, se=se, distinguishable=bool(se == 0 and delta != 0) or (se > 0 and abs(delta) > z * se))
    if not out["distinguishable"] and delta != 0 and se > 0:
        factor = ((z + _z_one(power)) * se / abs(delta)) ** 2
        k = max(b.n for b, _ in pairs)
        out["repeats_needed"] = math.ceil(k * factor)
        out["tasks_needed"] = math.ceil(len(pairs) * factor)
    return out


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return list(x) if x is not None else None


def groups(keys: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """{group: [uid, ...]} from {uid: its groups} (a uid in several tags is in each)."""
    out: dict[str, list[str]] = {}
    for uid, gs in keys.items():
        for g in gs:
            out.setdefault(g, []).append(uid)
    return dict(sorted(out.items()))


def paired_bootstrap_delta(base: Sequence[Tally], cand: Sequence[Tally], *, resamples: int = RESAMPLES,
                           seed: int = 0, level: float = LEVEL) -> dict[str, Any]:
    """Change of pass@1 between two runs of the same tasks (base[i] and cand[i] are task i):
    Δ = Σc'/Σn' − Σc/Σn, with a paired task-clustered bootstrap: one draw of T task indices
    (with replacement) is applied to both runs, so the task mix cancels out of Δ*. Returns Δ, the
    percentile interval and `p_le_0` = share of draws with Δ* ≤ 0 (how often the gain vanishes)."""
    if len(base) != len(cand):
        raise ValueError("paired bootstrap: the two runs must list the same tasks")
    d0 = (pass_at_1(cand) or 0.0) - (pass_at_1(base) or 0.0)
    if not base:
        return {"delta": None, "interval": None, "p_le_0": None, "level": level, "resamples": 0, "tasks": 0}
    arr = {name: np.array([[t.n, t.c] for t in ts], dtype=np.int64) for name, ts in (("a", base), ("b", cand))}
    idx = np.random.default_rng(seed).integers(0, len(base), size=(resamples, len(base)))

    def rate(a: np.ndarray) -> np.ndarray:
        n, c = a[idx, 0].sum(axis=1), a[idx, 1].sum(axis=1)
        return np.divide(c, n, out=np.zeros(resamples), where=n > 0)

    deltas = rate(arr["b"]) - rate(arr["a"])
    a = (1 - level) / 2
    return {"delta": d0, "interval": [float(np.quantile(deltas, a)), float(np.quantile(deltas, 1 - a))],
            "p_le_0": float((deltas <= 0).mean()), "level": level, "resamples": resamples, "tasks": len(base)}


__all__ = ["LEVEL", "POWER", "RESAMPLES", "Tally", "bootstrap_interval", "groups", "jeffreys_interval", "noise_floor",
           "observed_k_of_k", "paired_noise_test",
           "paired_bootstrap_delta", "pass_at_1", "pass_at_k", "pass_hat_k", "solved_at_least_once", "summarize"]
