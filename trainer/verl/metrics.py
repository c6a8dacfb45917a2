"""Per-step episode metrics (what the training loop logs to the console, wandb and metrics.jsonl).

`step_metrics(infos, prefix)` aggregates the `reward_extra_info` of a step's sampled trajectories
(one dict per trajectory, as the agent loop puts it into `extra_fields`: score, passed, end_reason,
system_error_reruns, parse_failures, tool_calls, generated_tokens, episode_seconds, truncated, ...)
into flat metrics: `{prefix}/episode/{field}/mean` for a numeric field (the reward mean is
`training/episode/score/mean`), `{prefix}/episode/{field}/{value}` (the share of trajectories) for a
text one (`training/episode/end_reason/done`, ...); a field of mixed kinds is left out.

It is the one implementation: verl's replay buffer calls it every step (patch 0001,
trainer/verl/patches/0001-replay-buffer.patch, `ReplayBuffer._episode_metrics`: sync and async), so
what a test or an offline analysis computes here is what training logs. Dropped (failed) groups and
DAPO replacements are counted by verl's replay buffer itself (`training/rollout_failure/evicted_samples`,
`training/filter_groups/evicted_samples`). Imported by patched verl: numpy and the standard library only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

import numpy as np


def step_metrics(infos: Iterable[Mapping[str, Any]], prefix: str = "training") -> dict[str, float]:
    """The metrics of one step's trajectories, each given by its `reward_extra_info` (module docstring)."""
    values: dict[str, list] = defaultdict(list)
    for info in infos:
        for field, value in info.items():
            values[field].append(value)
    out: dict[str, float] = {}
    for field, vs in values.items():
        if all(isinstance(v, (bool, int, float, np.number)) for v in vs):
            out[f"{prefix}/episode/{field}/mean"] = float(np.mean([float(v) for v in vs]))
        elif all(isinstance(v, str) for v in vs):
            for value, count in Counter(vs).items():
                out[f"{prefix}/episode/{field}/{value}"] = count / len(vs)
    return out


__all__ = ["step_metrics"]
