"""GRPO learns, and the reward is why: a one-choice task played through the real sampler
(trainer/rollout/hf_sample.py), rewarded, turned into advantages by verl's own GRPO estimator (or
our permuted-reward control, trainer/verl/advantage.py), and trained with verl's own PPO loss
(token-mean) and Adam. The task: after a fixed prompt the model writes three tokens; it succeeds when
the first is one of half the vocabulary (the ids of every other rank of the initial distribution:
about half its mass). The exact success probability is read off the model's softmax, no sampling.

Standard GRPO raises it by more than 0.3 in 10 steps at every seed; the control, with each step's
rewards permuted across its episodes, moves it by less than 0.1 either way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PROMPT = [1, 2, 3]


def play(estimator: str, seed: int, *, steps: int = 10, groups: int = 4, n: int = 8, tokens: int = 3,
         lr: float = 1e-2) -> tuple[float, float]:
    """(success probability before, after) `steps` GRPO steps of `groups` groups of `n` episodes."""
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from verl.trainer.ppo import core_algos
    from verl.workers.config.actor import FSDPActorConfig

    from trainer.rollout.hf_sample import sample
    from trainer.verl import advantage  # noqa: F401  (registers grpo_permuted)

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                         max_position_embeddings=64))

    def first_token_probs() -> torch.Tensor:
        with torch.no_grad():
            return torch.softmax(model(input_ids=torch.tensor([PROMPT])).logits[0, -1].float(), -1)

    success = torch.argsort(first_token_probs(), descending=True)[::2]
    chosen = set(success.tolist())
    before = float(first_token_probs()[success].sum())
    estimate = core_algos.get_adv_estimator_fn(estimator)
    actor = FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=1, ppo_micro_batch_size_per_gpu=1, rollout_n=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    index = np.array([f"group{i // n}" for i in range(groups * n)], dtype=object)
    for _ in range(steps):
        model.eval()
        turns = [sample(model, PROMPT, tokens, temperature=1.0, generator=generator) for _ in range(groups * n)]
        ids = torch.tensor([t.ids for t in turns])
        mask = torch.ones(ids.shape)
        rewards = torch.zeros(ids.shape)
        rewards[:, -1] = torch.tensor([float(t.ids[0] in chosen) for t in turns])
        advantages, _ = estimate(token_level_rewards=rewards, response_mask=mask, index=index)
        model.train()
        logits = model(input_ids=torch.cat([torch.tensor([PROMPT] * len(turns)), ids], 1)).logits
        logp = torch.log_softmax(logits[:, len(PROMPT) - 1:-1].float(), -1).gather(-1, ids[..., None])[..., 0]
        loss, _ = core_algos.compute_policy_loss_vanilla(old_log_prob=logp.detach(), log_prob=logp,
                                                         advantages=advantages, response_mask=mask,
                                                         loss_agg_mode="token-mean", config=actor)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return before, float(first_token_probs()[success].sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grpo_raises_the_success_probability_and_the_permuted_control_does_not(seed):
    before, after = play("grpo", seed)
    assert 0.4 < before < 0.6
    assert after - before >= 0.3, (before, after)
    before, after = play("grpo_permuted", seed)
    assert abs(after - before) <= 0.1, (before, after)


def test_the_permuted_rewards_keep_the_step_s_rewards_and_move_them():
    from trainer.verl.advantage import permuted_rewards

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]] * 4, dtype=torch.float32)
    rewards = torch.zeros_like(mask)
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    rewards[torch.arange(16), mask.sum(-1).long() - 1] = scores
    out = permuted_rewards(rewards, mask)
    assert sorted(out.sum(-1).tolist()) == sorted(scores.tolist())  # the same rewards
    assert ((out != 0) <= (mask.cumsum(-1) == mask.sum(-1, keepdim=True))).all()  # each on its row's last token
    assert not torch.equal(out.sum(-1), scores)  # moved
    assert torch.equal(permuted_rewards(rewards, mask), out)  # the same batch: the same permutation
    other = rewards.clone()
    other[0, 2], other[1, 1] = 0.0, 1.0  # another step's rewards
    assert not torch.equal(permuted_rewards(other, mask).sum(-1), out.sum(-1))


def test_the_laptop_trains_the_clusters_algorithm_and_lists_what_differs():
    """configs/laptop_grpo.yaml resolves to the algorithm the cluster configs run (GRPO's own
    advantages, token-mean, no KL, groups of 8), and its header names each scale knob it changes."""
    from trainer.verl.config_read import read_config

    algo = ("algorithm.adv_estimator", "algorithm.use_kl_in_reward", "actor_rollout_ref.actor.use_kl_loss",
            "actor_rollout_ref.actor.loss_agg_mode", "actor_rollout_ref.rollout.n")
    configs = {name: read_config(ROOT / "configs" / f"{name}.yaml", {})
               for name in ("laptop_grpo", "train_single_node", "reference_3x8")}
    laptop = [configs["laptop_grpo"][k] for k in algo]
    assert laptop == ["grpo", False, False, "token-mean", 8]
    for name, cfg in configs.items():
        assert [cfg[k] for k in algo] == laptop, name
    header = (ROOT / "configs" / "laptop_grpo.yaml").read_text(encoding="utf-8").split("\nextends:")[0]
    for knob in ("model", "lr 5e-4", "Adam eps", "steps 4", "lengths", "rollout", "grpo_permuted", "grpo_positive"):
        assert knob in header, knob
    assert float(configs["laptop_grpo"]["actor_rollout_ref.actor.optim.lr"]) != configs["reference_3x8"]["actor_rollout_ref.actor.optim.lr"]


def test_the_learning_bench_plays_grpo_and_its_control_from_one_warm_start(tmp_path, monkeypatch, capsys):
    """bench/learning.py's plan: per seed, GRPO then its control, every run after the seed's first
    starting from its warm start and base evaluation (an earlier bench's too); --control only the
    controls, --no-control only GRPO, --estimator adds grpo_positive rows."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "bench" / "learning.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    played = []

    def fake_run(out, seed, lr, steps, k, control, say, estimator="grpo", start=None, overrides=()):
        rel = out.relative_to(tmp_path).as_posix()
        played.append((rel, control, estimator, start and start.relative_to(tmp_path).as_posix()))
        (out / "warm").mkdir(parents=True, exist_ok=True)
        for f in ("warm/config.json", "base.jsonl", "base.agg.json"):
            (out / f).write_text("{}")
        return {"seed": seed, "lr": lr, "steps": steps, "overrides": list(overrides), "algorithm": estimator, "base": 0.5, "trained": 0.5, "delta": 0.0,
                "delta_interval": [-0.1, 0.1], "distinguishable": False, "reward_per_step": [], "minutes": 0}

    monkeypatch.setattr(bench, "run", fake_run)
    assert bench.main(["--seeds", "0", "1", "--lr", "5e-4", "1e-3", "--out", str(tmp_path), "--json"]) == 0
    s0 = "seed0/lr0.0005/grpo"
    assert played[:4] == [(s0, False, "grpo", None), ("seed0/lr0.0005/control", True, "grpo", s0),
                          ("seed0/lr0.001/grpo", False, "grpo", s0), ("seed0/lr0.001/control", True, "grpo", s0)]
    assert played[4] == ("seed1/lr0.0005/grpo", False, "grpo", None) and played[5][3] == "seed1/lr0.0005/grpo"
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last) == {"grpo", "control"} and [r["seed"] for r in last["control"]] == [0, 0, 1, 1]
    assert set(last["grpo"][0]) == {"seed", "lr", "steps", "overrides", "delta", "delta_interval", "distinguishable"}

    played.clear()
    assert bench.main(["--seeds", "2", "--out", str(tmp_path), "--no-control", "--estimator", "grpo", "grpo_positive"]) == 0
    assert [(p[0].split("/")[-1], p[1], p[2]) for p in played] == [("grpo", False, "grpo"), ("grpo_positive", False, "grpo_positive")]
    played.clear()
    assert bench.main(["--seeds", "2", "--out", str(tmp_path), "--control"]) == 0
    assert [(p[0].split("/")[-1], p[1], p[3]) for p in played] == [("control", True, "seed2/lr0.0005/grpo")]
    played.clear()  # a setting of its own directory, from the seed's one warm start
    assert bench.main(["--seeds", "2", "--out", str(tmp_path), "--no-control", "--steps", "8",
                       "--override", "actor_rollout_ref.actor.optim.betas=[0.9,0.99]"]) == 0
    assert played == [("seed2/lr0.0005-steps8-betas=_0.9_0.99_/grpo", False, "grpo", "seed2/lr0.0005/control")]
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        bench.main(["--seeds", "2", "--out", str(tmp_path), "--override", "betas"])
