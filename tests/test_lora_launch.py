"""LoRA launches: the preflight's `rollout plays the LoRA adapter` check (trainer/verl/preflight.py
`lora_check`) on composed configs, each way verl 0.9.0 would train an adapter the rollout engine
never plays refused, each way it plays it said; and the GPU LoRA configs
(configs/lora_single_node.yaml, configs/reference_3x8_lora.yaml) through scripts/run_train.sh's dry run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_launch import dry_run_overrides
from trainer.verl.launch import main, plan

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NODE_DRIVER", "NNODES", "CKPT_DIR", "CONFIG",
                                 "MODEL_PATH", "MODEL_FAMILY", "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR", "SMOKE_", "EXPERIMENT",
                                 "DRY_RUN", "RAY_ADDRESS"))}
RULE = "rollout plays the LoRA adapter"
M = "actor_rollout_ref.model."
MERGE, BACKEND = M + "lora.merge", "actor_rollout_ref.rollout.checkpoint_engine.backend"
NO_MERGE = MERGE + "=false"
LORA = "configs/lora_single_node.yaml"
REF_LORA = "configs/reference_3x8_lora.yaml"
USER = "openai:http://127.0.0.1:8001/v1#Qwen/Qwen3-8B"


def check(config: str, *cli: str, **env: str):
    """The LoRA check of `config` composed with `cli`, as the launch's preflight runs it."""
    run_env = {**BASE_ENV, "CONFIG": config, "MODEL_PATH": "Qwen/Qwen3-4B", "CKPT_DIR": "/shared/ckpt",
               "SMOKE_DIR": "/nonexistent/tbt-lora-smoke", **env}
    (c,) = [c for c in plan(list(cli), run_env)[2] if c.rule == RULE]
    return c


@pytest.mark.parametrize("config,cli,said", [
    # a non-naive sync (the fully-async trainer's nccl; any other) without merge: base weights only
    (LORA, (NO_MERGE, f"{BACKEND}=nccl"), ["a nccl sync", "skips every lora_ tensor", "base weights",
                                           f"set {MERGE}=true"]),
    ("configs/reference_3x8_async.yaml", (M + "lora_rank=32",), [f"{BACKEND}=nccl", "skips every lora_ tensor"]),
    ("configs/cpu_smoke_async.yaml", (M + "lora_rank=8",), ["a cpu_object_store sync", f"set {MERGE}=true"]),
    # delta_sharded: its steady syncs diff the unmerged module, merged or not
    (LORA, (f"{BACKEND}=delta_sharded",), ["delta_sharded", "non-LoRA base path only", f"{BACKEND}=nccl with {MERGE}=true"]),
    # an engine that takes no adapter: the project's CPU rollout, TensorRT-LLM
    ("configs/cpu_smoke.yaml", (M + "lora_rank=8", NO_MERGE), ["rollout hf_cpu loads full weights only", f"set {MERGE}=true"]),
    (LORA, (NO_MERGE, "actor_rollout_ref.rollout.name=trtllm"), ["rollout trtllm takes no adapter", f"set {MERGE}=true"]),
    # not the FSDP actor
    (LORA, ("actor_rollout_ref.actor.strategy=megatron",),
     [M + "lora_rank=32 with actor_rollout_ref.actor.strategy=megatron", "FSDP actor's key", "strategy=fsdp"]),
    ("configs/train_single_node.yaml", ("actor_rollout_ref.actor.strategy=megatron", M + "lora.rank=16"),
     [M + "lora.rank=16", "Megatron's LoRA is not covered here"]),
    ("configs/train_single_node.yaml", (M + "lora.rank=16",),
     [M + "lora.rank=16, " + M + "lora_rank=0", "Megatron key", "0: none, every weight trains", f"set {M}lora_rank=16"]),
    (LORA, (M + "lora.rank=64",), ["Megatron key", f"set {M}lora_rank=64"]),
    # no module adapted
    (LORA, (M + "target_modules=null",), [M + "target_modules=null", "no module gets an adapter", "all-linear"]),
    (LORA, (M + "target_modules=[]",), [M + "target_modules=[]", "no module gets an adapter"]),
    # the adapter path: layered_summon without the base preloaded, a rank vLLM cannot serve
    (LORA, (NO_MERGE, "actor_rollout_ref.rollout.layered_summon=true"),
     ["layered_summon=true, load_format=dummy", "load_format=safetensors"]),
    (LORA, (NO_MERGE, M + "lora_rank=1024"), ["vLLM's max_lora_rank is at most 512"]),
    # an adapter to continue that the FSDP actor would not load
    ("configs/train_single_node.yaml", (M + "lora_adapter_path=/shared/adapter",),
     [M + "lora_adapter_path=/shared/adapter with " + M + "lora_rank=0", "loads the adapter only when"]),
    # bad values, named
    (LORA, (M + "lora_rank=-8",), [M + "lora_rank=-8: expected an integer >= 0"]),
    (LORA, (M + "lora_rank=eight",), [M + "lora_rank=eight: expected an integer >= 0"]),
    (LORA, (M + "lora_rank=8.5",), [M + "lora_rank=8.5: expected an integer >= 0"]),
    (LORA, (M + "lora_rank=true",), [M + "lora_rank=true: expected an integer >= 0"]),
    (LORA, (M + "lora.rank=-1",), [M + "lora.rank=-1: expected an integer >= 0"]),
    (LORA, (MERGE + "=sometimes",), [MERGE + "=sometimes: expected true or false"]),
], ids=["nccl-unmerged", "reference-async-unmerged", "cpu-object-store-unmerged", "delta-sharded", "hf_cpu-unmerged",
        "trtllm-unmerged", "megatron-lora_rank", "megatron-lora.rank", "fsdp-megatron-key", "fsdp-two-ranks",
        "targets-null", "targets-empty", "layered-summon-dummy", "vllm-rank-too-big", "adapter-path-rank-0",
        "rank-negative", "rank-string", "rank-float", "rank-bool", "megatron-rank-negative", "merge-not-bool"])
def test_a_lora_launch_whose_rollout_would_not_play_the_adapter_fails_naming_the_keys_and_the_fix(config, cli, said):
    c = check(config, *cli)
    assert not c.ok and not c.skipped, c.line()
    assert c.line().startswith(f"FAIL  {RULE}: ") and c.brief == "the rollout would not play the LoRA adapter"
    for words in said:
        assert words in c.detail, (words, c.detail)


@pytest.mark.parametrize("config,cli,said", [
    (LORA, (), [M + "lora_rank=32", MERGE + "=true", BACKEND + "=naive", "rollout.name=vllm", "merged weights",
                "through the naive sync"]),
    (REF_LORA, (), [M + "lora_rank=32", MERGE + "=true", "merged weights"]),
    ("configs/cpu_smoke_lora.yaml", (), ["rollout.name=vllm", "merged weights"]),
    ("configs/cpu_smoke.yaml", (M + "lora_rank=8", MERGE + "=true"), ["rollout.name=hf_cpu", "merged weights"]),
    # merged weights through a disaggregated sync: the fully-async trainer's nccl
    ("configs/reference_3x8_async.yaml", (M + "lora_rank=32", MERGE + "=true"), [BACKEND + "=nccl", "through the nccl sync"]),
    # the adapter alone, colocated, to an engine with LoRA: the base first when the engine starts without it
    (LORA, (NO_MERGE,), ["adapter via the engine's LoRA", "vllm started with enable_lora",
                         "each sync sends the adapter alone",
                         "the first also sends the base weights, which load_format=dummy leaves out"]),
    (LORA, (NO_MERGE, "actor_rollout_ref.rollout.load_format=safetensors", "actor_rollout_ref.rollout.layered_summon=true"),
     ["adapter via the engine's LoRA", "each sync sends the adapter alone with its peft_config)"]),
    (LORA, (NO_MERGE, "actor_rollout_ref.rollout.name=sglang"), ["sglang started with enable_lora"]),
    (LORA, ("actor_rollout_ref.actor.strategy=fsdp2",), ["merged weights"]),
    # an adapter to continue from: its targets are the adapter's own
    (LORA, (M + "target_modules=null", M + "lora_adapter_path=/shared/adapter"), ["merged weights"]),
    # the Megatron key equal to the FSDP one: the same rank everywhere
    (LORA, (M + "lora.rank=32",), ["merged weights"]),
], ids=["lora_single_node", "reference_3x8_lora", "cpu_smoke_lora", "hf_cpu-merged", "async-merged", "vllm-adapter", "vllm-adapter-preloaded",
        "sglang-adapter", "fsdp2", "adapter-path", "equal-ranks"])
def test_a_lora_launch_whose_rollout_plays_the_adapter_says_which_sync_does(config, cli, said):
    c = check(config, *cli)
    assert c.ok and not c.skipped, c.line()
    for words in said:
        assert words in c.detail, (words, c.detail)


@pytest.mark.parametrize("config,cli", [("configs/train_single_node.yaml", ()), ("configs/reference_3x8.yaml", ()),
                                        ("configs/reference_3x8_async.yaml", ()), ("configs/cpu_smoke.yaml", ()),
                                        (LORA, (M + "lora_rank=0",)),
                                        ("configs/train_single_node.yaml", ("actor_rollout_ref.actor.strategy=megatron",))])
def test_a_run_without_lora_passes_saying_so(config, cli):
    c = check(config, *cli)
    assert c.ok and not c.skipped and "=0: not a LoRA run" in c.detail, c.line()


def test_a_rank_waiting_for_a_variable_is_left_to_the_variables_check(tmp_path):
    child = tmp_path / "lora.yaml"
    child.write_text(f"extends: {ROOT / LORA}\nactor_rollout_ref.model.lora_rank: ${{env:TBT_LORA_RANK}}\n")
    c = check(str(child))
    assert c.ok and c.skipped and f"{M}lora_rank waits for TBT_LORA_RANK" in c.detail, c.line()
    assert check(str(child), TBT_LORA_RANK="16").detail.startswith(M + "lora_rank=16, ")


def test_a_bad_lora_launch_fails_a_dry_run_as_a_config_fault(capsys, tmp_path):
    """The check is of the config, not the launch site: FAIL and exit 1 under DRY_RUN=true too, the
    one-line error naming it."""
    (tmp_path / "model").mkdir()
    env = {**BASE_ENV, "DRY_RUN": "true", "CONFIG": "configs/reference_3x8_async.yaml", "MODEL_PATH": str(tmp_path / "model"),
           "CKPT_DIR": "/shared/ckpt", "NODE_GPUS": "8", "TRAIN_FILE": str(ROOT / "configs" / "sampling.yaml"),
           "VAL_FILE": str(ROOT / "configs" / "sampling.yaml"), "TBT_USER_SPEC": USER, "TBT_JUDGE_SPEC": USER,
           "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY"}
    assert main([M + "lora_rank=32"], env) == 1
    out = capsys.readouterr()
    (bad,) = [x for x in out.out.splitlines() if x.startswith("FAIL")]
    assert bad.startswith(f"FAIL  {RULE}: ") and "1 problem(s)" in out.err
    assert "the rollout would not play the LoRA adapter" in out.err
    assert main([M + "lora_rank=32", MERGE + "=true"], env) == 0, capsys.readouterr()


# what each LoRA config sets over the config it extends, as the dry run prints it
LORA_KEYS = {M + "lora_rank": "32", M + "lora_alpha": "32", M + "target_modules": "all-linear", MERGE: "true",
             "actor_rollout_ref.actor.optim.lr": "1e-05"}


def dry_run(config: str, env: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """scripts/run_train.sh's dry run of `config`: (every override printed, by key; the preflight's lines)."""
    return dry_run_overrides({**env, "CONFIG": config})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, str]:
    """The launch site of the reference run: a model directory, pool files, user and judge models."""
    d = tmp_path_factory.mktemp("site")
    (d / "model").mkdir()
    for name in ("train.parquet", "test.parquet"):
        (d / name).write_bytes(b"PAR1")
    return {**BASE_ENV, "MODEL_PATH": str(d / "model"), "CKPT_DIR": "/shared/ckpt", "NODE_GPUS": "8",
            "TRAIN_FILE": str(d / "train.parquet"), "VAL_FILE": str(d / "test.parquet"), "TBT_USER_SPEC": USER,
            "TBT_JUDGE_SPEC": USER, "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY"}


@pytest.mark.parametrize("config,base,more", [
    (LORA, "configs/train_single_node.yaml", {"trainer.experiment_name": "single-node-lora"}),
    (REF_LORA, "configs/reference_3x8.yaml", {"trainer.experiment_name": "reference-3x8-lora",
                                              M + "exclude_modules": "'.*visual.*'"}),
], ids=["lora_single_node", "reference_3x8_lora"])
def test_the_gpu_lora_configs_are_their_full_parameter_configs_with_the_adapter(site, config, base, more):
    """The dry run prints the adapter's rank, alpha, targets, the learning rate 10x the base config's
    and the merged sync, once each; every other override is the base config's; the preflight passes
    whole with the LoRA check saying the merged weights play the adapter."""
    printed, preflight = dry_run(config, site)
    for key, value in {**LORA_KEYS, **more}.items():
        assert printed.get(key) == [value], (key, printed.get(key))
    full, _ = dry_run(base, site)
    assert full["actor_rollout_ref.actor.optim.lr"] == ["1e-06"]  # the full-parameter learning rate, x10 above
    changed = set(LORA_KEYS) | set(more)
    assert {k: v for k, v in printed.items() if k not in changed} == {k: v for k, v in full.items() if k not in changed}
    assert not [x for x in preflight if x.startswith(("FAIL", "need"))], preflight
    (line,) = [x for x in preflight if RULE in x]
    assert line.startswith(f"ok    {RULE}: {M}lora_rank=32, {MERGE}=true, {BACKEND}=naive, "
                           "actor_rollout_ref.rollout.name=vllm: merged weights"), line
