"""Offline policy-relative difficulty: a task's probes -> Jeffreys posterior -> one of five bands.

A task probed n times with k successes has the posterior

    p | k of n  ~  Beta(k + 1/2, n - k + 1/2)          (Jeffreys prior Beta(1/2, 1/2))

The unit interval is cut at increasing `boundaries` (default 0.08, 0.40, 0.60, 0.90) into bands;
the task goes to the band holding the largest posterior mass (ties: the lower band). Default
bands and whether each is kept for training (the published full-parameter run):

    rarely_solved        [0, 0.08)     drop   (teaches nothing yet: all-0 groups)
    difficult            [0.08, 0.40)  keep
    intermediate         [0.40, 0.60)  keep
    frequently_solved    [0.60, 0.90)  keep
    nearly_always_solved [0.90, 1]     drop   (already learned: all-1 groups)

Worked example (tests/test_bands.py): 3 of 8 -> Beta(3.5, 5.5) -> 54.0% of its mass in
[0.08, 0.40) -> difficult.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

DEFAULT_BOUNDARIES = (0.08, 0.40, 0.60, 0.90)
DEFAULT_NAMES = ("rarely_solved", "difficult", "intermediate", "frequently_solved", "nearly_always_solved")
DEFAULT_KEEP = ("difficult", "intermediate", "frequently_solved")
TIE_TOLERANCE = 1e-12  # band masses closer than this are equal (their rounding is ~1e-16)


class BandError(ValueError):
    """A band configuration that cannot be used (the message says which value and why)."""


@dataclass(frozen=True)
class Bands:
    boundaries: tuple[float, ...] = DEFAULT_BOUNDARIES
    names: tuple[str, ...] = DEFAULT_NAMES
    keep: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_KEEP))

    def __post_init__(self) -> None:
        b = self.boundaries
        if not b:
            raise BandError("band boundaries: at least one is needed")
        for i, x in enumerate(b):
            if not 0.0 < x < 1.0:
                raise BandError(f"band boundary #{i + 1} = {x}: boundaries must lie inside (0, 1)")
            if i and x <= b[i - 1]:
                raise BandError(f"band boundaries must increase: {b[i - 1]} then {x}")
        if len(self.names) != len(b) + 1:
            raise BandError(f"{len(b)} boundaries make {len(b) + 1} bands, but {len(self.names)} names are given")
        if len(set(self.names)) != len(self.names):
            raise BandError(f"band names repeat: {', '.join(self.names)}")
        unknown = set(self.keep) - set(self.names)
        if unknown:
            raise BandError(f"kept band(s) {', '.join(sorted(unknown))} are not band names ({', '.join(self.names)})")

    @property
    def edges(self) -> tuple[float, ...]:
        return (0.0, *self.boundaries, 1.0)

    def interval(self, name: str) -> tuple[float, float]:
        i = self.names.index(name)
        return self.edges[i], self.edges[i + 1]


def posterior(k: int, n: int) -> tuple[float, float]:
    """The Jeffreys posterior's parameters (a, b) for k successes in n trials."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    return k + 0.5, n - k + 0.5


def band_masses(k: int, n: int, bands: Bands) -> list[float]:
    """Posterior mass in each band, in band order (they sum to 1)."""
    from scipy.stats import beta  # scipy.stats takes a second to import: not for every importer of this module

    a, b = posterior(k, n)
    cdf = [float(beta.cdf(x, a, b)) for x in bands.boundaries]
    cuts = [0.0, *cdf, 1.0]
    return [cuts[i + 1] - cuts[i] for i in range(len(bands.names))]


def assign(k: int, n: int, bands: Bands) -> tuple[str, list[float]]:
    """(the band with the largest posterior mass, every band's mass)."""
    masses = band_masses(k, n, bands)
    top = max(masses)
    # ties go to the lower band; masses are differences of CDFs, so equal masses (a symmetric
    # posterior, symmetric bands) can differ by rounding: closer than TIE_TOLERANCE is a tie
    best = next(i for i, m in enumerate(masses) if m >= top - TIE_TOLERANCE)
    return bands.names[best], masses


def band_table(n: int, bands: Bands) -> list[str]:
    """The band of each k = 0..n for n probes (what the banding rule does to every outcome)."""
    return [assign(k, n, bands)[0] for k in range(n + 1)]


def parse_boundaries(text: str | Sequence[float]) -> tuple[float, ...]:
    """`"0.08,0.40,0.60,0.90"` (or numbers) -> a tuple; a value that is not a number names itself."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for i, x in enumerate(items):
        try:
            out.append(float(x))
        except (TypeError, ValueError):
            raise BandError(f"band boundary #{i + 1} = {x!r} is not a number") from None
    return tuple(out)


__all__ = ["DEFAULT_BOUNDARIES", "DEFAULT_KEEP", "DEFAULT_NAMES", "BandError", "Bands", "assign", "band_masses",
           "band_table", "parse_boundaries", "posterior"]
