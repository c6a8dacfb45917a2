"""A training run's per-step metrics as verl's file logger writes them (`trainer.logger: [file]`,
`VERL_FILE_LOGGER_PATH`): one JSON object per line, `{"step": N, "data": {metric: value}}`.

`read(path)` checks every line (a bad one is a `TrainLogError` naming the file and line; a step
logged on several lines is their merge, a later value winning: verl's validation before training
and the fully-async trainer's timing at a start log a step again) and returns the steps in order;
`curve(steps)` is the reward curve: per step, the share of episodes whose verdict passed
(`training/episode/score/mean`, our agent loop's; verl's `critic/score/mean` where that is
absent), the tokens generated per episode and the step's seconds; `curve_png` plots it (tbt report
--training, tbt quickstart --train).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.core.figures import figure_png

SCORE_KEYS = ("training/episode/score/mean", "thinkingbox/reward_mean", "critic/score/mean")


class TrainLogError(ValueError):
    """A metrics file that is not verl's file-logger JSONL (the message names file and line)."""


def read(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TrainLogError(f"{path}: {e.strerror or e}") from None
    steps: dict[int, dict[str, Any]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise TrainLogError(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int) or not isinstance(rec.get("data"), dict):
            raise TrainLogError(f"{path}:{n}: expected {{\"step\": int, \"data\": {{...}}}} (verl's file logger)")
        # a step may log more than one line (verl's validation before training, the fully-async
        # trainer's timing at a start): merged, a later value winning, no key lost
        steps.setdefault(rec["step"], {}).update(rec["data"])
    if not steps:
        raise TrainLogError(f"{path}: no step logged")
    return sorted(steps.items())


def _num(data: Mapping[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = data.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def curve(steps: Sequence[tuple[int, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One row per step: step, score (pass share of its episodes), generated tokens (mean per
    episode), seconds (the step's wall time); None where the step did not log it."""
    rows = []
    for step, data in steps:
        rows.append({"step": step, "score": _num(data, *SCORE_KEYS),
                     "generated_tokens": _num(data, "training/episode/generated_tokens/mean"),
                     "seconds": _num(data, "timing_s/step")})
    return rows


def curve_png(rows: Sequence[Mapping[str, Any]], title: str = "reward per training step") -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r["step"], r["score"]) for r in rows if r["score"] is not None]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", lw=1.2)
    ax.set_xlabel("training step")
    ax.set_ylabel("episodes passed (share)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return figure_png(fig)


__all__ = ["SCORE_KEYS", "TrainLogError", "curve", "curve_png", "read"]
