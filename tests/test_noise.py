"""The noise floor (issue 28 item 1) and the verdict on a change against simulated campaigns with
known per-task success probabilities: 100 tasks, k = 4 / 8 / 20. Two runs of the same policy are
called distinguishable by `tbt compare`'s verdict (metrics.pass_at_1_change) at no more than the
stated rate (and, with the per-domain changes judged together, nothing in at least 95% of seeds);
with the same seeds (each attempt's draw shared, as `tbt eval --seed` gives), never. The minimum
detectable difference of one run's noise floor is estimated right and has its power; the flip rate
and ICC match what the probabilities imply. Seeded: the same numbers every run (~10 s)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer.eval.metrics import noise_floor, pass_at_1_change
from trainer.formats.attempts import Tally

T, SEEDS = 100, 300
FLIPS = 2000  # random sign patterns per test (a valid Monte Carlo p-value at any count; the default 20,000 is slower)


def tallies(rng, p, k):
    return [Tally(k, int(c)) for c in rng.binomial(k, p)]


@pytest.mark.parametrize("k", [4, 8, 20])
def test_same_policy_is_not_distinguishable_at_the_stated_rate(k):
    rng = np.random.default_rng(k)
    p = rng.uniform(0.05, 0.95, T)
    domains = np.arange(T) % 5
    false_overall, any_domain = 0, 0
    for i in range(SEEDS):
        a, b = tallies(rng, p, k), tallies(rng, p, k)  # independent attempts: the tasks alone pair
        false_overall += bool(pass_at_1_change(a, b, flips=FLIPS, seed=i)["distinguishable"])
        any_domain += any(pass_at_1_change([a[j] for j in range(T) if domains[j] == d],
                                           [b[j] for j in range(T) if domains[j] == d], tests=5, flips=FLIPS,
                                           seed=i)["distinguishable"] for d in range(5))
    # the overall change alone at 95% (about 5%, or fewer: the tasks' spread of pass rates is part of its noise)
    assert false_overall / SEEDS <= 0.05 + 0.03
    assert any_domain / SEEDS <= 0.05 + 0.03  # the five domains judged together (Bonferroni): none in >= 95% of seeds


def test_same_policy_with_the_same_seeds_is_never_distinguishable():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.05, 0.95, T)
    u = rng.random((T, 8))  # the attempts' draws, shared by both runs (the same episode seeds)
    a = [Tally(8, int(c)) for c in (u < p[:, None]).sum(axis=1)]
    v = pass_at_1_change(a, list(a), pairing="seed")
    assert v["delta"] == 0 and v["delta_interval"] == [0.0, 0.0] and v["distinguishable"] is False


@pytest.mark.parametrize("k", [4, 8, 20])
def test_the_minimum_detectable_difference_has_its_power(k):
    """noise_floor's minimum detectable difference: of another run of these same tasks with independent
    attempts (the tasks fixed, so their difficulty cancels), at 95% and 80% power: a z-test of the
    change with the attempts' own SE calls a change that size in about 80% of the runs."""
    rng = np.random.default_rng(100 + k)
    p = rng.uniform(0.2, 0.7, T)
    true_mdd = (1.959964 + 0.841621) * np.sqrt(2 * np.sum(p * (1 - p) / k) / T ** 2)
    est = [noise_floor(tallies(rng, p, k))["min_detectable_difference"] for _ in range(100)]
    assert np.mean(est) == pytest.approx(true_mdd, rel=0.05)  # the estimate from one run is about right
    q = p + true_mdd  # a candidate better by exactly the MDD on every task (no clipping: p + mdd < 1)

    def called(a, b):
        n = T * k
        var = sum(t.c * (t.n - t.c) / (t.n * (t.n - 1)) / t.n for t in a + b) / T ** 2
        return abs(sum(t.c for t in b) / n - sum(t.c for t in a) / n) > 1.959964 * math.sqrt(var)

    hits = sum(called(tallies(rng, p, k), tallies(rng, q, k)) for _ in range(SEEDS))
    assert hits / SEEDS == pytest.approx(0.8, abs=0.08)


def test_flip_rate_and_icc_match_the_probabilities():
    rng = np.random.default_rng(7)
    a, b = 0.5, 0.5  # p ~ Beta(a, b): the ICC of binary outcomes is 1 / (a + b + 1)
    p = rng.beta(a, b, 2000)
    ts = tallies(rng, p, 8)
    nf = noise_floor(ts)
    assert nf["icc"] == pytest.approx(1 / (a + b + 1), abs=0.03)
    assert nf["flip_rate"] == pytest.approx(np.mean(1 - p ** 8 - (1 - p) ** 8), abs=0.03)
    assert nf["effective_samples"] == pytest.approx(2000 * 8 / (1 + 7 * nf["icc"]))
    assert noise_floor([Tally(1, 1), Tally(1, 0)])["min_detectable_difference"] is None  # k = 1: no variance
