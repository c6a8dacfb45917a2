"""scripts/run_train.sh: verl's config composed offline, DRY_RUN, preflight, secrets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trainer.verl.launch import main

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH"))}


def launch(*args: str, **env: str):
    return main(list(args), {**BASE_ENV, "DRY_RUN": "true", **env})


def ray_sessions() -> set[str]:
    d = Path("/tmp/ray")
    return {p.name for p in d.glob("session_2*")} if d.exists() else set()


def test_dry_run_of_the_acceptance_command_prints_the_resolved_command_and_starts_nothing():
    before = ray_sessions()
    r = subprocess.run(["./scripts/run_train.sh", "trainer.total_training_steps=50", "trainer.save_freq=5"], cwd=ROOT,
                       env={**BASE_ENV, "DRY_RUN": "true"}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert "python -m verl.trainer.main_ppo" in lines
    for o in ("algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.loss_agg_mode=token-mean",
              "actor_rollout_ref.rollout.n=8", "trainer.total_training_steps=50", "trainer.save_freq=5"):
        assert o in lines, o
    assert lines.count("trainer.save_freq=5") == 1 and "trainer.save_freq=5" == [x for x in lines if x.startswith("trainer.save_freq")][-1]
    assert "DRY_RUN" in r.stdout and ray_sessions() == before


def test_a_mistyped_override_fails_and_is_named(capsys):
    assert launch("trainer.totl_training_steps=50") == 2
    err = capsys.readouterr().err
    assert "trainer.totl_training_steps" in err


def test_the_legacy_reward_keys_are_refused_with_the_right_name(capsys):
    assert launch("custom_reward_function.path=x.py") == 2
    assert "reward.custom_reward_function.path" in capsys.readouterr().err


def test_a_planted_secret_never_appears(capsys):
    key, pw, tok = "sk-PLANTED-0123456789", "hunter2pw", "qtok987"
    code = launch("+thinkingbox.user=" + f"'openai:http://bob:{pw}@users.internal/v1?token={tok}#qwen'",
                  TBT_USER_API_KEY=key, WANDB_API_KEY="wandb-PLANTED-secret")
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    for secret in (key, pw, tok, "wandb-PLANTED-secret"):
        assert secret not in text
    assert "users.internal" in text  # the endpoint itself is shown


@pytest.mark.parametrize("args,env,rule", [
    ((), {"NODE_GPUS": "4"}, "gpus per node"),
    (("actor_rollout_ref.rollout.tensor_model_parallel_size=3",), {}, "tensor_model_parallel_size divides the world"),
    (("actor_rollout_ref.actor.ulysses_sequence_parallel_size=5",), {}, "ulysses_sequence_parallel_size divides"),
    (("data.train_batch_size=3", "actor_rollout_ref.rollout.n=5"), {}, "train_batch_size x n divides"),
    (("actor_rollout_ref.rollout.log_prob_micro_batch_size=8",), {}, "one rollout log-prob micro-batch size"),
    (("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null",), {}, "one ref log-prob micro-batch size"),
    (("trainer.default_local_dir=checkpoints/run",), {}, "checkpoint dir absolute"),
    (("trainer.nnodes=2",), {"CKPT_DIR": "/tmp/ck"}, "checkpoint dir absolute and shared"),
    (("+thinkingbox.judge='openai:http://judge:8000/v1#qwen'",), {}, "judge endpoint variables"),
])
def test_each_preflight_rule_rejects_a_bad_topology(capsys, args, env, rule):
    assert launch(*args, **env) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("FAIL") and rule in line for line in out.splitlines()), out


def test_the_reference_config_composes_and_needs_its_variables(capsys):
    assert launch(CONFIG="configs/reference_3x8.yaml") == 2
    assert "MODEL_PATH" in capsys.readouterr().err
    env = {"CONFIG": "configs/reference_3x8.yaml", "MODEL_PATH": "/models/q", "CKPT_DIR": "/shared/ckpt",
           "TBT_USER_SPEC": "scripted", "TBT_JUDGE_SPEC": "synthetic", "NODE_GPUS": "8"}
    assert launch(**env) == 0
    out = capsys.readouterr().out
    assert "trainer.nnodes=3" in out and "data.train_batch_size=18" in out


def test_one_sampling_config_for_training_and_evaluation(capsys):
    import yaml

    sampling = yaml.safe_load((ROOT / "configs" / "sampling.yaml").read_text())
    assert launch() == 0
    out = capsys.readouterr().out
    for k in ("temperature", "top_k", "top_p"):
        assert f"actor_rollout_ref.rollout.{k}={sampling[k]}" in out
