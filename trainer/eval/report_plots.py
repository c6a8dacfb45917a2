"""The report's plots (trainer/eval/report.py), one PNG each, drawn with matplotlib's object API
(`Figure` on the Agg canvas: no pyplot, no global backend switch, nothing kept between calls).

- `heatmap`: the seed's Figure 3. Rows: domains, then Overall; columns: pass@1, pass@k (tasks
  solved at least once), observed k/k, in %. Three panels: base, candidate (blue shading by level,
  one scale per metric shared by both panels) and the change in points (green gains, red declines,
  white none; a scale symmetric around 0).
- `pareto`: the seed's Figure 4. Cost per successful attempt ($, y, plain decimals: no offset or
  power-of-ten note) against pass@1 (%, x), one
  point per run; the Pareto cost frontier (no other run has pass@1 at least as high for at most
  the cost, one of them strictly) ringed and joined; a golden arrow from the first run (base) to
  the second (candidate, a diamond).
- `reliability`: pass^k (unbiased, solid) and pass@k (dashed) against k = 1..K, per run.
- `bands`: tasks per difficulty band (bands.csv of data/prepare_data.py), stacked by domain, with
  kept / all over each bar.

PNG metadata carries no software version, so equal inputs give equal bytes on one install.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110
GOLD = "#c9a227"
MISSING = "#dddddd"


@dataclass(frozen=True)
class ParetoPoint:
    """One run of Figure 4: pass@1 in %, cost per successful attempt in $."""

    label: str
    pass_at_1: float
    cost: float


@dataclass(frozen=True)
class Curve:
    """One run's reliability curves: pass^k and pass@k in % by k (None: no task has k attempts)."""

    label: str
    pass_hat_k: Mapping[int, float | None]
    pass_at_k: Mapping[int, float | None]


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points (pass@1, cost) no other point dominates: higher-or-equal pass@1 for
    lower-or-equal cost, one of the two strictly. Sorted by pass@1."""
    front = []
    for i, (p, c) in enumerate(points):
        if not any((q >= p and d <= c) and (q > p or d < c) for j, (q, d) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def heatmap(domains: Sequence[str], metrics: Sequence[str], base: Sequence[Sequence[float | None]],
            cand: Sequence[Sequence[float | None]], labels: tuple[str, str], path: Path) -> Path:
    """Figure 3: `base[i][j]`, `cand[i][j]` = metric j of domain i in % (None: absent)."""
    from matplotlib import colormaps  # imported in each plot: matplotlib costs seconds at import
    from matplotlib.colors import TwoSlopeNorm, to_rgba
    from matplotlib.figure import Figure
    rows, cols = len(domains), len(metrics)
    fig = Figure(figsize=(4.2 * 3, 0.55 * rows + 1.8), dpi=DPI)
    axes = fig.subplots(1, 3)
    blues = colormaps["Blues"]
    diverging = colormaps["RdYlGn"]
    change = [[(c - b) if b is not None and c is not None else None for b, c in zip(rb, rc)]
              for rb, rc in zip(base, cand)]
    span = max([abs(x) for r in change for x in r if x is not None] + [1.0])
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-span, vmax=span)
    for ax, title, grid in ((axes[0], labels[0], base), (axes[1], labels[1], cand),
                            (axes[2], "change (points)", change)):
        colors, texts = [], []
        for i in range(rows):
            crow, trow = [], []
            for j in range(cols):
                v = grid[i][j]
                if v is None:
                    crow.append(MISSING)
                    trow.append("—")
                elif grid is change:
                    crow.append(diverging(norm(v)) if abs(v) > 1e-9 else (1, 1, 1, 1))
                    trow.append(f"{v:+.1f}" if abs(v) >= 0.05 else "0.0")
                else:
                    col = [x for g in (base, cand) for x in (g[r][j] for r in range(rows)) if x is not None]
                    lo, hi = min(col), max(col)
                    level = 0.15 + 0.6 * ((v - lo) / (hi - lo) if hi > lo else 0.5)
                    crow.append(blues(level))
                    trow.append(f"{v:.1f}")
            colors.append(crow)
            texts.append(trow)
        ax.imshow([[to_rgba(c) for c in r] for r in colors], aspect="auto")
        for i in range(rows):
            for j in range(cols):
                ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=9)
        ax.set_xticks(range(cols), metrics, fontsize=8)
        ax.set_yticks(range(rows), domains if ax is axes[0] else [""] * rows, fontsize=9)
        ax.tick_params(length=0)
        ax.set_title(title, fontsize=10)
    fig.suptitle("Per-domain scores (%): base, candidate and change", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def pareto(runs: Sequence[ParetoPoint], path: Path) -> Path:
    """Figure 4: one point per run, in report
    order (the first is the base, the second the candidate)."""
    return _save(pareto_figure(runs), path)


def pareto_figure(runs: Sequence[ParetoPoint]) -> Figure:
    """Figure 4 as a `Figure` (what `pareto` saves). The cost axis reads in plain dollars: no
    offset or power-of-ten note beside "($)" (costs of 1e-5 $ read 0.00001)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import ScalarFormatter

    fig = Figure(figsize=(7.5, 5), dpi=DPI)
    ax = fig.subplots()
    pts = [(r.pass_at_1, r.cost) for r in runs]
    front = pareto_front(pts)
    for i, (r, (x, y)) in enumerate(zip(runs, pts)):
        ax.scatter([x], [y], s=70, marker="D" if i == 1 else "o", color=GOLD if i < 2 else "#4472c4", zorder=3)
        ax.annotate(r.label, (x, y), textcoords="offset points", xytext=(8, 6), fontsize=8)
    if front:
        ax.scatter([pts[i][0] for i in front], [pts[i][1] for i in front], s=260, facecolors="none",
                   edgecolors="#333333", linewidths=1.2, zorder=2, label="Pareto cost frontier")
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], color="#333333", lw=0.8, ls=":", zorder=1)
    if len(pts) >= 2:
        ax.annotate("", xy=pts[1], xytext=pts[0],
                    arrowprops={"arrowstyle": "-|>", "color": GOLD, "lw": 2, "shrinkA": 7, "shrinkB": 7})
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    padx, pady = max(2.0, (max(xs) - min(xs)) * 0.15), max(max(ys) * 0.05, (max(ys) - min(ys)) * 0.15)
    ax.set_xlim(min(xs) - padx, max(xs) + padx)
    ax.set_ylim(max(0.0, min(ys) - pady), max(ys) + pady)
    ax.set_xlabel("pass@1 (%)")
    ax.set_ylabel("cost per successful attempt ($)")
    plain = ScalarFormatter(useOffset=False)
    plain.set_scientific(False)
    ax.yaxis.set_major_formatter(plain)
    ax.set_title("Cost per successful attempt vs pass@1 (lower right is better)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def reliability(runs: Sequence[Curve], path: Path) -> Path:
    """pass^k and pass@k against k, one `Curve` per run."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7.5, 4.6), dpi=DPI)
    ax = fig.subplots()
    cycle = colormaps["tab10"]
    kmax = 1
    for i, r in enumerate(runs):
        color = cycle(i % 10)
        ks = sorted(k for k, v in r.pass_hat_k.items() if v is not None)
        ax.plot(ks, [r.pass_hat_k[k] for k in ks], marker="o", ms=3.5, color=color, label=f"{r.label}: pass^k")
        ka = sorted(k for k, v in r.pass_at_k.items() if v is not None)
        ax.plot(ka, [r.pass_at_k[k] for k in ka], ls="--", color=color, alpha=0.6, label=f"{r.label}: pass@k")
        kmax = max([kmax, *ks, *ka])
    ax.set_xlabel("k (attempts)")
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_xlim(1, max(kmax, 2))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Reliability: pass^k (all k attempts pass) and pass@k (at least one passes)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return _save(fig, path)


def bands(names: Sequence[str], counts: Mapping[str, Mapping[str, int]], kept: Mapping[str, int],
          path: Path) -> Path:
    """`counts[band][domain]` tasks; `kept[band]` of them kept for training."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 4.4), dpi=DPI)
    ax = fig.subplots()
    domains = sorted({d for per in counts.values() for d in per})
    bottom = [0] * len(names)
    for dom in domains:
        vals = [counts.get(b, {}).get(dom, 0) for b in names]
        ax.bar(range(len(names)), vals, bottom=bottom, label=dom)
        bottom = [x + y for x, y in zip(bottom, vals)]
    for i, b in enumerate(names):
        ax.text(i, bottom[i], f"kept {kept.get(b, 0)}/{bottom[i]}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), [b.replace("_", " ") for b in names], fontsize=8)
    ax.set_ylabel("tasks")
    ax.set_ylim(0, max(bottom + [1]) * 1.18)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Offline difficulty: tasks per band (largest Jeffreys posterior mass)", fontsize=10)
    if domains:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


__all__ = ["Curve", "ParetoPoint", "bands", "heatmap", "pareto", "pareto_front", "reliability"]
