"""Advantage estimators of ours, registered with verl's own table (`core_algos.register_adv_est`),
chosen by name with `algorithm.adv_estimator`.

`grpo_positive`: GRPO's group-relative advantage (each verdict minus its group's mean, divided by
the group's standard deviation unless `algorithm.norm_adv_by_std_in_grpo` is false), with the
negative advantages set to 0: an update reinforces a group's passing episodes and leaves its
failures alone (positive-sample reinforcement). The groups, the zero-variance filter, the loss
and its aggregation are GRPO's; only the failures' push-down is gone.

Why (docs/training.md, "What the tiny model taught us"): a tiny model warm-started on golden
trajectories sits at a sharp optimum of those trajectories. A failed episode's tokens after its
first wrong step are mostly noise, and pushing each of them down moves the shared weights in
directions that, on average, cost the golden paths of every task; the passing episodes' signal,
one decision token in a few hundred, is smaller than that damage. Reinforcing only the passes
moves the policy along the warm start's own direction. Measured on the laptop pool at k 8: four
steps with GRPO's advantages (lr 1e-3) lowered pass@1 by 7.8 pt, four `grpo_positive` steps (lr
5e-4) raised it by 6.25 pt, both intervals clear of 0.

Registration happens on import: verl imports this module in every process that imports verl
when `VERL_USE_EXTERNAL_MODULES` names it, or names `trainer.verl.cpu` (the CPU path imports it).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo import core_algos

POSITIVE = "grpo_positive"


def _setting(config: Any, key: str, default: Any) -> Any:
    """`key` of the algorithm config (verl hands a DictConfig or its AlgoConfig dataclass), else `default`."""
    if config is None:
        return default
    if hasattr(config, "get"):
        return config.get(key, default)
    return getattr(config, key, default)


def grpo_positive_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any,
                            config: Any = None, epsilon: float = 1e-6, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (batch, response_length): GRPO's, negatives set to 0 (module docstring)."""
    advantages, _returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards, response_mask=response_mask, index=index, epsilon=epsilon,
        norm_adv_by_std_in_grpo=bool(_setting(config, "norm_adv_by_std_in_grpo", True)), config=config)
    positive = advantages.clamp(min=0.0)
    return positive, positive


def register() -> None:
    """Put `grpo_positive` in verl's table (idempotent)."""
    if core_algos.ADV_ESTIMATOR_REGISTRY.get(POSITIVE) is not grpo_positive_advantage:
        core_algos.register_adv_est(POSITIVE)(grpo_positive_advantage)


register()

__all__ = ["POSITIVE", "grpo_positive_advantage", "register"]
