"""What a config needs on a node (trainer/verl/node_needs.py), the tracker's variables for every
worker (trainer/verl/tracker.py) and a GPU node's set-up checks (trainer/verl/node_setup.py,
scripts/setup_node.sh): each check fails where its need is not met, naming what and the fix, and
holds where it is; a real launch refuses the run in its first seconds."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from trainer.verl.config_read import plan
from trainer.verl.node_needs import (GB, Needs, checkpoint_need, kernels_needed, need_problems, needs_of,
                                     parameter_count, tools_needed)
from trainer.verl.tracker import tracker_env

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                                 "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR", "WANDB_", "RAY_ADDRESS", "DRY_RUN"))}
SPECS = {"TBT_USER_SPEC": "openai:http://127.0.0.1:8001/v1#m", "TBT_JUDGE_SPEC": "openai:http://127.0.0.1:8002/v1#m",
         "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY"}


def composed(config: str, **env: str):
    _, cfg, _, _ = plan([], {**BASE_ENV, **SPECS, "CONFIG": config, **env})
    return cfg


def safetensors(path: Path, shapes: dict[str, list[int]]) -> Path:
    """A safetensors file whose header declares `shapes` (float32); parameter_count reads only headers."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return path


# --- kernels ---------------------------------------------------------------------------------

def test_the_kernels_each_config_needs():
    assert [m for m, _ in kernels_needed(composed("configs/train_single_node.yaml"))] == ["flash_attn"]
    # the reference run: qwen3_5 (xml family) on GPUs, sequence parallel 4
    assert [m for m, _ in kernels_needed(composed("configs/reference_3x8.yaml", MODEL_PATH="/m", CKPT_DIR="/c"))] == [
        "flash_attn", "fla", "causal_conv1d"]
    assert "cupy" in [m for m, _ in kernels_needed(composed("configs/async_single_node.yaml"))]
    # the CPU smokes need none: sdpa, sequence parallel 1, trainer.device=cpu
    assert kernels_needed(composed("configs/cpu_smoke.yaml")) == []
    assert kernels_needed(composed("configs/cpu_smoke_qwen3_5.yaml")) == []


def test_a_kernel_that_does_not_import_is_named_with_where_it_comes_from():
    problems, notes = need_problems(Needs(kernels=(("flash_attn", "verl's default flash_attention_2"),
                                                   ("json", "a module that imports"))), {})
    (p,) = problems
    assert p.startswith("kernel flash_attn does not import here (verl's default flash_attention_2): ModuleNotFoundError")
    assert "flash-attn" in p and "bash scripts/setup_node.sh" in p
    assert notes == ["kernel json imports"]


# --- the tracker -----------------------------------------------------------------------------

def test_wandb_needs_a_key_or_a_local_mode_on_the_node(tmp_path):
    needs = Needs(wandb=True)
    no_netrc = {"NETRC": str(tmp_path / "none")}
    (p,) = need_problems(needs, {**no_netrc, "WANDB_MODE": "online"})[0]
    assert "WANDB_MODE is online here and no wandb key" in p and "WANDB_API_KEY" in p and "WANDB_MODE=offline" in p
    assert "WANDB_MODE is online" in need_problems(needs, no_netrc)[0][0]  # unset: wandb's default, online
    for env in ({"WANDB_MODE": "offline"}, {"WANDB_MODE": "disabled"}, {"WANDB_API_KEY": "k"}):
        assert need_problems(needs, {**no_netrc, **env})[0] == [], env
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password secret-key\n")
    netrc.chmod(0o600)
    assert need_problems(needs, {"NETRC": str(netrc)}) == ([], ["wandb online with a key"])
    assert need_problems(needs, {"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example:8443"})[0]  # another host


def test_the_tracker_variables_reach_every_worker_but_the_key():
    cfg = composed("configs/train_single_node.yaml")
    env = {"WANDB_API_KEY": "secret", "WANDB_PROJECT": "p"}
    assert tracker_env(cfg, env) == {"WANDB_MODE": "offline", "WANDB_PROJECT": "p"}
    assert tracker_env(cfg, {"WANDB_MODE": "online"}) == {"WANDB_MODE": "online"}
    assert tracker_env(composed("configs/cpu_smoke.yaml"), env) == {}  # no wandb among its loggers
    # on a cluster the launch did not start, verl's runtime env carries them to every worker
    overrides, _, _, _ = plan([], {**BASE_ENV, **SPECS, **env, "CONFIG": "configs/train_single_node.yaml",
                                   "RAY_ADDRESS": "127.0.0.1:6379"})
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_MODE='offline'" in overrides
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_PROJECT='p'" in overrides
    assert not any("secret" in o or "WANDB_API_KEY" in o for o in overrides)
    # the config's own env: says it (the CPU smokes: disabled, unless WANDB_MODE says otherwise)
    for mode, forwarded in ((None, "disabled"), ("online", "online")):
        overrides, _, _, _ = plan(["trainer.logger=[console,wandb]"], {**BASE_ENV, **SPECS, "CONFIG": "configs/cpu_cluster_smoke.yaml",
                                                                        **({"WANDB_MODE": mode} if mode else {})})
        assert [o for o in overrides if ".WANDB_MODE=" in o] == [f"+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_MODE='{forwarded}'"]


# --- the JIT tools on PATH -------------------------------------------------------------------

def test_ninja_and_nvcc_must_be_on_the_workers_path_where_vllm_jit_compiles(tmp_path):
    assert [t for t, _ in tools_needed(composed("configs/train_single_node.yaml"))] == ["ninja", "nvcc"]
    assert tools_needed(composed("configs/cpu_smoke_vllm.yaml")) == []  # vLLM's CPU build: nothing to JIT
    needs = Needs(tools=(("ninja", "JIT"), ("nvcc", "JIT")))
    empty = tmp_path / "empty"
    empty.mkdir()
    problems, _ = need_problems(needs, {"PATH": str(empty)})
    assert [p.split(" ")[0] for p in problems] == ["ninja", "nvcc"]
    assert "scripts/start_ray.sh" in problems[0] and "$CUDA_HOME/bin (nvcc)" in problems[0]
    for tool in ("ninja", "nvcc"):
        (empty / tool).write_text("#!/bin/sh\n")
        (empty / tool).chmod(0o755)
    assert need_problems(needs, {"PATH": str(empty)}) == ([], ["ninja on PATH", "nvcc on PATH"])


# --- checkpoint space ------------------------------------------------------------------------

def test_a_save_is_sized_from_the_models_safetensors_headers(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    safetensors(model / "model-00001-of-00002.safetensors", {"a": [1000, 64], "b": [64]})
    safetensors(model / "model-00002-of-00002.safetensors", {"c": [3, 5, 7]})
    assert parameter_count(model) == 64000 + 64 + 105
    cfg = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path / "ck"), "save_freq": 5, "total_training_steps": 50,
                                        "max_actor_ckpt_to_keep": 2},
                            "actor_rollout_ref": {"model": {"path": str(model), "lora_rank": 0}}})
    ckpt, need, why = checkpoint_need(cfg)
    assert ckpt == str(tmp_path / "ck") and need == 2 * 64169 * 12
    assert why.startswith("2 save(s) kept (trainer.max_actor_ckpt_to_keep=2)") and "fp32 parameters and Adam's" in why
    cfg.trainer.max_actor_ckpt_to_keep = None  # verl's default: every save stays
    assert checkpoint_need(cfg)[1] == 10 * 64169 * 12 and "every save kept: 50 steps / save_freq 5" in checkpoint_need(cfg)[2]
    cfg.actor_rollout_ref.model.lora_rank = 8  # an adapter's optimizer state is next to nothing
    assert checkpoint_need(cfg)[1] == 10 * 64169 * 4
    (model / "model-00002-of-00002.safetensors").write_bytes(b"\x05\x00")  # truncated: not sized, no crash
    assert parameter_count(model) is None and checkpoint_need(cfg)[1] == 0


def test_too_little_room_for_the_kept_checkpoints_is_refused_with_the_numbers(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    ok, notes = need_problems(Needs(ckpt_dir=str(tmp_path / "ck" / "new"), ckpt_bytes=1000, ckpt_why="w"), {})
    assert ok == [] and notes[0].startswith("checkpoint space 0.0 of")
    (p,) = need_problems(Needs(ckpt_dir=str(tmp_path / "ck"), ckpt_bytes=free * 2, ckpt_why="3 save(s) kept"), {})[0]
    assert p.startswith(f"checkpoint directory {tmp_path / 'ck'}: {free * 2 / GB:.1f} GB needed")
    assert "(3 save(s) kept)" in p and "max_actor_ckpt_to_keep" in p and "CKPT_DIR" in p


def test_the_reference_run_keeps_two_saves_and_resumes_from_its_tracker(tmp_path):
    """max_actor_ckpt_to_keep is set, and the launch still resumes the step the tracker names."""
    cfg = composed("configs/reference_3x8.yaml", MODEL_PATH=str(tmp_path), CKPT_DIR=str(tmp_path / "ck"))
    assert OmegaConf.select(cfg, "trainer.max_actor_ckpt_to_keep") == 2
    assert needs_of(cfg).ckpt_bytes == 0  # no safetensors at MODEL_PATH: not sized, and said so
    from trainer.verl.rollback import resumed_step

    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "latest_checkpointed_iteration.txt").write_text("45")
    assert resumed_step(cfg, tmp_path / "ck") == 45


# --- a real launch refuses a node that lacks a kernel ----------------------------------------

def test_a_real_launch_without_flash_attn_stops_in_seconds_naming_the_node_and_starting_nothing(tmp_path, endpoints):
    """The acceptance launch: configs/train_single_node.yaml, not a dry run, with a tiny local model,
    a prepared pool and answering user and judge endpoints, on this machine without flash-attn:
    exit 1 within 90 s, every failed check in one preflight, flash-attn and the node named, and no
    Ray, TaskRunner or main_ppo started."""
    from trainer.verl.tiny import build_tiny_qwen3

    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here: the launch would go on")
    model = build_tiny_qwen3(tmp_path / "model")
    pool = tmp_path / "pool"  # the launch checks the pool's files exist; verl would read them
    pool.mkdir()
    for name in ("train.parquet", "test.parquet"):
        (pool / name).write_bytes(b"PAR1")
    user = endpoints(lambda path, body: (200, {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}))
    env = {**BASE_ENV, "CONFIG": "configs/train_single_node.yaml", "MODEL_PATH": str(model), "CKPT_DIR": str(tmp_path / "ck"),
           "TRAIN_FILE": str(pool / "train.parquet"), "VAL_FILE": str(pool / "test.parquet"),
           "TBT_USER_SPEC": f"openai:http://127.0.0.1:{user.port}/v1#m", "TBT_JUDGE_SPEC": f"openai:http://127.0.0.1:{user.port}/v1#m",
           "TBT_USER_API_KEY": "EMPTY", "TBT_JUDGE_API_KEY": "EMPTY", "WANDB_MODE": "online", "NETRC": str(tmp_path / "none"),
           "RAY_TMPDIR": str(tmp_path / "ray")}
    t0 = time.monotonic()
    r = subprocess.run(["scripts/run_train.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    assert took <= 90
    (node,) = [x for x in r.stdout.splitlines() if x.startswith("FAIL  node ")]
    assert "(this node) ready: kernel flash_attn does not import here" in node and "flash-attn" in node
    assert "tracker: trainer.logger has wandb, WANDB_MODE is online here" in node  # every problem, not just the first
    assert "(this node) not ready" in r.stderr and "nothing was started" in r.stderr
    # main_ppo's first line, before Ray and its TaskRunner start
    assert "ray init kwargs" not in r.stdout + r.stderr and not (tmp_path / "ray").exists()
    assert not (tmp_path / "ck").exists()


# --- a GPU node's set-up checks --------------------------------------------------------------

def fake_toolkit(root: Path, release: str, headers: bool = True) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.88'\n")
    nvcc.chmod(0o755)
    if headers:
        for h in ("cublas_v2.h", "cusparse.h"):
            (root / "include" / h).write_text("")
    return root


def test_the_node_setup_check_names_a_toolkit_of_another_cuda_major(tmp_path):
    from trainer.verl.node_setup import toolkit_items
    from trainer.verl.preflight import torch_cuda

    cuda = torch_cuda()[1]
    if cuda is None:
        pytest.skip("torch here is a CPU build")
    major = cuda.split(".")[0]
    good = toolkit_items({"CUDA_HOME": str(fake_toolkit(tmp_path / "good", f"{major}.0"))})
    assert [i.ok for i in good] == [True, True]
    bad = toolkit_items({"CUDA_HOME": str(fake_toolkit(tmp_path / "old", "12.8", headers=False))})
    assert not bad[0].ok and "is CUDA 12.8" in bad[0].detail and f"install the CUDA {major} toolkit" in bad[0].detail
    (none,) = toolkit_items({"CUDA_HOME": str(tmp_path / "nowhere")})
    assert not none.ok and "no nvcc" in none.detail and "set CUDA_HOME" in none.detail


def test_the_node_setup_check_names_memory_gcc_and_disk_problems(tmp_path):
    from trainer.verl.node_setup import compiler_items, disk_item, memory_item

    too_many = memory_item({"MAX_JOBS": "64", "NVCC_THREADS": "4"}, available=32 * 1024**3)
    assert not too_many.ok and "MAX_JOBS=64 x ~9.0 GB" in too_many.detail and "lower MAX_JOBS to 3" in too_many.detail
    assert memory_item({"MAX_JOBS": "2"}, available=32 * 1024**3).ok
    assert not memory_item({}, available=4 * 1024**3).ok  # not even one job
    (gcc, _) = compiler_items({"PATH": str(tmp_path)})
    assert not gcc.ok and "install gcc" in gcc.detail
    assert disk_item({"UV_CACHE_DIR": str(tmp_path)}, min_gb=1).ok
    huge = disk_item({"UV_CACHE_DIR": str(tmp_path)}, min_gb=10**9)
    assert not huge.ok and "free space there" in huge.detail


def test_setup_node_refuses_bad_variables_and_an_old_uv_before_syncing(tmp_path):
    assert subprocess.run(["bash", "-n", "scripts/setup_node.sh"], cwd=ROOT).returncode == 0  # bash parses as it runs
    r = subprocess.run(["bash", "scripts/setup_node.sh"], cwd=ROOT, env={**BASE_ENV, "STOP_AFTER": "flash"},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "STOP_AFTER=flash" in r.stderr
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "uv").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "uv 0.8.5" && exit 0\necho "uv $*" >> "$CALLS"\n')
    (fake / "uv").chmod(0o755)
    r = subprocess.run(["bash", "scripts/setup_node.sh"], cwd=ROOT, capture_output=True, text=True, timeout=30,
                       env={**BASE_ENV, "PATH": f"{fake}:{BASE_ENV['PATH']}", "CALLS": str(tmp_path / "calls")})
    assert r.returncode == 1 and "uv 0.8.5 is older than 0.8.6" in r.stderr
    assert not (tmp_path / "calls").exists()  # nothing synced
    help_ = subprocess.run(["bash", "scripts/setup_node.sh", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert help_.returncode == 0 and "UV_CACHE_DIR" in help_.stdout
