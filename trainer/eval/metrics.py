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
    if any(t.n != kmax for t in tallies):
        block["k_tasks"] = {str(k): used for k, (_, used) in at_k.items()}
        block["note"] = (f"uneven attempts per task (n from {min(t.n for t in tallies)} to {kmax}): pass@k and "
                         f"pass^k are over the tasks with n >= k, observed {kmax}/{kmax} over the tasks with n = {kmax}")
    return block


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


__all__ = ["LEVEL", "RESAMPLES", "Tally", "bootstrap_interval", "groups", "jeffreys_interval", "observed_k_of_k",
           "paired_bootstrap_delta", "pass_at_1", "pass_at_k", "pass_hat_k", "solved_at_least_once", "summarize"]
