"""trainer/verl/advantage.py: `grpo_positive` in verl's own advantage table, as verl's trainer calls it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.ppo import core_algos

from trainer.verl import advantage


def batch(rewards: list[float], uids: list[str], length: int = 4):
    """Outcome rewards on each response's last token, as verl's reward manager lays them."""
    scores = torch.zeros(len(rewards), length)
    scores[:, -1] = torch.tensor(rewards)
    mask = torch.ones(len(rewards), length)
    mask[0, 0] = 0  # a masked token stays 0
    return scores, mask, np.array(uids, dtype=object)


@pytest.mark.parametrize("by_std", [True, False])
def test_grpo_positive_is_grpo_with_the_negative_advantages_zeroed(by_std):
    rewards, mask, index = batch([1, 0, 0, 1, 1, 1, 1, 0, 0, 0], ["a"] * 4 + ["b"] * 3 + ["c"] * 3)
    config = OmegaConf.create({"adv_estimator": advantage.POSITIVE, "norm_adv_by_std_in_grpo": by_std})
    fn = core_algos.get_adv_estimator_fn(config.adv_estimator)  # verl's lookup, as ray_trainer.compute_advantage does
    adv, returns = fn(token_level_rewards=rewards, response_mask=mask, config=config, index=index)
    grpo, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=by_std)
    assert torch.equal(adv, returns)
    assert torch.equal(adv, torch.where(grpo > 0, grpo, torch.zeros_like(grpo)))
    assert (adv[0, 1:] > 0).all() and (adv[3] > 0).all() and (adv[[1, 2]] == 0).all()  # group a: passes reinforced, failures left alone
    assert (adv[4:] == 0).all()  # groups b (all passed) and c (all failed): zero variance, nothing
    assert adv[0, 0] == 0  # the response mask holds
    if by_std:  # (1 - 0.5) / std([1, 0, 0, 1]) on every unmasked token of a pass
        assert adv[3] == pytest.approx(torch.full((4,), 0.5 / float(torch.tensor([1.0, 0, 0, 1]).std())), rel=1e-5)  # GRPO adds 1e-6 to the std
    else:
        assert adv[3] == pytest.approx(torch.full((4,), 0.5))


def test_registering_again_is_harmless_and_a_dataclass_config_is_read():
    advantage.register()
    assert core_algos.get_adv_estimator_fn("grpo_positive") is advantage.grpo_positive_advantage
    from verl.trainer.config import AlgoConfig

    rewards, mask, index = batch([1, 0], ["a", "a"])
    adv, _ = advantage.grpo_positive_advantage(rewards, mask, index, config=AlgoConfig(norm_adv_by_std_in_grpo=False))
    assert adv[1].abs().sum() == 0 and adv[0, 1:].tolist() == pytest.approx([0.5, 0.5, 0.5])


def test_the_cpu_path_registers_it():
    """configs/laptop_grpo.yaml trains with it through VERL_USE_EXTERNAL_MODULES=trainer.verl.cpu."""
    import trainer.verl.cpu  # noqa: F401

    core_algos.ADV_ESTIMATOR_REGISTRY.pop(advantage.POSITIVE, None)
    trainer.verl.cpu.register()
    assert core_algos.get_adv_estimator_fn(advantage.POSITIVE) is advantage.grpo_positive_advantage
