"""The noise floor (issue 28 item 1) against simulated campaigns with known per-task success
probabilities: 100 tasks, k = 4 / 8 / 20. Two runs of the same policy are called distinguishable
at about the stated rate (and, with the per-domain changes judged together, nothing is in at
least 95% of seeds); a true change of the minimum detectable difference is detected with about
the stated power; the flip rate and ICC match what the probabilities imply. Seeded: the same
numbers every run (~2 s)."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.eval.metrics import noise_floor, paired_noise_test
from trainer.rollout.attempts import Tally

T, SEEDS = 100, 300


def tallies(rng, p, k):
    return [Tally(k, int(c)) for c in rng.binomial(k, p)]


@pytest.mark.parametrize("k", [4, 8, 20])
def test_same_policy_is_not_distinguishable_at_the_stated_rate(k):
    rng = np.random.default_rng(k)
    p = rng.uniform(0.05, 0.95, T)
    domains = np.arange(T) % 5
    false_overall, any_flagged = 0, 0
    for _ in range(SEEDS):
        a, b = tallies(rng, p, k), tallies(rng, p, k)
        tests = 6  # overall and five domains, judged together (Bonferroni)
        flags = [paired_noise_test(a, b, tests=tests)["distinguishable"]]
        flags += [paired_noise_test([a[i] for i in range(T) if domains[i] == d],
                                    [b[i] for i in range(T) if domains[i] == d], tests=tests)["distinguishable"]
                  for d in range(5)]
        false_overall += paired_noise_test(a, b)["distinguishable"]
        any_flagged += any(flags)
    assert false_overall / SEEDS == pytest.approx(0.05, abs=0.035)  # one test at 95%: ~5% false calls
    assert any_flagged / SEEDS <= 0.05 + 0.03  # nothing distinguishable in >= 95% of seeds (within simulation error)


@pytest.mark.parametrize("k", [4, 8, 20])
def test_the_minimum_detectable_difference_has_its_power(k):
    rng = np.random.default_rng(100 + k)
    p = rng.uniform(0.2, 0.7, T)
    true_mdd = (1.959964 + 0.841621) * np.sqrt(2 * np.sum(p * (1 - p) / k) / T ** 2)
    est = [noise_floor(tallies(rng, p, k))["min_detectable_difference"] for _ in range(100)]
    assert np.mean(est) == pytest.approx(true_mdd, rel=0.05)  # the estimate from one run is about right
    q = p + true_mdd  # a candidate better by exactly the MDD on every task (no clipping: p + mdd < 1)
    hits = sum(paired_noise_test(tallies(rng, p, k), tallies(rng, q, k))["distinguishable"] for _ in range(SEEDS))
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
