"""Advantage estimators of ours, registered with verl's own table (`core_algos.register_adv_est`),
chosen by name with `algorithm.adv_estimator`.

`grpo_positive`: GRPO's group-relative advantage (each verdict minus its group's mean, divided by
the group's standard deviation unless `algorithm.norm_adv_by_std_in_grpo` is false), with the
negative advantages set to 0: an update reinforces a group's passing episodes and leaves its
failures alone (positive-sample reinforcement). The groups, the zero-variance filter, the loss
and its aggregation are GRPO's; only the failures' push-down is gone.

Why (docs/training-laptop.md, "What the tiny model taught us"): a tiny model warm-started on golden
trajectories sits at a sharp optimum of those trajectories. A failed episode's tokens after its
first wrong step are mostly noise, and pushing each of them down moves the shared weights in
directions that, on average, cost the golden paths of every task; the passing episodes' signal,
one decision token in a few hundred, is smaller than that damage. Reinforcing only the passes
moves the policy along the warm start's own direction. Measured on the laptop pool at k 8: four
steps with GRPO's advantages (lr 1e-3) lowered pass@1 by 7.8 pt, four `grpo_positive` steps (lr
5e-4) raised it by 6.25 pt (by the old bootstrap both clear of 0; the sign-flip verdict `tbt
compare` gives now does not tell the +6.25 from no change). An option, not the default: the laptop
loop runs GRPO's own advantages, as the cluster does.

`grpo_permuted`: the control of a learning run. Each step's outcome rewards are permuted across
that step's episodes (a permutation drawn from the step's own rewards and response lengths, so a
rerun of the same seeds draws the same one), then GRPO's advantages are computed from them. The
reward's distribution is kept, groups stay mixed as often, the update has the same size; only the
link between what an episode did and what it earned is broken. A rise that GRPO shows and this
control does not comes from the reward (`tbt quickstart --train --control`, bench/learning.py).

Registration happens on import: verl imports this module in every process that imports verl
when `VERL_USE_EXTERNAL_MODULES` names it, or names `trainer.verl.cpu` (the CPU path imports it).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo import core_algos

POSITIVE = "grpo_positive"
CONTROL = "grpo_permuted"


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


def permuted_rewards(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """The outcome rewards (each row's sum) permuted across the rows, each put on its row's last
    response token. The permutation's seed is a hash of the rows' rewards and response lengths in
    batch order: the same batch draws the same permutation, every step a different one."""
    import hashlib

    scores = token_level_rewards.sum(dim=-1)
    lengths = response_mask.sum(dim=-1).long()
    key = hashlib.sha256(repr((scores.tolist(), lengths.tolist())).encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(key[:8], "little") % 2**63)
    perm = torch.randperm(scores.numel(), generator=generator).to(scores.device)
    last = (lengths - 1).clamp(min=0)
    out = torch.zeros_like(token_level_rewards)
    out[torch.arange(scores.numel(), device=scores.device), last] = scores[perm].to(out.dtype)
    return out


def grpo_permuted_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any,
                            config: Any = None, epsilon: float = 1e-6, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns): GRPO's, from the step's rewards permuted across its episodes (module docstring)."""
    return core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=permuted_rewards(token_level_rewards, response_mask), response_mask=response_mask,
        index=index, epsilon=epsilon, norm_adv_by_std_in_grpo=bool(_setting(config, "norm_adv_by_std_in_grpo", True)),
        config=config)


def register() -> None:
    """Put `grpo_positive` and `grpo_permuted` in verl's table (idempotent)."""
    for name, fn in ((POSITIVE, grpo_positive_advantage), (CONTROL, grpo_permuted_advantage)):
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)


register()

__all__ = ["CONTROL", "POSITIVE", "grpo_permuted_advantage", "grpo_positive_advantage", "permuted_rewards",
           "register"]
