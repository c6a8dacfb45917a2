"""The banding rule (trainer/data/bands.py), pure: the Jeffreys posterior, band masses, the band
of each outcome, ties, and the messages of a band configuration that cannot be used.

The masses are checked against a Beta density integrated independently (math.lgamma + quad),
not against the scipy.stats.beta CDF the module itself uses.
"""

from __future__ import annotations

import math
import random

import pytest
from lazy_import import lazy

from trainer.data.bands import (DEFAULT_BOUNDARIES, DEFAULT_KEEP, DEFAULT_NAMES, BandError, Bands, assign, band_masses,
                                band_table, parse_boundaries, posterior)

B = Bands()
quad = lazy("scipy.integrate", "quad")  # imported when a test first integrates, not at collection


def beta_mass(a: float, b: float, lo: float, hi: float) -> float:
    """Mass of Beta(a, b) in [lo, hi], integrating the density (log-gamma normaliser)."""
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    dens = lambda x: math.exp(log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x))  # noqa: E731
    # the density is infinite at 0 (k = 0) or 1 (k = n) under the Jeffreys prior: an integrable
    # end-point singularity, which quad handles
    return quad(dens, lo, hi, limit=200, epsabs=1e-12, epsrel=1e-10)[0]


# ---------------------------------------------------------------------------- the worked example

def test_worked_example_3_of_8_is_difficult():
    """3 of 8 -> Beta(3.5, 5.5) -> 54.0% of its mass in [0.08, 0.40) -> difficult."""
    assert posterior(3, 8) == (3.5, 5.5)
    band, masses = assign(3, 8, B)
    assert band == "difficult"
    assert B.interval("difficult") == (0.08, 0.40)
    assert f"{masses[1]:.1%}" == "54.0%"
    assert masses[1] == pytest.approx(beta_mass(3.5, 5.5, 0.08, 0.40), abs=1e-9)
    assert masses[1] == max(masses)
    # and the rest of it: every band's mass as the density integrates it
    for m, (lo, hi) in zip(masses, zip(B.edges, B.edges[1:])):
        assert m == pytest.approx(beta_mass(3.5, 5.5, lo, hi), abs=1e-9)


def test_defaults_are_the_documented_bands():
    assert B.boundaries == DEFAULT_BOUNDARIES == (0.08, 0.40, 0.60, 0.90)
    assert B.names == DEFAULT_NAMES
    assert B.keep == frozenset(DEFAULT_KEEP) == {"difficult", "intermediate", "frequently_solved"}
    assert B.edges == (0.0, 0.08, 0.40, 0.60, 0.90, 1.0)
    assert B.interval("rarely_solved") == (0.0, 0.08) and B.interval("nearly_always_solved") == (0.90, 1.0)


# ---------------------------------------------------------------------------- masses

@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 8, 12, 20, 50, 200])
def test_masses_are_a_distribution_over_the_bands(n):
    for k in range(n + 1):
        masses = band_masses(k, n, B)
        assert len(masses) == len(B.names)
        assert all(m >= -1e-15 for m in masses)
        assert sum(masses) == pytest.approx(1.0, abs=1e-12)


def test_masses_match_the_integrated_density_for_other_bands():
    rng = random.Random(5)
    for _ in range(12):
        cuts = tuple(sorted(round(rng.uniform(0.02, 0.98), 3) for _ in range(rng.randint(1, 5))))
        if len(set(cuts)) != len(cuts):
            continue
        bands = Bands(cuts, tuple(f"b{i}" for i in range(len(cuts) + 1)), frozenset())
        n = rng.randint(0, 30)
        k = rng.randint(0, n)
        a, b = posterior(k, n)
        got = band_masses(k, n, bands)
        want = [beta_mass(a, b, lo, hi) for lo, hi in zip(bands.edges, bands.edges[1:])]
        assert got == pytest.approx(want, abs=1e-8)
        assert sum(got) == pytest.approx(1.0, abs=1e-12)


def test_posterior_rejects_impossible_counts():
    for k, n in [(-1, 3), (4, 3), (0, -1)]:
        with pytest.raises(ValueError, match=rf"need 0 <= k <= n, got k={k}, n={n}"):
            posterior(k, n)
    assert posterior(0, 0) == (0.5, 0.5)  # the prior itself


# ---------------------------------------------------------------------------- band_table

def test_band_table_of_the_usual_probe_counts():
    r, d, i, f, a = DEFAULT_NAMES
    assert band_table(1, B) == [d, a]
    assert band_table(4, B) == [r, d, i, f, a]
    assert band_table(8, B) == [r, d, d, d, i, f, f, f, a]
    assert band_table(12, B) == [r, d, d, d, d, i, i, i, f, f, f, a, a]
    assert band_table(20, B) == [r, r, *[d] * 7, i, i, i, *[f] * 7, a, a]


@pytest.mark.parametrize("n", [0, 1, 2, 5, 8, 13, 30, 64])
def test_band_table_is_assign_of_every_k_and_never_goes_down(n):
    table = band_table(n, B)
    assert len(table) == n + 1
    assert table == [assign(k, n, B)[0] for k in range(n + 1)]
    idx = [B.names.index(b) for b in table]
    assert idx == sorted(idx)  # one more success never lands in a harder band
    if n >= 2:
        assert table[0] == "rarely_solved" and table[-1] == "nearly_always_solved"


def test_the_band_is_the_one_with_the_largest_mass():
    for n in (3, 9, 16):
        for k in range(n + 1):
            band, masses = assign(k, n, B)
            assert masses[B.names.index(band)] == max(masses)


def test_mirrored_bands_give_mirrored_tables():
    """Boundaries symmetric about 1/2: k successes and n - k successes land in mirrored bands
    (the posterior of n - k is the mirror image of that of k); an exact tie goes to the lower band."""
    bands = Bands((0.1, 0.45, 0.55, 0.9), ("a", "b", "c", "d", "e"), frozenset("bcd"))
    mirror = dict(zip("abcde", "edcba"))
    for n in (1, 2, 5, 8, 11, 20):
        table = band_table(n, bands)
        for k in range(n + 1):
            if 2 * k != n:
                assert table[n - k] == mirror[table[k]], (n, k, table)


# ---------------------------------------------------------------------------- ties

def test_an_exact_tie_goes_to_the_lower_band():
    """k = n/2 with a single boundary at 1/2: the posterior is symmetric, both bands hold exactly
    half its mass. The CDF differences carry rounding noise of either sign; the rule still says
    the lower band, for every n."""
    halves = Bands((0.5,), ("lower", "upper"), frozenset({"lower"}))
    for n in range(0, 42, 2):
        band, masses = assign(n // 2, n, halves)
        assert masses == pytest.approx([0.5, 0.5], abs=1e-12)
        assert band == "lower", (n, masses)
    # and one past the middle is no tie
    assert assign(2, 3, halves)[0] == "upper" and assign(1, 3, halves)[0] == "lower"


def test_a_tie_between_the_outer_bands_goes_to_the_lower_one():
    """The prior Beta(1/2, 1/2) (no probes) with bands [0, .4), [.4, .6), [.6, 1]: the outer two
    hold 43.6% each, the middle 12.8%."""
    three = Bands((0.4, 0.6), ("low", "mid", "high"), frozenset())
    band, masses = assign(0, 0, three)
    assert masses[0] == pytest.approx(masses[2], abs=1e-12) and masses[0] == pytest.approx(2 / math.pi * math.asin(math.sqrt(0.4)))
    assert band == "low"
    for n in (2, 4):  # still outer ties; from n = 6 on the middle band is the largest
        assert assign(n // 2, n, three)[0] == "low"
    assert assign(3, 6, three)[0] == "mid"


def test_a_tie_is_only_a_tie_within_rounding():
    """Masses that differ by more than rounding are not a tie: the larger one wins, even when it
    is the upper band by a hair."""
    two = Bands((0.5,), ("lower", "upper"), frozenset())
    a, b = posterior(5, 9)  # Beta(5.5, 4.5): a little more mass above 1/2
    band, masses = assign(5, 9, two)
    assert 0 < masses[1] - masses[0] < 0.3 and band == "upper"
    assert masses[0] == pytest.approx(beta_mass(a, b, 0.0, 0.5), abs=1e-9)


# ---------------------------------------------------------------------------- configurations

@pytest.mark.parametrize("boundaries, message", [
    ((), "band boundaries: at least one is needed"),
    ((0.0, 0.4, 0.6, 0.9), "band boundary #1 = 0.0: boundaries must lie inside (0, 1)"),
    ((0.08, 0.4, 0.6, 1.0), "band boundary #4 = 1.0: boundaries must lie inside (0, 1)"),
    ((0.08, 1.4), "band boundary #2 = 1.4: boundaries must lie inside (0, 1)"),
    ((-0.1, 0.5), "band boundary #1 = -0.1: boundaries must lie inside (0, 1)"),
    ((float("nan"), 0.5), "band boundary #1 = nan: boundaries must lie inside (0, 1)"),
    ((0.08, 0.60, 0.40, 0.90), "band boundaries must increase: 0.6 then 0.4"),
    ((0.08, 0.40, 0.40, 0.90), "band boundaries must increase: 0.4 then 0.4"),
])
def test_boundaries_that_are_not_increasing_inside_the_unit_interval(boundaries, message):
    names = tuple(f"b{i}" for i in range(len(boundaries) + 1))
    with pytest.raises(BandError) as e:
        Bands(boundaries, names, frozenset())
    assert str(e.value) == message


def test_names_and_keep_must_fit_the_boundaries():
    with pytest.raises(BandError, match=r"^4 boundaries make 5 bands, but 4 names are given$"):
        Bands(DEFAULT_BOUNDARIES, DEFAULT_NAMES[:4])
    with pytest.raises(BandError, match=r"^band names repeat: a, b, a$"):
        Bands((0.3, 0.6), ("a", "b", "a"), frozenset())
    with pytest.raises(BandError, match=r"^kept band\(s\) easy, hard are not band names \(a, b\)$"):
        Bands((0.5,), ("a", "b"), frozenset({"hard", "easy"}))
    assert isinstance(BandError("x"), ValueError)


def test_parse_boundaries():
    assert parse_boundaries("0.08,0.40,0.60,0.90") == DEFAULT_BOUNDARIES
    assert parse_boundaries(" 0.1 , 0.5") == (0.1, 0.5)
    assert parse_boundaries([0.2, "0.7"]) == (0.2, 0.7)
    with pytest.raises(BandError, match=r"^band boundary #2 = 'abc' is not a number$"):
        parse_boundaries("0.1,abc,0.6")
    with pytest.raises(BandError, match=r"^band boundary #2 = '' is not a number$"):
        parse_boundaries("0.1,,0.6")
    with pytest.raises(BandError, match=r"^band boundary #1 = None is not a number$"):
        parse_boundaries([None])
    # parsed but unusable: the configuration says why
    with pytest.raises(BandError, match="must increase"):
        Bands(parse_boundaries("0.9,0.1"), ("a", "b", "c"), frozenset())
