"""The band histogram as a terminal chart (rich), shared by data/prepare_data.py and `tbt quickstart`."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from trainer.data.bands import Bands


def histogram(summary: dict[str, Any], bands: Bands, width: int = 24) -> Table:
    t = Table(title="tasks per difficulty band (largest Jeffreys posterior mass)", show_edge=False)
    for col in ("band", "interval", "tasks", "", "kept"):
        t.add_column(col)
    counts = {b: summary["bands"][b]["tasks"] for b in bands.names}
    top = max(counts.values()) or 1
    for b, (lo, hi) in zip(bands.names, zip(bands.edges, bands.edges[1:])):
        t.add_row(b, f"[{lo:g}, {hi:g}{']' if hi == 1 else ')'}", str(counts[b]), "█" * round(width * counts[b] / top),
                  "keep" if b in bands.keep else "drop")
    return t


def outcome_line(summary: dict[str, Any]) -> str:
    s = summary
    return (f"{s['candidates']} candidate(s): {s['kept']} kept ({s['train']} train, {s['validation']} validation); "
            "not kept: " + (", ".join(f"{k} {v}" for k, v in s["not_kept"].items()) or "none"))


__all__ = ["histogram", "outcome_line"]
