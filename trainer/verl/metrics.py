"""Per-step episode metrics from a rollout batch (what the training loop logs to wandb and the console).

`step_metrics(non_tensor_batch, group_ids)` reads the `reward_extra_info` fields the agent loop
puts into verl's batch (one value per trajectory: score, passed, end_reason, system_error_reruns,
tool_calls, parse_failures, generated_tokens, episode_seconds, truncated) and returns flat
`thinkingbox/...` metrics: reward mean, the share of zero-variance groups (all members the same
reward: DAPO replaces them), members re-run after system errors, parse failures per episode,
the share of each end reason, tokens and wall seconds per episode, the share truncated.
Dropped (failed) groups and DAPO replacements are counted by verl's replay buffer itself
(`training/rollout_failure/evicted_samples`, `training/filter_groups/evicted_samples`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Mapping, Sequence

import numpy as np


def step_metrics(batch: Mapping[str, Sequence[Any]], group_ids: Sequence[Any]) -> dict[str, float]:
    n = len(group_ids)
    if n == 0:
        return {}
    col = {k: list(batch[k]) for k in ("score", "end_reason", "system_error_reruns", "parse_failures",
                                       "generated_tokens", "episode_seconds", "truncated", "tool_calls") if k in batch}
    out: dict[str, float] = {}
    scores = [float(x) for x in col.get("score", [])]
    if scores:
        out["thinkingbox/reward_mean"] = float(np.mean(scores))
        groups: dict[Any, list[float]] = defaultdict(list)
        for g, s in zip(group_ids, scores):
            groups[g].append(s)
        out["thinkingbox/zero_variance_group_share"] = float(np.mean([len(set(v)) == 1 for v in groups.values()]))
    for key, name in (("system_error_reruns", "members_rerun"), ("parse_failures", "parse_failures")):
        if key in col:
            out[f"thinkingbox/{name}_total"] = float(sum(col[key]))
    for key, name in (("parse_failures", "parse_failures_per_episode"), ("generated_tokens", "tokens_per_episode"),
                      ("episode_seconds", "episode_seconds"), ("truncated", "truncated_share"),
                      ("tool_calls", "tool_calls_per_episode")):
        if key in col:
            out[f"thinkingbox/{name}"] = float(np.mean([float(x) for x in col[key]]))
    for reason, k in Counter(col.get("end_reason", [])).items():
        out[f"thinkingbox/end_reason/{reason}"] = k / n
    return out


__all__ = ["step_metrics"]
