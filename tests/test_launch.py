"""scripts/run_train.sh: verl's config composed offline, DRY_RUN, preflight, secrets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trainer.verl.launch import main

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                                 "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR"))}
USER = "openai:http://127.0.0.1:8001/v1#Qwen/Qwen3-8B"
JUDGE = "openai:http://127.0.0.1:8002/v1#Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, str]:
    """A launchable environment: the pool's files exist, user and judge are models (keys set)."""
    d = tmp_path_factory.mktemp("pool")
    for name in ("train.parquet", "test.parquet"):
        (d / name).write_bytes(b"PAR1")
    return {"TRAIN_FILE": str(d / "train.parquet"), "VAL_FILE": str(d / "test.parquet"), "TBT_USER_SPEC": USER,
            "TBT_JUDGE_SPEC": JUDGE, "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY"}


@pytest.fixture
def launch(pool):
    def run(*args: str, **env: str):
        return main(list(args), {**BASE_ENV, **pool, "DRY_RUN": "true", **env})
    return run


def fails(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def ray_sessions() -> set[str]:
    d = Path("/tmp/ray")
    return {p.name for p in d.glob("session_2*")} if d.exists() else set()


def test_dry_run_of_the_acceptance_command_prints_the_resolved_command_and_starts_nothing(pool):
    before = ray_sessions()
    r = subprocess.run(["./scripts/run_train.sh", "trainer.total_training_steps=50", "trainer.save_freq=5"], cwd=ROOT,
                       env={**BASE_ENV, **pool, "DRY_RUN": "true"}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert "python -m verl.trainer.main_ppo" in lines
    for o in ("algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.loss_agg_mode=token-mean",
              "actor_rollout_ref.rollout.n=8", "trainer.total_training_steps=50", "trainer.save_freq=5"):
        assert o in lines, o
    assert lines.count("trainer.save_freq=5") == 1 and "trainer.save_freq=5" == [x for x in lines if x.startswith("trainer.save_freq")][-1]
    assert "DRY_RUN" in r.stdout and ray_sessions() == before


def test_a_mistyped_override_fails_and_is_named(capsys, launch):
    assert launch("trainer.totl_training_steps=50") == 2
    err = capsys.readouterr().err
    assert "trainer.totl_training_steps" in err


def test_the_legacy_reward_keys_are_refused_with_the_right_name(capsys, launch):
    assert launch("custom_reward_function.path=x.py") == 2
    assert "reward.custom_reward_function.path" in capsys.readouterr().err


def test_a_planted_secret_never_appears(capsys, launch):
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
    (("trainer.nnodes=2",), {"CKPT_DIR": "/shared/ck", "TRAIN_FILE": "configs/sampling.yaml"},
     "data and model paths absolute on several nodes"),
    (("actor_rollout_ref.rollout.tensor_model_parallel_size=3",), {}, "tensor_model_parallel_size divides the world"),
    (("actor_rollout_ref.actor.ulysses_sequence_parallel_size=5",), {}, "ulysses_sequence_parallel_size divides"),
    (("data.train_batch_size=3", "actor_rollout_ref.rollout.n=5"), {}, "train_batch_size x n divides"),
    (("actor_rollout_ref.rollout.log_prob_micro_batch_size=8",), {}, "one rollout log-prob micro-batch size"),
    (("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null",), {}, "one ref log-prob micro-batch size"),
    (("trainer.default_local_dir=checkpoints/run",), {}, "checkpoint dir absolute"),
    (("trainer.nnodes=2",), {"CKPT_DIR": "/tmp/ck"}, "checkpoint dir absolute and shared"),
    # verl's default logprobs_mode at sampling.yaml's top_k 20 / top_p 0.95; raw at another temperature
    (("actor_rollout_ref.rollout.logprobs_mode=processed_logprobs",), {}, "rollout log-probs are the actor's"),
    (("actor_rollout_ref.rollout.temperature=0.7",), {}, "rollout log-probs are the actor's"),
    (("actor_rollout_ref.rollout.logprobs_mode=raw_logits",), {}, "rollout log-probs are the actor's"),
])
def test_each_config_rule_rejects_a_bad_topology_even_in_a_dry_run(capsys, launch, args, env, rule):
    """A config check that fails is a config that can never run: FAIL, exit 1, under DRY_RUN=true too."""
    assert launch(*args, **env) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("FAIL") and rule in line for line in out.splitlines()), out


@pytest.mark.parametrize("args,env,rule", [
    ((), {"TRAIN_FILE": "/nonexistent/train.parquet"}, "file exists: data.train_files"),
    ((), {"MODEL_PATH": "/nonexistent/model"}, "file exists: actor_rollout_ref.model.path"),
    (("actor_rollout_ref.rollout.agent.agent_loop_config_path=configs/no_such_loop.yaml",), {},
     "file exists: actor_rollout_ref.rollout.agent.agent_loop_config_path"),
    ((), {"TBT_JUDGE_SPEC": "synthetic"}, "no synthetic judge outside a smoke config"),
    (("+thinkingbox.user=scripted",), {}, "no scripted user outside a smoke config"),
    (("+thinkingbox.judge='openai:http://judge:8000/v1#qwen'",), {"TBT_JUDGE_API_KEY": ""}, "judge endpoint variables"),
])
def test_each_input_of_the_launch_site_is_needed_by_a_dry_run_and_refused_by_a_strict_one(capsys, launch, args, env, rule):
    """An input the launch site provides (a file, a user / judge model, a key): DRY_RUN=true names
    it on a `need` line and exits 0; DRY_RUN=strict (and so a real launch) refuses it, FAIL, exit 1."""
    assert launch(*args, **env) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("need  " + rule) for line in out), out
    assert not any(line.startswith("FAIL") for line in out), out
    (last,) = [line for line in out if line.startswith("# a launch here would stop until: ")]
    assert rule in last and last == out[-1]
    assert launch(*args, **{**env, "DRY_RUN": "strict"}) == 1
    out = capsys.readouterr()
    assert any(line.startswith("FAIL  " + rule) for line in out.out.splitlines()), out.out
    assert not any(line.startswith("need") for line in out.out.splitlines())
    assert "error: preflight failed, 1 problem(s)" in out.err and "DRY_RUN: nothing started" not in out.out


def test_the_bare_async_dry_run_on_a_fresh_clone_exits_0_and_names_what_a_launch_needs(tmp_path):
    """The acceptance command, with no variable set and no pool prepared: the async entrypoint and
    the GPU split, the pool files and the user / judge models as `need` lines, exit 0; strict: exit 1."""
    cmd = "DRY_RUN=true CONFIG=configs/async_single_node.yaml scripts/run_train.sh"
    env = {k: v for k, v in BASE_ENV.items() if k not in ("DRY_RUN", "MODEL_FAMILY", "EXPERIMENT", "RAY_ADDRESS")}
    pool = ROOT / "quickstart" / "prepared"
    if (pool / "train.parquet").exists() or (pool / "test.parquet").exists():
        # README's start (`tbt quickstart`) made the pool: the same launch over a pool not made yet
        env |= {"TRAIN_FILE": str(tmp_path / "train.parquet"), "VAL_FILE": str(tmp_path / "test.parquet")}
    r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert "python -m verl.experimental.fully_async_policy.fully_async_main" in lines
    assert any(x.startswith("# GPUs (split): rollout 1x4=4 GPUs") for x in lines)
    needs = [x for x in lines if x.startswith("need")]
    for rule in ("file exists: data.train_files", "file exists: data.val_files", "no scripted user outside a smoke config",
                 "no synthetic judge outside a smoke config"):
        assert any(x.startswith("need  " + rule) for x in needs), rule
        assert rule in lines[-1]
    assert len(needs) == 4 and not fails(r.stdout) and "# DRY_RUN: nothing started" in lines[-2]
    r = subprocess.run(["bash", "-c", cmd.replace("DRY_RUN=true", "DRY_RUN=strict")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    assert len(fails(r.stdout)) == 4 and "error: preflight failed, 4 problem(s)" in r.stderr
    assert "DRY_RUN: nothing started" not in r.stdout


def test_a_dry_run_value_other_than_true_strict_or_false_is_refused(capsys, launch):
    assert launch(DRY_RUN="maybe") == 2
    out = capsys.readouterr()
    assert "error: DRY_RUN=maybe: expected true, strict or false" in out.err and out.out == ""


def test_the_reference_config_names_every_problem_in_one_run(capsys, tmp_path):
    """No variables: the four it needs are named on one line, and the relative default data paths
    of a 3-node run are refused, all in the same run (strict: the inputs fail too; true: only the
    relative paths, a config check, fail, and the inputs are needed); set, it composes."""
    env = {**BASE_ENV, "CONFIG": "configs/reference_3x8.yaml", "NODE_GPUS": "8"}
    assert main([], {**env, "DRY_RUN": "true"}) == 1
    out = capsys.readouterr()
    (bad,) = fails(out.out)
    assert bad.startswith("FAIL  data and model paths absolute on several nodes")
    assert any(line.startswith("need  variables set") for line in out.out.splitlines())
    assert "1 problem(s)" in out.err and "a launch here would also need: variables not set: MODEL_PATH" in out.err
    assert main([], {**env, "DRY_RUN": "strict"}) == 1
    out = capsys.readouterr()
    (variables,) = [line for line in fails(out.out) if "variables set" in line]
    for name in ("MODEL_PATH", "CKPT_DIR", "TBT_USER_SPEC", "TBT_JUDGE_SPEC"):
        assert name in variables and name in out.err
    assert "actor_rollout_ref.model.path" in variables and "trainer.default_local_dir" in variables
    assert any("data and model paths absolute on several nodes" in line and "quickstart/prepared/train.parquet" in line
               for line in fails(out.out))
    # the default pool is absent on a fresh clone; README's first command (`tbt quickstart`) makes it
    pool = [ROOT / "quickstart" / "prepared" / name for name in ("train.parquet", "test.parquet")]
    absent = sum(not f.exists() for f in pool)
    assert sum("file exists: data." in line for line in fails(out.out)) == absent
    assert f"{2 + absent} problem(s)" in out.err
    assert "variables not set: MODEL_PATH, CKPT_DIR, TBT_USER_SPEC, TBT_JUDGE_SPEC" in out.err
    (tmp_path / "model").mkdir()
    env = {"CONFIG": "configs/reference_3x8.yaml", "MODEL_PATH": str(tmp_path / "model"), "CKPT_DIR": "/shared/ckpt",
           "NODE_GPUS": "8"}
    assert launch_env(env) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "trainer.nnodes=3" in out and "data.train_batch_size=18" in out and not fails(out)


def test_a_command_line_override_makes_its_variable_unneeded(capsys, pool):
    env = {**BASE_ENV, **pool, "DRY_RUN": "true", "CONFIG": "configs/reference_3x8.yaml", "NODE_GPUS": "8",
           "MODEL_PATH": str(ROOT / "configs")}
    assert main(["trainer.default_local_dir=/shared/ck"], env) == 0, capsys.readouterr()
    assert "CKPT_DIR" not in capsys.readouterr().out


def test_a_smoke_config_may_use_the_synthetic_judge_and_scripted_user_and_its_key_stays_ours(capsys, tmp_path, pool):
    """`smoke: true` (configs/cpu_smoke.yaml's) lets the stand-ins through, is inherited by a config
    that extends it, and never reaches verl; anything but a boolean is refused, naming the file."""
    child = tmp_path / "my_smoke.yaml"
    child.write_text(f"extends: {ROOT / 'configs' / 'cpu_smoke.yaml'}\ntrainer.total_training_steps: 1\n")
    env = {**BASE_ENV, "DRY_RUN": "true", "CONFIG": str(child), "SMOKE_DIR": str(tmp_path / "smoke")}
    assert main([], env) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "ok    no synthetic judge outside a smoke config" in out and "ok    no scripted user outside a smoke config" in out
    assert not any(x.strip().lstrip("+").startswith("smoke") for x in out.splitlines())  # not an override for verl
    assert f"skip  file exists: data.train_files: {tmp_path / 'smoke'}/quickstart" in out  # made by prepare:
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: " + str(ROOT / "configs" / "train_single_node.yaml") + "\nsmoke: yes please\n")
    assert main([], {**env, "CONFIG": str(bad)}) == 2
    assert f"{bad}: smoke: expected true or false" in capsys.readouterr().err
    plain = tmp_path / "plain.yaml"
    plain.write_text("extends: " + str(ROOT / "configs" / "cpu_smoke.yaml") + "\nsmoke: false\n")
    assert main([], {**env, "CONFIG": str(plain)}) == 0  # the stand-ins: inputs a launch here still needs
    assert len([x for x in capsys.readouterr().out.splitlines() if x.startswith("need") and "outside a smoke config" in x]) == 2
    assert main([], {**env, "CONFIG": str(plain), "DRY_RUN": "strict"}) == 1
    assert len([x for x in fails(capsys.readouterr().out) if "outside a smoke config" in x]) == 2


@pytest.mark.parametrize("script", ["run_train.sh", "start_ray.sh"])
def test_scripts_print_their_help(script):
    for flag in ("--help", "-h"):
        r = subprocess.run([f"./scripts/{script}", flag], cwd=ROOT, env=BASE_ENV, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith(("Launch GRPO training", "Start this node's Ray")) and "DRY_RUN=true" in r.stdout


def test_the_help_example_runs_as_shown(pool):
    """run_train.sh --help's second example (after tbt quickstart: here the pool's files stand in)."""
    help_text = subprocess.run(["./scripts/run_train.sh", "--help"], cwd=ROOT, capture_output=True, text=True).stdout
    for k in ("TBT_USER_SPEC", "TBT_JUDGE_SPEC"):
        assert f"{k}='{pool[k]}'" in help_text
    r = subprocess.run(["./scripts/run_train.sh", "trainer.total_training_steps=50", "trainer.save_freq=5"], cwd=ROOT,
                       env={**BASE_ENV, **pool, "DRY_RUN": "true"}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def launch_env(env: dict[str, str]) -> int:
    return main([], {**BASE_ENV, "DRY_RUN": "true", "TBT_USER_SPEC": USER, "TBT_JUDGE_SPEC": JUDGE,
                     "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY",
                     "TRAIN_FILE": str(ROOT / "configs" / "sampling.yaml"), "VAL_FILE": str(ROOT / "configs" / "sampling.yaml"),
                     **env})


def test_one_sampling_config_for_training_and_evaluation(capsys, launch):
    import yaml

    sampling = yaml.safe_load((ROOT / "configs" / "sampling.yaml").read_text())
    assert launch() == 0
    out = capsys.readouterr().out
    for k in ("temperature", "top_k", "top_p"):
        assert f"actor_rollout_ref.rollout.{k}={sampling[k]}" in out


@pytest.mark.parametrize("args", [(), ("actor_rollout_ref.rollout.logprobs_mode=processed_logprobs",
                                     "actor_rollout_ref.rollout.top_k=-1", "actor_rollout_ref.rollout.top_p=1.0")])
def test_rollout_log_probs_as_the_actors_pass_the_preflight(capsys, launch, args):
    """raw_logprobs at temperature 1.0 (the configs'), or processed_logprobs with nothing cut."""
    assert launch(*args) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("ok") and "rollout log-probs are the actor's" in line for line in out.splitlines()), out


def test_a_config_names_its_own_sampling_file_and_the_laptop_config_uses_it(capsys, tmp_path):
    """`sampling: FILE` replaces configs/sampling.yaml in the launch (inherited through extends:),
    so configs/laptop_grpo.yaml trains with the 256-token turns `tbt run --sampling
    configs/sampling_laptop.yaml` plays; a config without it keeps the shared file; a bad value is
    named with its file."""
    import yaml

    warm = tmp_path / "laptop" / "warm"
    warm.mkdir(parents=True)
    env = {**BASE_ENV, "DRY_RUN": "true", "LAPTOP_DIR": str(tmp_path / "laptop"), "SMOKE_DIR": str(tmp_path / "smoke"),
           "CKPT_DIR": str(tmp_path / "ckpt")}
    assert main([], {**env, "CONFIG": str(ROOT / "configs" / "laptop_grpo.yaml")}) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    laptop = yaml.safe_load((ROOT / "configs" / "sampling_laptop.yaml").read_text())
    assert laptop["max_turn_tokens"] == 256 and out.rstrip().count("+thinkingbox.max_turn_tokens=256") == 1
    assert "actor_rollout_ref.model.path=" + str(warm) in out and "agent_loop_config_path=configs/agent_loop.yaml" in out
    assert f"data/prepare_data.py --probes {tmp_path / 'laptop'}/probes.jsonl" in out  # the pool: its mixed tasks
    assert not any(line.strip().lstrip("+").startswith("sampling") for line in out.splitlines())  # not for verl
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {ROOT / 'configs' / 'laptop_grpo.yaml'}\ntrainer.total_training_steps: 1\n")
    assert main([], {**env, "CONFIG": str(child)}) == 0 and "+thinkingbox.max_turn_tokens=256" in capsys.readouterr().out
    assert main([], {**env, "CONFIG": str(ROOT / "configs" / "cpu_smoke.yaml")}) == 0
    assert "+thinkingbox.max_turn_tokens=8192" in capsys.readouterr().out
    for value, said in [("[1, 2]", "sampling: expected the path of a sampling file"), (str(tmp_path / "none.yaml"), "none.yaml")]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"extends: {ROOT / 'configs' / 'cpu_smoke.yaml'}\nsampling: {value}\n")
        assert main([], {**env, "CONFIG": str(bad)}) == 2
        assert said in capsys.readouterr().err


def test_a_config_adds_to_the_prepare_steps_it_extends_unless_it_drops_them(tmp_path):
    """`prepare:` steps add to those of the config extended (configs/cpu_smoke_async.yaml: the
    smoke's model and pool, then its own); `inherit_prepare: false` runs only the config's own
    (configs/laptop_grpo.yaml never builds the smoke's random model or probes its pool); a value
    other than true or false is named with its file."""
    from trainer.verl.config_read import PREPARE, LaunchError, read_config

    env = {"SMOKE_DIR": str(tmp_path / "smoke"), "CKPT_DIR": str(tmp_path / "ckpt"), "LAPTOP_DIR": str(tmp_path / "lap")}
    smoke = [["-m", "trainer.verl.cpu.smoke", str(tmp_path / "smoke"), str(tmp_path / "ckpt")]]
    assert read_config(ROOT / "configs" / "cpu_smoke.yaml", env)[PREPARE] == smoke
    async_steps = read_config(ROOT / "configs" / "cpu_smoke_async.yaml", env)[PREPARE]
    assert async_steps[0] == smoke[0] and len(async_steps) == 2
    laptop = read_config(ROOT / "configs" / "laptop_grpo.yaml", env)[PREPARE]
    assert [c[0] for c in laptop] == ["data/prepare_data.py"] and f"{tmp_path / 'lap'}/probes.jsonl" in laptop[0]
    bare = tmp_path / "bare.yaml"
    bare.write_text(f"extends: {ROOT / 'configs' / 'cpu_smoke.yaml'}\ninherit_prepare: false\n")
    assert PREPARE not in read_config(bare, env)
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {ROOT / 'configs' / 'cpu_smoke.yaml'}\ninherit_prepare: no-thanks\n")
    with pytest.raises(LaunchError, match=r"bad\.yaml: inherit_prepare: expected true or false"):
        read_config(bad, env)


def test_skip_prepare_leaves_the_steps_to_the_caller_and_still_checks_what_they_make(capsys, tmp_path):
    """`SKIP_PREPARE=true` (`tbt quickstart --train` ran the pool's step to count it): the step is
    printed as skipped and not run, what it makes is still checked; without it the step runs (here
    it fails: no probes); a value other than true or false is named."""
    (tmp_path / "laptop" / "warm").mkdir(parents=True)
    env = {**BASE_ENV, "LAPTOP_DIR": str(tmp_path / "laptop"), "CKPT_DIR": str(tmp_path / "ckpt"),
           "CONFIG": str(ROOT / "configs" / "laptop_grpo.yaml")}
    assert main([], {**env, "SKIP_PREPARE": "true"}) == 1
    out = capsys.readouterr()
    assert "(skipped: SKIP_PREPARE, run by the caller)" in out.out and "prepare step failed" not in out.err
    assert "error: the prepare: step did not make file exists: data.train_files" in out.err
    assert f"{tmp_path / 'laptop'}/pool/train.parquet" in out.out
    assert main([], env) != 0
    out = capsys.readouterr()
    assert "error: prepare step failed" in out.err and "skipped" not in out.out
    assert main([], {**env, "SKIP_PREPARE": "maybe"}) == 2
    assert "SKIP_PREPARE=maybe: expected true or false" in capsys.readouterr().err


def test_an_automatic_resume_is_checked_against_the_checkpoint_it_would_load(capsys, launch, tmp_path):
    """`trainer.resume_mode=auto` (verl's default) with a tracker in the checkpoint directory: the
    step it names is verified as `tbt checkpoint verify` does (a real two-rank checkpoint,
    tests/fixtures/checkpoints/tiny) and must be of this run's world size; a missing shard or
    another world size is named (need under DRY_RUN=true, FAIL under strict); no tracker, or
    resume_mode=disable, starts afresh."""
    import shutil

    ckpt = shutil.copytree(ROOT / "tests" / "fixtures" / "checkpoints" / "tiny", tmp_path / "ckpt")
    env = {"CKPT_DIR": str(ckpt), "GPUS_PER_NODE": "2", "NODE_GPUS": "2"}
    rule = "resume checkpoint verified (trainer.resume_mode=auto)"

    def lines(*args: str, **more: str) -> tuple[int, list[str]]:
        code = launch(*args, **{**env, **more})
        out = capsys.readouterr()
        if code:
            assert f"resume checkpoint {ckpt}/global_step_2 not resumable" in out.err, out.err
        return code, [x for x in out.out.splitlines() if rule in x]

    assert lines() == (0, [f"ok    {rule}: {ckpt}/global_step_2: complete, world size 2, as this run's"])
    assert lines("trainer.resume_mode=disable") == (0, [])
    code, (line,) = lines(GPUS_PER_NODE="4", NODE_GPUS="4")  # saved on 2 ranks, resumed on 4
    assert code == 0 and line.startswith(f"need  {rule}: {ckpt}/global_step_2: ") and "shards of world size 2, this run has 4" in line
    (ckpt / "global_step_2" / "actor" / "model_world_size_2_rank_1.pt").unlink()
    code, (line,) = lines()
    assert code == 0 and line.startswith("need") and "global_step_2/actor/model_world_size_2_rank_1.pt: missing (rank 1 of 2)" in line
    assert f"trainer.resume_from_path={ckpt}/global_step_1 resumes from the newest complete step" in line
    assert lines(DRY_RUN="strict") == (1, [line.replace("need", "FAIL", 1)])
    (ckpt / "latest_checkpointed_iteration.txt").write_text("7")
    code, (line,) = lines()
    assert code == 0 and "global_step_7: missing (have: 1, 2)" in line
    (ckpt / "latest_checkpointed_iteration.txt").unlink()
    assert lines() == (0, [f"ok    {rule}: no {ckpt}/latest_checkpointed_iteration.txt: the run starts at step 0"])


def test_a_partial_save_newer_than_the_tracker_is_said_and_its_steps_are_trained_again(capsys, launch, tmp_path):
    """A save killed before verl wrote the tracker leaves a newer, incomplete global_step_N: verl
    resumes from the tracker's step and trains the steps after it again, which the ok line says."""
    import shutil

    ckpt = shutil.copytree(ROOT / "tests" / "fixtures" / "checkpoints" / "tiny", tmp_path / "ckpt")
    shutil.copytree(ckpt / "global_step_2", ckpt / "global_step_3")
    (ckpt / "global_step_3" / "actor" / "optim_world_size_2_rank_1.pt").unlink()  # the kill, mid-save
    assert launch(CKPT_DIR=str(ckpt), GPUS_PER_NODE="2", NODE_GPUS="2") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "resume checkpoint verified" in x)
    assert line.startswith("ok    ") and f"{ckpt}/global_step_2: complete, world size 2" in line
    assert "global_step_3 is newer than the tracker's 2" in line and "(its steps after 2 are trained again)" in line


# configs/reference_3x8.yaml: the published run's profile, as verl 0.9.0 names each value
REFERENCE_PROFILE = {
    "trainer.nnodes": "3", "trainer.n_gpus_per_node": "8", "data.train_batch_size": "18", "actor_rollout_ref.rollout.n": "8",
    "data.seed": "42", "data.shuffle": "true",
    "actor_rollout_ref.model.use_remove_padding": "true", "actor_rollout_ref.model.enable_gradient_checkpointing": "true",
    "actor_rollout_ref.model.use_fused_kernels": "true",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": "4", "actor_rollout_ref.ref.ulysses_sequence_parallel_size": "4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "4",
    "actor_rollout_ref.rollout.temperature": "1.0", "actor_rollout_ref.rollout.top_k": "20",
    "actor_rollout_ref.rollout.top_p": "0.95",
    "actor_rollout_ref.actor.optim.lr": "1e-06", "actor_rollout_ref.actor.optim.weight_decay": "0.01",
    "actor_rollout_ref.rollout.max_num_batched_tokens": "32768", "trainer.max_actor_ckpt_to_keep": "2",
    "trainer.logger": "[console,wandb]",
    "actor_rollout_ref.actor.fsdp_config.param_offload": "true", "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "true",
    "actor_rollout_ref.ref.fsdp_config.param_offload": "true",
    "algorithm.use_kl_in_reward": "false", "actor_rollout_ref.actor.use_kl_loss": "false",
    "trainer.use_v1": "true", "trainer.v1.sampler.sync_refill_failed_groups": "true",
    "trainer.test_freq": "-1", "trainer.val_before_train": "false",
    "data.max_prompt_length": "26624", "data.max_response_length": "106496",
    "actor_rollout_ref.rollout.prompt_length": "26624", "actor_rollout_ref.rollout.response_length": "106496",
    "actor_rollout_ref.rollout.max_model_len": "133120",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "0.7", "actor_rollout_ref.rollout.agent.num_workers": "6",
    "trainer.total_training_steps": "50", "trainer.save_freq": "5", "trainer.resume_mode": "auto",
    "+thinkingbox.family": "xml", "+data.thinkingbox.family": "xml",
}


def dry_run_overrides(env: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """scripts/run_train.sh's dry run in `env` (CONFIG and the rest): (every override printed, by
    key; the preflight's lines)."""
    r = subprocess.run(["bash", "-c", "DRY_RUN=true scripts/run_train.sh"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    printed: dict[str, list[str]] = {}
    for x in lines[lines.index("python -m verl.trainer.main_ppo") + 1:lines.index("# preflight")]:
        key, _, value = x.partition("=")
        printed.setdefault(key, []).append(value)
    return printed, lines[lines.index("# preflight"):]



def test_the_reference_config_is_the_published_profile(pool, tmp_path):
    """The acceptance command (`DRY_RUN=true CONFIG=configs/reference_3x8.yaml scripts/run_train.sh`
    with the launch site's variables) prints every value of the profile, once each; the composed
    verl config holds them and passes the launch's topology checks (world 24 over sequence
    parallel 4: 6 data-parallel groups of 144 / 6 episodes; tensor parallel 4 in a node's 8 GPUs);
    its sampling is configs/sampling.yaml's, whose values are the profile's; the fully-async
    variant extending it still composes."""
    import yaml
    from omegaconf import OmegaConf

    from trainer.verl.launch import plan

    (tmp_path / "model").mkdir()
    env = {**{k: v for k, v in BASE_ENV.items() if k not in ("DRY_RUN", "MODEL_FAMILY", "EXPERIMENT")}, **pool,
           "CONFIG": "configs/reference_3x8.yaml", "MODEL_PATH": str(tmp_path / "model"), "CKPT_DIR": "/shared/ckpt",
           "NODE_GPUS": "8"}
    printed, lines = dry_run_overrides(env)  # lines: the preflight's and after
    for key, value in REFERENCE_PROFILE.items():
        assert printed.get(key) == [value], (key, printed.get(key))
    assert not fails("\n".join(lines)) and not any(x.startswith("need") for x in lines), lines
    for rule in ("ulysses_sequence_parallel_size divides the world: actor_rollout_ref.actor.ulysses_sequence_parallel_size=4, world 3x8=24",
                 "tensor_model_parallel_size divides the world: actor_rollout_ref.rollout.tensor_model_parallel_size=4, world 3x8=24",
                 "train_batch_size x n divides across ranks: data.train_batch_size=18 x rollout.n=8 = 144 over 24 ranks",
                 "resume checkpoint verified (trainer.resume_mode=auto): no /shared/ckpt/latest_checkpointed_iteration.txt"):
        assert any(x.startswith("ok    " + rule) for x in lines), rule

    sampling = yaml.safe_load((ROOT / "configs" / "sampling.yaml").read_text())
    assert (sampling["temperature"], sampling["top_k"], sampling["top_p"]) == (1.0, 20, 0.95)
    _, cfg, checks, _ = plan([], {**env, "DRY_RUN": "true"})
    assert all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
    get = lambda key: OmegaConf.select(cfg, key)  # noqa: E731
    world, sp, tp = get("trainer.nnodes") * get("trainer.n_gpus_per_node"), get("actor_rollout_ref.actor.ulysses_sequence_parallel_size"), \
        get("actor_rollout_ref.rollout.tensor_model_parallel_size")
    assert (world, sp, tp) == (24, 4, 4) and world % sp == 0 and get("trainer.n_gpus_per_node") % tp == 0
    dp = world // sp
    assert dp == 6 and (get("data.train_batch_size") * get("actor_rollout_ref.rollout.n")) % dp == 0
    assert (get("actor_rollout_ref.actor.ppo_mini_batch_size") * get("actor_rollout_ref.rollout.n")) % dp == 0
    assert get("actor_rollout_ref.ref.ulysses_sequence_parallel_size") == 4
    assert get("actor_rollout_ref.actor.optim.lr") == pytest.approx(1e-6) and get("data.seed") == 42
    assert get("actor_rollout_ref.rollout.prompt_length") + get("actor_rollout_ref.rollout.response_length") \
        == get("actor_rollout_ref.rollout.max_model_len") == 26624 + 106496
    assert get("actor_rollout_ref.rollout.gpu_memory_utilization") == pytest.approx(0.70)
    assert (get("actor_rollout_ref.actor.use_fused_kernels"), get("actor_rollout_ref.actor.use_remove_padding")) == (True, True)
    assert (get("thinkingbox.family"), get("data.thinkingbox.family")) == ("xml", "xml")
    assert (get("trainer.test_freq"), get("trainer.val_before_train"), get("trainer.resume_mode")) == (-1, False, "auto")

    r = subprocess.run(["bash", "-c", "DRY_RUN=true scripts/run_train.sh"], cwd=ROOT, timeout=180, capture_output=True,
                       text=True, env={**env, "CONFIG": "configs/reference_3x8_async.yaml"})
    assert r.returncode == 0 and not fails(r.stdout), r.stdout[-3000:] + r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert "python -m verl.experimental.fully_async_policy.fully_async_main" in lines
    for key in ("actor_rollout_ref.actor.ulysses_sequence_parallel_size", "data.max_response_length", "trainer.resume_mode",
                "+thinkingbox.family"):
        assert f"{key}={REFERENCE_PROFILE[key]}" in lines, key
    assert "ok    ulysses_sequence_parallel_size divides the world: actor_rollout_ref.actor.ulysses_sequence_parallel_size=4, world 3x4=12" in lines
