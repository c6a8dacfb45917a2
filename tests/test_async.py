"""Asynchronous training (issue 29): bench/async.py's simulator and the fully-async launch
(configs/async_single_node.yaml, configs/reference_3x8_async.yaml through scripts/run_train.sh)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainer.verl import config_read
from trainer.verl import launch as launch_mod
from trainer.verl.config_read import ENTRIES, read_config
from trainer.verl.launch import main

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"configs/async_single_node.yaml": ("rollout 1x4=4 GPUs", "trainer 1x4=4 GPUs"),
           "configs/reference_3x8_async.yaml": ("rollout 3x4=12 GPUs", "trainer 3x4=12 GPUs")}
FULLY_ASYNC = "python -m verl.experimental.fully_async_policy.fully_async_main"
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                                 "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR", "EXPERIMENT"))}


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_async", ROOT / "bench" / "async.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_async"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


ab = load_bench()
S = ab.Shape
SKEWED = {f"t{a}": [S(a, 1, max(0, a - 1))] for a in (2, 3, 4, 6, 10, 20)}  # 2 to 20 agent turns


# ---------------------------------------------------------------- the bench


def test_the_bench_on_the_sample_tasks_prints_a_table_and_one_json_line_last():
    r = subprocess.run([sys.executable, "bench/async.py", "--json", "--test-list", "data/samples/lists/laptop.yaml",
                        "--probe-repeat", "2", "--steps", "8"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    res = json.loads(lines[-1])
    assert set(res) == {"sync", "one_step_off", "fully_async"}
    for mode, v in res.items():
        assert v["samples_per_hour"] > 0, mode
        assert set(v["gpu_idle_share"]) >= {"rollout", "trainer"}
        assert all(0.0 <= x <= 1.0 for x in v["gpu_idle_share"].values()), (mode, v)
    assert res["sync"]["mean_staleness"] == 0 and res["sync"]["vs_sync"] == 1.0
    assert "16 episodes of 8 tasks" in lines[0]  # the list's tasks, played twice each
    for mode in ("sync", "one_step_off", "fully_async"):  # the table, with the ratio against sync
        row = next(x for x in lines if x.startswith(mode))
        assert f"{res[mode]['vs_sync']:.2f}x" in row


def test_skewed_durations_fully_async_idles_less_and_trains_more_than_sync():
    res = ab.compare(SKEWED, ab.Model(steps=20))
    sync, fa = res["sync"], res["fully_async"]
    assert fa["gpu_idle_share"]["all"] < sync["gpu_idle_share"]["all"] - 0.1
    assert fa["gpu_idle_share"]["rollout"] < sync["gpu_idle_share"]["rollout"]
    assert fa["samples_per_hour"] > 1.2 * sync["samples_per_hour"]
    assert 0 < fa["mean_staleness"] <= 1.0 + 1e-9  # staleness_threshold 1.0: at most one version behind
    assert fa["partial_share"] > 0  # groups run across weight syncs


def test_equal_durations_give_no_gain():
    for latency in ({}, {"tool_latency": 0.0, "user_latency": 0.0}):
        res = ab.compare(SKEWED, ab.Model(steps=20, equal_durations=True, **latency))
        assert res["sync"]["gpu_idle_share"]["rollout"] < 0.1  # nothing waits for a straggler
        for mode in ("one_step_off", "fully_async"):
            assert res[mode]["vs_sync"] <= 1.02, (latency, mode, res[mode])


def test_below_one_version_of_staleness_the_trainer_waits_for_each_new_batch():
    """staleness_threshold 0.5 with a sync after every update: at a sync at most half a batch is
    in flight or queued, so each update waits for groups started after it (docs/training.md)."""
    low = ab.simulate("fully_async", SKEWED, ab.Model(steps=20, staleness=0.5))
    one = ab.simulate("fully_async", SKEWED, ab.Model(steps=20, staleness=1.0))
    assert low["samples_per_hour"] < one["samples_per_hour"]
    assert low["mean_staleness"] < one["mean_staleness"]


def test_the_bench_is_deterministic_under_its_seed():
    a = ab.compare(SKEWED, ab.Model(steps=10, seed=3))
    assert a == ab.compare(SKEWED, ab.Model(steps=10, seed=3))
    assert a != ab.compare(SKEWED, ab.Model(steps=10, seed=4))


def test_the_bench_reads_a_records_file(tmp_path, capsys):
    recs = [{"uid": f"t{i % 3}", "turns": {"agent": 2 + 3 * (i % 3), "user": 1}, "tool_calls": [{}] * (i % 3),
             "system_error": None} for i in range(12)]
    recs.append({"uid": "broken", "turns": {"agent": 99}, "tool_calls": [], "system_error": "backend timeout"})
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = ab.main(["--records", str(path), "--steps", "5", "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[-1]) == res
    assert "12 episodes of 3 tasks" in out[0]  # the system-error attempt is no episode shape


# ---------------------------------------------------------------- the launch


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pool")
    for name in ("train.parquet", "test.parquet"):
        (d / name).write_bytes(b"PAR1")
    return {**BASE_ENV, "TRAIN_FILE": str(d / "train.parquet"), "VAL_FILE": str(d / "test.parquet"),
            "MODEL_PATH": "Qwen/Qwen3-8B", "CKPT_DIR": "/shared/ckpt", "NODE_GPUS": "8",
            "TBT_USER_SPEC": "openai:http://127.0.0.1:8001/v1#Qwen/Qwen3-8B", "TBT_USER_API_KEY": "EMPTY",
            "TBT_JUDGE_SPEC": "openai:http://127.0.0.1:8002/v1#Qwen/Qwen3-8B", "TBT_JUDGE_API_KEY": "EMPTY"}


def test_dry_run_of_the_single_node_config_prints_the_async_entrypoint_and_the_split(pool):
    r = subprocess.run(["./scripts/run_train.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**pool, "DRY_RUN": "true", "CONFIG": "configs/async_single_node.yaml"})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert FULLY_ASYNC in lines and "python -m verl.trainer.main_ppo" not in lines
    split = next(x for x in lines if x.startswith("# GPUs (split):"))
    assert "rollout 1x4=4 GPUs" in split and "trainer 1x4=4 GPUs" in split
    for o in ("rollout.n_gpus_per_node=4", "trainer.n_gpus_per_node=4", "async_training.staleness_threshold=1.0",
              "async_training.partial_rollout=true", "algorithm.rollout_correction.rollout_is=token",
              "algorithm.rollout_correction.rollout_is_threshold=2.0", "data.train_batch_size=0"):
        assert o in lines, o
    assert "ok    gpus per node: rollout 1x4 + trainer 1x4: 8 per node, this node has 8" in lines
    assert not [x for x in lines if x.startswith("FAIL")]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_dry_run_of_each_async_config(config, pool, capsys):
    assert main([], {**pool, "DRY_RUN": "true", "CONFIG": config}) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert FULLY_ASYNC + " \\" in out.splitlines()
    split = next(x for x in out.splitlines() if x.startswith("# GPUs (split):"))
    assert all(part in split for part in CONFIGS[config]), split


def verl_keys(tree, prefix=""):
    for k, v in tree.items():
        yield prefix + k
        if isinstance(v, dict):
            yield from verl_keys(v, prefix + k + ".")


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_key_of_the_async_configs_is_in_verls_fully_async_schema(config):
    """Each verl key the config sets (not `+thinkingbox.*`) is in verl's fully_async_ppo_trainer
    config: the async ones in verl's own yaml file, the rest in what it composes."""
    from omegaconf import OmegaConf

    entry = ENTRIES["fully_async"]
    raw = yaml.safe_load((config_read.verl_config_dir(entry) / f"{entry.config_name}.yaml").read_text())
    own = set(verl_keys({k: v for k, v in raw.items() if k not in ("hydra", "defaults")}))
    composed = set(verl_keys(OmegaConf.to_container(config_read.compose([], entry), throw_on_missing=False)))
    keys = [k for k in read_config(ROOT / config, {}) if not k.startswith(("+", "@"))]
    assert set(keys) <= composed, set(keys) - composed
    async_keys = [k for k in keys if k.startswith(("async_training.", "rollout."))]
    assert {"async_training.staleness_threshold", "async_training.partial_rollout",
            "async_training.trigger_parameter_sync_step", "rollout.n_gpus_per_node", "rollout.nnodes"} <= set(async_keys)
    assert set(async_keys) <= own, set(async_keys) - own


def test_the_entry_is_the_one_verl_runs_with_the_config_it_composes():
    entry = ENTRIES["fully_async"]
    main_py = config_read.verl_dir().joinpath(*entry.module.split(".")[1:]).with_suffix(".py")  # not imported: torch
    src = main_py.read_text()
    assert f'@hydra.main(config_path="config", config_name="{entry.config_name}"' in src
    assert config_read.verl_config_dir(entry) == main_py.parent / "config"
    raw = yaml.safe_load((config_read.verl_config_dir(entry) / f"{entry.config_name}.yaml").read_text())
    assert raw["hydra"]["searchpath"] == ["pkg://verl.trainer.config"]  # what Entry.searchpath stands for
    assert (config_read.verl_dir().joinpath(*entry.searchpath) / "ppo_trainer.yaml").exists()


def test_a_real_launch_runs_verls_fully_async_main_with_the_overrides(pool, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(launch_mod, "dead_endpoints", lambda cfg: [])
    # the GPU node's own checks (its kernels: flash-attn, cupy), which this machine fails: tests/test_node_needs.py
    monkeypatch.setattr(launch_mod, "this_node_checks", lambda cfg, env: [])
    monkeypatch.setattr(launch_mod.subprocess, "call", lambda args, **kw: calls.append(args) or 0)
    import trainer.verl.patching as patching

    monkeypatch.setattr(patching, "apply_all", patching.states)  # nothing written to the installed verl
    assert main([], {**pool, "CONFIG": "configs/async_single_node.yaml"}) == 0, capsys.readouterr()
    (args,) = calls
    assert args[:3] == [sys.executable, "-m", "verl.experimental.fully_async_policy.fully_async_main"]
    assert "rollout.n_gpus_per_node=4" in args and "async_training.partial_rollout=true" in args


@pytest.mark.parametrize("override, rule", [
    ("actor_rollout_ref.rollout.multi_turn.enable=false", "fully_async: actor_rollout_ref.rollout.multi_turn.enable=true"),
    ("async_training.partial_rollout=false", "fully_async: async_training.partial_rollout=true"),
    ("data.train_batch_size=4", "fully_async: data.train_batch_size=0"),
    ("rollout.n_gpus_per_node=6", "gpus per node"),
    ("trainer.n_gpus_per_node=3", "ppo_mini_batch_size x n divides across trainer ranks")])
def test_what_verls_fully_async_trainer_or_our_agent_loop_would_trip_on_is_named(override, rule, pool, capsys):
    assert main([override], {**pool, "DRY_RUN": "true", "CONFIG": "configs/async_single_node.yaml"}) == 1
    out = capsys.readouterr().out
    assert any(x.startswith(f"FAIL  {rule}") for x in out.splitlines()), out


def test_the_cpu_smoke_under_the_fully_async_trainer_dry_runs(tmp_path):
    """configs/cpu_smoke_async.yaml: cpu_smoke's CPU path under verl's fully-async entry, one
    rollout and one trainer slot; its dry run passes the preflight and starts nothing."""
    ckpt = tmp_path / "ckpt"
    r = subprocess.run(["./scripts/run_train.sh"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                       env={**BASE_ENV, "DRY_RUN": "true", "CONFIG": "configs/cpu_smoke_async.yaml", "CKPT_DIR": str(ckpt)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x.strip().rstrip(" \\") for x in r.stdout.splitlines()]
    assert FULLY_ASYNC in lines
    split = next(x for x in lines if x.startswith("# GPUs (split):"))
    assert "rollout 1x1=1 GPUs" in split and "trainer 1x1=1 GPUs" in split and "2 updates" in split
    for o in ("actor_rollout_ref.rollout.name=hf_cpu", "trainer.device=cpu", "VERL_PLATFORM=cpu",
              "data.train_batch_size=0", "actor_rollout_ref.hybrid_engine=false", "async_training.partial_rollout=true",
              "actor_rollout_ref.rollout.multi_turn.enable=true", "+ray_kwargs.ray_init.num_gpus=2",
              "data.custom_cls.name=ThinkingBoxDataset", "algorithm.filter_groups.enable=false",
              f"trainer.default_local_dir={ckpt}", f"VERL_FILE_LOGGER_PATH={ckpt}/metrics.jsonl"):
        assert o in lines, o
    assert not [x for x in lines if x.startswith("FAIL")] and "DRY_RUN" in r.stdout
    assert not ckpt.exists()  # nothing built


@pytest.mark.engine  # a local Ray (~20 s)
def test_the_cpu_object_store_checkpoint_engine_passes_each_version_whole():
    """trainer/verl/cpu/checkpoint_engine.py (cpu_smoke_async's weight sync): the actor's rank 0
    publishes full tensors of a version; a rollout worker that asks first waits for that version
    and gets exactly them; the next version replaces them."""
    ray = pytest.importorskip("ray")
    import torch

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        class Side:  # defined here: pickled by value into the workers
            def __init__(self, master: bool):
                from trainer.verl.cpu.checkpoint_engine import ObjectStoreCheckpointEngine

                self.engine = ObjectStoreCheckpointEngine(is_master=master)

            async def send(self, version):
                await self.engine.send_weights(iter([("a", torch.ones(2) * version), ("b", torch.zeros(3))]),
                                               global_steps=version)

            async def receive(self, version):
                return {n: t.tolist() async for n, t in self.engine.receive_weights(global_steps=version)}

        side = ray.remote(Side)
        trainer0, trainer1, rollout = side.remote(True), side.remote(False), side.remote(False)
        early = rollout.receive.remote(1)  # asked before anything is sent: waits for version 1
        ray.get([trainer0.send.remote(1), trainer1.send.remote(1)])  # every rank iterates, rank 0 publishes
        assert ray.get(early) == {"a": [1.0, 1.0], "b": [0.0, 0.0, 0.0]}
        ray.get([trainer0.send.remote(2), trainer1.send.remote(2)])
        assert ray.get(rollout.receive.remote(2))["a"] == [2.0, 2.0]
    finally:
        ray.shutdown()


def test_verls_unpadding_runs_on_cpu_without_flash_attn():
    """The trainer's log-prob step unpads through verl.utils.attention_utils, which imports
    flash-attn; the CPU path gives it plain-torch functions of the same meaning."""
    import importlib.util

    import torch

    import trainer.verl.cpu  # noqa: F401  (what VERL_USE_EXTERNAL_MODULES imports in every verl process)
    from verl.utils.attention_utils import index_first_axis, pad_input, unpad_input

    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed: verl uses its own")
    x = torch.arange(12.0).view(2, 3, 2)
    mask = torch.tensor([[0, 1, 1], [1, 1, 0]])
    tokens, indices, cu, longest, used = unpad_input(x, mask)
    assert tokens.tolist() == [[2.0, 3.0], [4.0, 5.0], [6.0, 7.0], [8.0, 9.0]] and indices.tolist() == [1, 2, 3, 4]
    assert cu.tolist() == [0, 2, 4] and cu.dtype == torch.int32 and longest == 2 and used.tolist() == [2, 2]
    assert pad_input(tokens, indices, 2, 3).tolist() == (x * mask[..., None]).tolist()
    assert index_first_axis(x.view(6, 2), indices).tolist() == tokens.tolist()
