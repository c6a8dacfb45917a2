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

import functools
import math
from math import comb
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trainer.formats.attempts import Tally  # (n, c, system_errors): the one tally type

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


def _pair(x: tuple[float, float] | None) -> list[float] | None:
    return list(x) if x is not None else None


def groups(keys: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """{group: [uid, ...]} from {uid: its groups} (a uid in several tags is in each)."""
    out: dict[str, list[str]] = {}
    for uid, gs in keys.items():
        for g in gs:
            out.setdefault(g, []).append(uid)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------- the change between two runs

EXACT_TASKS = 16  # up to this many tasks the sign-flip test enumerates every pattern (2^16 = 65,536)
SIGN_FLIPS = 20000  # beyond: this many random patterns (seeded), the observed one among them


def task_changes(base: Sequence[Tally], cand: Sequence[Tally]) -> list[float]:
    """The per-task changes d_t of two runs of the same tasks (base[i], cand[i]: task i; tasks
    without attempts in either run left out), whose mean is exactly the pass@1 change
    Δ = Σc'/Σn' − Σc/Σn:

        every task with the same n in each run (the usual case):  d_t = c'_t/n'_t − c_t/n_t
        otherwise (a campaign with gaps):  d_t = Δ + (c'_t − p' n'_t)/n̄' − (c_t − p n_t)/n̄

    with p = Σc/Σn, n̄ = Σn/T (p', n̄' the candidate's): pass@1 weighs every attempt alike, so with
    uneven n a task's share of Δ is its linearised (ratio-estimator) contribution, which reduces to
    the difference of its pass rates when n is even. The tasks are the unit: a task's attempts
    share its difficulty, and when both runs drew the same episode seeds (pairing "seed":
    compare.py), attempt r of a task in one run is paired with attempt r in the other. The pairing
    does not move d_t's mean; it makes d_t's spread across tasks the right measure of the noise
    (shared seeds make a task's two pass rates move together, so treating the two runs' attempts
    as independent overstates it)."""
    if len(base) != len(cand):
        raise ValueError("task changes: the two runs must list the same tasks")
    pairs = [(b, c) for b, c in zip(base, cand) if b.n > 0 and c.n > 0]
    if not pairs:
        return []
    if len({b.n for b, _ in pairs}) == 1 and len({c.n for _, c in pairs}) == 1:
        return [c.c / c.n - b.c / b.n for b, c in pairs]
    T = len(pairs)
    nb, nc = sum(b.n for b, _ in pairs), sum(c.n for _, c in pairs)
    pb, pc = sum(b.c for b, _ in pairs) / nb, sum(c.c for _, c in pairs) / nc
    return [(pc - pb) + (c.c - pc * c.n) / (nc / T) - (b.c - pb * b.n) / (nb / T) for b, c in pairs]


def t_interval(d: Sequence[float], level: float = LEVEL) -> dict[str, Any] | None:
    """The one-sample t-interval of the mean of d (T ≥ 2 values): mean ± t_{(1+level)/2, T−1} · s/√T,
    s the sample standard deviation; `p` the two-sided t-test of mean 0. Not `tbt compare`'s
    verdict (that is `sign_flip_interval`: docs/evaluation-compare.md says why); bench/compare_coverage.py
    sets the two side by side."""
    if len(d) < 2:
        return None
    from scipy.stats import t as student  # imported here: scipy costs seconds at import

    x = np.asarray(d, dtype=float)
    T, m = len(x), float(x.mean())
    se = float(x.std(ddof=1)) / math.sqrt(T)
    q = float(student.ppf(1 - (1 - level) / 2, T - 1))
    p = (1.0 if m == 0 else 0.0) if se == 0 else float(2 * student.sf(abs(m) / se, T - 1))
    return {"interval": [m - q * se, m + q * se], "p": p, "se": se, "df": T - 1}


@functools.lru_cache(maxsize=EXACT_TASKS + 1)
def _all_patterns(T: int) -> np.ndarray:
    out = ((np.arange(2 ** T)[:, None] >> np.arange(T)) & 1) * 2.0 - 1.0
    out.flags.writeable = False
    return out


def _patterns(T: int, flips: int, seed: int) -> tuple[np.ndarray, bool]:
    """Sign patterns (rows of ±1): all 2^T when T ≤ EXACT_TASKS, else `flips` random ones
    (default_rng(seed)) whose first is the observed (all +1)."""
    if T <= EXACT_TASKS:
        return _all_patterns(T), True
    bits = np.random.default_rng(seed).integers(0, 256, size=(flips, (T + 7) // 8), dtype=np.uint8)
    s = np.unpackbits(bits, axis=1)[:, :T] * 2.0 - 1.0
    s[0] = 1.0
    return s, False


def _reach(a: np.ndarray, B: np.ndarray, T: int) -> np.ndarray:
    """Per pattern s (a = Σ s_t e_t, B = Σ s_t, e_t = d_t − mean): the largest x ≥ 0 with
    |a − x·B| ≥ T·x, i.e. how far above the mean δ = mean + x can lie with the flipped statistic
    |Σ s_t (d_t − δ)| still at least the observed |Σ (d_t − δ)| = T·x (∞ for s = ±1 everywhere)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(T + B > 0, a / (T + B), -np.inf)
        down = np.where(T - B > 0, -a / (T - B), -np.inf)
    return np.where(np.abs(B) == T, np.inf, np.maximum(up, down))


def sign_flip_interval(d: Sequence[float], *, level: float = LEVEL, flips: int = SIGN_FLIPS,
                       seed: int = 0) -> dict[str, Any] | None:
    """The sign-flip (randomisation) test over tasks of a mean change, and its interval.

    Null at δ: each task's change is as likely δ + e as δ − e (under δ = 0: the two runs of each
    task are exchangeable, what "no change" means for a paired design). Statistic |Σ (d_t − δ)|;
    p(δ) = share of sign patterns s with |Σ s_t (d_t − δ)| ≥ |Σ (d_t − δ)|, over all 2^T patterns
    when T ≤ EXACT_TASKS (exact), else over `flips` random ones, seeded, the observed included
    (p ≥ 1/flips: a valid Monte Carlo p-value). The interval is every δ with p(δ) ≥ 1 − level
    (the test inverted: found exactly, each pattern's reach `_reach` being a distance from the
    mean, so p falls step by step away from it), clipped to [−1, 1]; `p` is p(0), so the interval
    excludes 0 exactly when p < 1 − level. No normality: at T tasks the smallest p is 2/2^T, so
    fewer than 6 tasks that changed at all (at 95%) can never tell a change from none. None
    without tasks."""
    if not len(d):
        return None
    x = np.asarray(d, dtype=float)
    T, m = len(x), float(x.mean())
    S, exact = _patterns(T, flips, seed)
    a, B = S @ (x - m), S.sum(axis=1)  # per pattern: Σ s_t e_t and Σ s_t
    k = max(1, math.ceil((1 - level) * len(S) - 1e-9))  # p(δ) ≥ 1 − level ⟺ at least k patterns reach it
    eps = 1e-12

    def side(r: np.ndarray) -> tuple[float, np.ndarray]:  # the k-th largest reach, and the reaches
        return float(np.partition(r, len(r) - k)[len(r) - k]), r

    hi_reach, r_hi = side(_reach(a, B, T))
    lo_reach, r_lo = side(_reach(-a, B, T))
    lo, hi = max(-1.0, m - lo_reach), min(1.0, m + hi_reach)
    if m == 0:
        p = 1.0
    else:  # 0 lies |m| below the mean (m > 0) or above it (m < 0)
        r = r_lo if m > 0 else r_hi
        p = float(np.count_nonzero(r >= abs(m) - eps)) / len(S)
    if p >= 1 - level:  # the interval holds 0 exactly when p does not reject it (float ties aside)
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    elif lo <= 0 <= hi:
        lo, hi = (lo, -eps) if m < 0 else (eps, hi)
    return {"interval": [lo, hi], "p": p, "exact": exact, "flips": len(S)}


def _student(q: float, df: int) -> float:
    from scipy.stats import t as student

    return float(student.ppf(q, df))


def tasks_needed(delta: float, sd: float, alpha: float, power: float) -> int:
    """The tasks at which a change `delta` with per-task spread `sd` is called with `power`: the
    smallest T with (t_{1−α/2, T−1} + t_{power, T−1}) · sd/√T ≤ |delta| (the t approximation; the
    normal one, T = ((z_{1−α/2} + z_power) · sd/|delta|)², is where the search starts: t's
    quantiles are larger), and at least the smallest T whose sign-flip test can reach p < α at all
    (2/2^T < α)."""
    least = 2
    while 2 / 2 ** least >= alpha:
        least += 1
    if sd == 0:
        return least
    from scipy.stats import norm, t as student

    ratio = sd / abs(delta)
    T = max(least, math.ceil(((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * ratio) ** 2))
    while T < 10 ** 9 and (student.ppf(1 - alpha / 2, T - 1) + student.ppf(power, T - 1)) * ratio > math.sqrt(T):
        T += 1
    return int(T)


FEW_TASKS = 30  # below this many tasks the interval's coverage depends on how the change is spread
MIN_MOVED = 4  # fewer tasks that moved than this: the interval rests on too few values
TOP_SHARE = 0.5  # one task carrying more than this share of Σ|d_t|: a change concentrated in few tasks


def coverage_warning(d: Sequence[float]) -> str | None:
    """Why the sign-flip interval over these per-task changes d_t may cover the true change less
    often than its level says, or None. The interval assumes each task's change is as likely above
    the mean as below it; over many tasks that matters little, over few it is what the coverage
    rests on. A change carried by a few tasks (most tasks unmoved, or one task holding most of
    Σ|d_t|) breaks it: at 8 tasks, where a fifth of the population's tasks move by +0.5 and the rest
    not at all, the 95% interval covered the population's change in 74% of simulated comparisons
    (bench/compare_coverage.py, "few"), and 90% where most tasks sit at 0 or 1 ("piled"). Below
    FEW_TASKS tasks it warns when fewer than MIN_MOVED tasks moved or the largest |d_t| is more
    than TOP_SHARE of Σ|d_t|; from FEW_TASKS tasks on, never (the bench's scenarios cover their
    level at 50 tasks). Chosen by simulation over the bench's scenarios at 8, 16 and 50 tasks
    (800 comparisons each): the comparisons it does not warn about covered at least 94% in every
    scenario (`few` at 8 tasks with shared seeds: 97% warned, the rest 100%), at the price of
    warning on 40-45% of the comparisons at 8 tasks with shared seeds where the interval holds
    anyway (`spread`, `mixed`), on every comparison of an unchanged policy with shared seeds (no
    task moves) and on at most 3% at 16 tasks outside `few` (docs/evaluation-compare.md has the table)."""
    x = np.abs(np.asarray(d, dtype=float))
    T = len(x)
    if T < 2 or T >= FEW_TASKS:
        return None
    moved = int((x > 1e-12).sum())
    if moved < MIN_MOVED:
        return (f"only {moved} of the {T} tasks moved: over fewer than {FEW_TASKS} tasks an interval resting on "
                f"so few may miss a change that other tasks like these would show; compare on more tasks")
    share = float(x.max() / x.sum())
    if share > TOP_SHARE:
        return (f"one task carries {share:.0%} of the change: over fewer than {FEW_TASKS} tasks a change "
                f"concentrated in a few tasks makes the interval cover less often than its level; compare on "
                f"more tasks")
    return None


def pass_at_1_change(base: Sequence[Tally], cand: Sequence[Tally], *, level: float = LEVEL, tests: int = 1,
                     pairing: str = "task", flips: int = SIGN_FLIPS, seed: int = 0,
                     power: float = POWER) -> dict[str, Any]:
    """The verdict on the pass@1 change between two runs of the same tasks (base[i], cand[i]: task i):

        delta            Δ = Σc'/Σn' − Σc/Σn = mean of the per-task changes d_t (`task_changes`)
        delta_interval   the sign-flip interval over the T tasks (`sign_flip_interval`) at level
                         1 − (1 − level)/tests (Bonferroni over the `tests` changes judged together)
        distinguishable  the interval excludes 0 (equivalently p < (1 − level)/tests); None with
                         fewer than 2 tasks
        p                the sign-flip test's two-sided p-value of no change
        coverage_warning why the interval may cover less often than its level (`coverage_warning`:
                         few tasks and a change carried by few of them), or None
        se               s_d/√T, s_d the spread (sample sd) of d_t across tasks: the task-clustered SE
        needed           when not distinguishable (and Δ ≠ 0): `tasks`, how many tasks like these
                         (at the observed spread s_d) would call a change of |Δ| with `power`
                         (`tasks_needed`); `attempts_per_task`, at the T tasks here, when the
                         attempts' own noise is what hides it: with W = mean over tasks of
                         σ'²/n' + σ²/n (each run's unbiased within-task variance c(n−c)/(n(n−1)),
                         scaled as d_t is), τ² = max(0, s_d² − W) the spread of the tasks' true
                         changes and V = T·(|Δ|/(t_{1−α/2,T−1} + t_{power,T−1}))² the spread that
                         would do, k·W/(V − τ²) attempts (None when τ² ≥ V: more attempts cannot,
                         more tasks can). W treats a task's attempts in the two runs as
                         independent; with shared seeds (pairing "seed") they are positively
                         paired, W overstates their noise and the figure is a lower bound
                         (`attempts_lower_bound`)

    with `method`, `pairing` (as given: "seed" or "task", compare.py decides), `tasks` (T),
    `level`, `tests`, `exact` and `flips` (the sign patterns)."""
    if pairing not in ("seed", "task"):
        raise ValueError(f"pairing {pairing!r}: expected 'seed' or 'task'")
    lvl = 1 - (1 - level) / tests
    pairs = [(b, c) for b, c in zip(base, cand) if b.n > 0 and c.n > 0]
    d = task_changes(base, cand)
    out: dict[str, Any] = {"delta": None, "delta_interval": None, "distinguishable": None, "p": None, "se": None,
                           "level": lvl, "tests": tests, "method": "sign-flip", "pairing": pairing, "tasks": len(d),
                           "exact": None, "flips": None, "needed": None, "coverage_warning": None}
    if not d:
        return out
    delta = (sum(c.c for _, c in pairs) / sum(c.n for _, c in pairs)
             - sum(b.c for b, _ in pairs) / sum(b.n for b, _ in pairs))
    out["delta"] = delta
    if len(d) < 2:
        return out
    sf = sign_flip_interval(d, level=lvl, flips=flips, seed=seed)
    assert sf is not None
    T, sd = len(d), float(np.std(d, ddof=1))
    alpha = 1 - lvl
    out.update(delta_interval=sf["interval"], distinguishable=sf["p"] < alpha, p=sf["p"], se=sd / math.sqrt(T),
               exact=sf["exact"], flips=sf["flips"], coverage_warning=coverage_warning(d))
    if out["distinguishable"] or abs(delta) < 1e-12:
        return out
    nb, nc = sum(b.n for b, _ in pairs) / T, sum(c.n for _, c in pairs) / T
    W = sum((b.n / nb) ** 2 * _within(b) / b.n + (c.n / nc) ** 2 * _within(c) / c.n for b, c in pairs) / T
    tau2 = max(0.0, sd ** 2 - W)
    V = T * (abs(delta) / (_student(1 - alpha / 2, T - 1) + _student(power, T - 1))) ** 2
    k = max(max(b.n, c.n) for b, c in pairs)
    attempts = None
    if W > 0 and V > tau2:
        attempts = math.ceil(k * W / (V - tau2))
        attempts = attempts if attempts > k else None
    out["needed"] = {"tasks": tasks_needed(delta, sd, alpha, power), "attempts_per_task": attempts,
                     "attempts_lower_bound": pairing == "seed", "power": power}
    return out


__all__ = ["EXACT_TASKS", "FEW_TASKS", "LEVEL", "MIN_MOVED", "POWER", "RESAMPLES", "SIGN_FLIPS", "TOP_SHARE", "Tally",
           "bootstrap_interval", "coverage_warning", "groups",
           "jeffreys_interval", "noise_floor", "observed_k_of_k", "pass_at_1", "pass_at_1_change", "pass_at_k",
           "pass_hat_k", "sign_flip_interval", "solved_at_least_once", "summarize", "t_interval", "task_changes",
           "tasks_needed"]
