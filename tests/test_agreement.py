"""The rollout-actor agreement table by turn and token kind (trainer/verl/agreement.py): the episode
records what each generation follows, the agent loop carries it to verl (tests/test_verl_on_cpu.py
checks it through verl's own post-processing), and the table splits |Δ log p| and the PPO-KL by it.
Patch 0020 logs it from verl's trainer every step: the CPU smokes check the keys
(tests/test_vllm_rollout_on_cpu.py, tests/test_train_qwen3_5_on_cpu.py)."""

from __future__ import annotations

import pytest
import torch
from qwen_tok import tokenizer as tok
from trainer.core import tb_interpret as ti
from trainer.verl.agreement import PREFIX, agreement_table, token_kinds, token_turns

# three rows: model runs (1) between tool / user deltas (0), right padding (0) at the end
MASK = torch.tensor([
    [1, 1, 0, 0, 1, 1, 1, 0, 1, 0],  # first, tool, user
    [1, 1, 1, 0, 1, 0, 0, 0, 0, 0],  # first, user
    [1, 1, 1, 1, 1, 1, 0, 0, 0, 0],  # first only
])
KINDS = ["first,tool,user", "first,user", "first"]


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    rollout = -torch.rand(MASK.shape, generator=g) * 3
    actor = rollout + torch.randn(MASK.shape, generator=g) * 0.01
    return rollout, actor


def test_turns_are_the_runs_of_the_models_ids():
    assert token_turns(MASK).tolist()[0] == [0, 0, -1, -1, 1, 1, 1, -1, 2, -1]
    assert token_turns(MASK).tolist()[2] == [0] * 6 + [-1] * 4
    # run 0 follows the prompt whatever is recorded; a run past the record is unknown
    assert token_kinds(token_turns(MASK[:1]), ["tool"]) == [["first", "unknown", "unknown"]]


def test_the_table_equals_the_hand_computed_groups():
    rollout, actor = batch()
    table = agreement_table(rollout, actor, MASK, KINDS)
    d = actor - rollout
    sel = {
        "first": [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)] + [(2, i) for i in range(6)],
        "tool": [(0, 4), (0, 5), (0, 6)],
        "user": [(0, 8), (1, 4)],
        "turn_0": [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)] + [(2, i) for i in range(6)],
        "turn_1": [(0, 4), (0, 5), (0, 6), (1, 4)],
        "turn_2": [(0, 8)],
    }
    for group, cells in sel.items():
        vals = torch.stack([d[b, t] for b, t in cells])
        assert table[f"{PREFIX}/{group}/tokens"] == len(cells), group
        assert table[f"{PREFIX}/{group}/logp_abs_diff_mean"] == pytest.approx(vals.abs().mean().item(), rel=1e-6)
        assert table[f"{PREFIX}/{group}/logp_abs_diff_max"] == pytest.approx(vals.abs().max().item(), rel=1e-6)
        assert table[f"{PREFIX}/{group}/ppo_kl"] == pytest.approx((-vals).mean().item(), rel=1e-6, abs=1e-9)
        assert table[f"{PREFIX}/{group}/k3_kl"] == pytest.approx((vals.exp() - vals - 1).mean().item(), rel=1e-5)
    assert f"{PREFIX}/turn_3_on/tokens" not in table  # no fourth run: no key, never a 0 or a NaN
    with pytest.raises(ValueError, match="2 rows of turn kinds for a batch of 3"):
        agreement_table(rollout, actor, MASK, KINDS[:2])


def test_the_trajectory_records_what_each_generation_follows():
    t = ti.TokenTrajectory.start(tok(), [{"role": "user", "content": "hi"}], family="hermes")
    t.add_generated([9707, 151645])
    t.add_turns([{"role": "tool", "content": "{}"}])
    t.add_generated([])  # an empty generation starts no run
    t.add_generated([9707])
    t.add_generated([0])  # a continuation of the same run
    t.add_turns([{"role": "tool", "content": "{}"}, {"role": "user", "content": "yes"}])  # the user spoke last
    t.add_generated([9707])
    t.add_turns([])  # an empty turn, re-prompted with nothing added
    t.add_generated([9707])
    assert t.turn_kinds == ["first", "tool", "user", "self"]
    runs = token_turns(torch.tensor([t.response_mask])).max().item() + 1
    assert runs == len(t.turn_kinds)
