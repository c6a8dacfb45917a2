"""The rehearsal (trainer/verl/rehearsal.py): what a GPU start-up of each config does first, run
on a CPU machine, and the NVIDIA driver check of the preflight.

In the default environment (no gpu extra): every GPU config asks for flash_attention_2, which
cannot be built without flash-attn (named: the key, the implementation, what installs it); the
fully-async configs' nccl weight sync cannot be resolved without cupy (named); the CPU smoke's
sdpa passes. The engine test runs the rehearsal of every GPU config in the gpu extra's
environment (scripts/setup_gpu_env.sh: .deps/gpu-env), where vLLM parses verl's server arguments
and cupy resolves nccl; skipped without that environment unless TBT_REQUIRE_GPU_ENV is set (CI)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from trainer.verl import preflight as pf
from trainer.verl.launch import main, plan

ROOT = Path(__file__).resolve().parents[1]
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NODE_DRIVER", "NNODES", "CKPT_DIR", "CONFIG",
                                 "MODEL_PATH", "MODEL_FAMILY", "TRAIN_FILE", "VAL_FILE", "SMOKE_DIR", "SMOKE_", "EXPERIMENT",
                                 "DRY_RUN"))}
# scripts/gpu_smoke.sh: configs/cpu_smoke.yaml with the cluster's engines (its overrides, SMOKE_ATTN's default)
GPU_SMOKE = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.dtype=bfloat16",
             "actor_rollout_ref.rollout.free_cache_engine=true", "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
             "actor_rollout_ref.rollout.load_format=auto", "actor_rollout_ref.rollout.enforce_eager=true",
             "actor_rollout_ref.actor.fsdp_config.dtype=bfloat16", "actor_rollout_ref.model.use_remove_padding=true",
             "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"]
SMOKE_ENV = {"SMOKE_PLATFORM": "nvidia", "SMOKE_DEVICE": "cuda", "SMOKE_DIR": "/tmp/tbt-gpu-smoke"}
# (name, config, overrides, environment): every GPU config; the reference run in its family (xml: qwen3_5) and
# its model with hermes tool calls (named: without a model, the hermes family stands in a Qwen3)
GPU_CONFIGS = [("train_single_node", "configs/train_single_node.yaml", [], {}),
               ("reference_3x8", "configs/reference_3x8.yaml", [], {}),
               ("reference_3x8 hermes", "configs/reference_3x8.yaml", [],
                {"MODEL_FAMILY": "hermes", "MODEL_PATH": "Qwen/Qwen3.6-27B"}),
               ("reference_3x8_async", "configs/reference_3x8_async.yaml", [], {}),
               ("async_single_node", "configs/async_single_node.yaml", [], {}),
               ("lora_single_node", "configs/lora_single_node.yaml", [], {}),
               ("reference_3x8_lora", "configs/reference_3x8_lora.yaml", [], {}),
               ("gpu_smoke", "configs/cpu_smoke.yaml", GPU_SMOKE, SMOKE_ENV)]
ASYNC = ("reference_3x8_async", "async_single_node")


def composed(config: str, cli=(), **env: str):
    # SMOKE_DIR names no directory: the smoke's model is the family's tiny stand-in, whatever a smoke run
    # left in /tmp/tbt-cpu-smoke (a qwen3 model there made the xml family's stand-in a qwen3)
    return plan(list(cli), {**BASE_ENV, "CONFIG": config, "SMOKE_DIR": "/nonexistent/tbt-rehearsal-smoke", **env})[1]


def by_rule(checks, rule: str):
    """The one check whose rule is `rule`, or `rule` and more words."""
    (c,) = [c for c in checks if c.rule == rule or c.rule.startswith(rule + " ")]
    return c


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Where the stand-in tiny models are built, once for the module."""
    return tmp_path_factory.mktemp("rehearsal")


no_flash_attn = pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None,
                                   reason="flash_attn is importable here: the attention check passes")


@no_flash_attn
@pytest.mark.parametrize("name,config,cli,env", GPU_CONFIGS, ids=[g[0] for g in GPU_CONFIGS])
def test_a_flash_attention_2_config_fails_the_attention_check_naming_key_implementation_and_install(workdir, name, config,
                                                                                                    cli, env):
    from trainer.verl.rehearsal import ATTN_KEY, model_checks, model_source

    cfg = composed(config, cli, **env)
    checks, mc = model_checks(cfg, model_source(cfg, workdir))
    assert checks[0].ok and mc is not None, checks[0].line()  # verl's HFModelConfig builds
    want = "qwen3_5" if name.startswith("reference_3x8") else "qwen3"  # the reference's family, whatever its tool calls
    assert mc.hf_config.model_type == want and f"stand-in: the tiny {want}" in checks[0].detail
    attn = by_rule(checks, "rehearsal: attention implementation flash_attention_2")
    assert not attn.ok, attn.line()
    line = attn.line()
    assert line.startswith("FAIL") and ATTN_KEY in line and "flash_attention_2" in line
    assert "FlashAttention2 has been toggled on" in line  # transformers' own refusal
    assert "flash-attn" in line and "bash scripts/setup_node.sh" in line  # what installs it
    assert ("verl's default" in line) == (name != "gpu_smoke")  # unset: verl's default; the smoke sets it


@no_flash_attn
def test_the_flash_attn_kernel_check_fails_too(workdir):
    from trainer.verl.rehearsal import kernel_checks

    kernel = by_rule(kernel_checks(composed("configs/train_single_node.yaml"), "qwen3"), "rehearsal: kernel flash_attn")
    assert not kernel.ok and "No module named 'flash_attn'" in kernel.detail and "flash-attn" in kernel.detail


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="cupy is importable here: nccl resolves")
@pytest.mark.parametrize("config", [f"configs/{n}.yaml" for n in ASYNC])
def test_the_nccl_backend_fails_the_registry_check_naming_cupy(config):
    from trainer.verl.rehearsal import ENGINE_KEY, checkpoint_engine_check, kernel_checks

    cfg = composed(config)
    c = checkpoint_engine_check(cfg)
    assert c.rule == "rehearsal: weight-sync backend nccl" and not c.ok, c.line()
    assert f"{ENGINE_KEY}.backend=nccl" in c.detail and "KeyError" in c.detail
    assert "nccl_checkpoint_engine does not import (ModuleNotFoundError: No module named 'cupy')" in c.detail
    assert "cupy-cuda13x" in c.detail and "bash scripts/setup_node.sh" in c.detail
    assert not by_rule(kernel_checks(cfg, "qwen3"), "rehearsal: kernel cupy").ok


@no_flash_attn
def test_the_fully_async_trainer_needs_flash_attn_to_unpad_whatever_the_attention():
    """verl's fully-async trainer unpads every batch with flash_attn.bert_padding (sdpa does not
    change that); trainer.verl.cpu, named in VERL_USE_EXTERNAL_MODULES, swaps in plain torch
    (configs/cpu_smoke_async.yaml's env:); the v1 trainer of the synchronous configs calls none."""
    from trainer.verl.rehearsal import unpadding_check

    sdpa = ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"]
    c = unpadding_check(composed("configs/async_single_node.yaml", sdpa), {})
    assert not c.ok and "left_right_2_no_padding" in c.detail and "No module named 'flash_attn'" in c.detail
    assert unpadding_check(composed("configs/async_single_node.yaml"), {"VERL_USE_EXTERNAL_MODULES": "trainer.verl.cpu"}).ok
    plan_async = plan([], {**BASE_ENV, "CONFIG": "configs/cpu_smoke_async.yaml"})
    assert unpadding_check(plan_async[1], plan_async[3].env).ok
    assert unpadding_check(composed("configs/train_single_node.yaml", sdpa), {}) is None


def test_a_backend_no_module_registers_is_named_as_such():
    from trainer.verl.rehearsal import checkpoint_engine_check

    c = checkpoint_engine_check(composed("configs/cpu_smoke.yaml", ["actor_rollout_ref.rollout.checkpoint_engine.backend=nope"]))
    assert not c.ok and "no verl module registers it" in c.detail and "naive" in c.detail


def test_the_cpu_smoke_sdpa_config_passes_every_check(workdir):
    """configs/cpu_smoke.yaml resolves to sdpa (override_config) on padded rows: every check passes."""
    from trainer.verl.rehearsal import rehearse

    checks = rehearse(composed("configs/cpu_smoke.yaml"), workdir)
    assert all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
    attn = by_rule(checks, "rehearsal: attention implementation sdpa")
    assert not attn.skipped and "built with attention sdpa" in attn.detail
    assert "use_remove_padding=false: no packing" in by_rule(checks, "rehearsal: packed sequences").detail
    assert by_rule(checks, "rehearsal: weight-sync backend naive").ok
    assert by_rule(checks, "rehearsal: vLLM server arguments").skipped  # hf_cpu: no vLLM server


def test_sdpa_with_packed_rows_is_rehearsed_and_ulysses_refused(workdir):
    """A non-flash attention and verl's packing: remove-padding's packed rows are run through the
    tiny model and must keep apart (transformers masks them from position_ids); Ulysses SP > 1 is
    refused; a model whose forward verl replaces for packed rows is not rehearsed, and says so."""
    from trainer.verl.rehearsal import model_checks, model_source

    def packing(cli, **env):
        cfg = composed("configs/cpu_smoke.yaml", cli, **env)
        return by_rule(model_checks(cfg, model_source(cfg, workdir))[0], "rehearsal: packed sequences")

    packed = packing(["actor_rollout_ref.model.use_remove_padding=true"])
    assert packed.ok and not packed.skipped and "keep their own logits" in packed.detail
    sp = packing(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"])
    assert not sp.ok and "_ulysses_flash_attention_forward" in sp.detail
    hybrid = packing(["actor_rollout_ref.model.use_remove_padding=true"], MODEL_FAMILY="xml")
    assert hybrid.skipped and "qwen3_5" in hybrid.detail


@pytest.mark.parametrize("path,family", [("Qwen/Qwen3.6-27B", "qwen3_5"), ("/models/Qwen3.8-27B", "qwen3_5"),
                                         ("Qwen/Qwen3.5-27B", "qwen3_5"), ("Qwen/Qwen3-8B", "qwen3"),
                                         ("Qwen/Qwen3-32B", "qwen3")])
def test_the_stand_in_is_of_the_named_models_family(path, family):
    from trainer.verl.rehearsal import stand_in_family

    assert stand_in_family(composed("configs/train_single_node.yaml", MODEL_PATH=path, MODEL_FAMILY="hermes")) == family


def test_the_reference_stand_in_has_the_familys_window_and_the_profile_fits_it(workdir):
    """vLLM checks max_model_len against the model's max_position_embeddings: the stand-in carries
    the family's released window (Qwen3.5/3.6: 262,144), which the profile's 133,120 fits; at the
    tiny default of 32,768 vLLM refused the reference config (found by the engine rehearsal)."""
    import json as _json

    from trainer.verl.rehearsal import FAMILY_WINDOW, model_source

    cfg = composed("configs/reference_3x8.yaml")
    src = model_source(cfg, workdir)
    text = _json.loads((Path(src.path) / "config.json").read_text())["text_config"]
    assert text["max_position_embeddings"] == FAMILY_WINDOW["qwen3_5"] == 262144 and "262144-token window" in src.note
    assert int(cfg.actor_rollout_ref.rollout.max_model_len) == 133120 <= text["max_position_embeddings"]


def test_a_real_size_config_is_shrunk_to_a_tiny_model_of_its_architecture():
    """A model found here is read whole and instantiated shrunk: every kind of layer kept (qwen3_5:
    three Gated-DeltaNet layers, then the full-attention one), hidden 64."""
    from transformers import Qwen3_5Config, Qwen3Config

    from trainer.verl.rehearsal import build_tiny

    for config, arch, layers in [(Qwen3Config(architectures=["Qwen3ForCausalLM"]), "Qwen3ForCausalLM", 2),
                                 (Qwen3_5Config(architectures=["Qwen3_5ForConditionalGeneration"]),
                                  "Qwen3_5ForConditionalGeneration", 4)]:
        config._attn_implementation_internal = "sdpa"
        model = build_tiny(config)
        text = model.config.get_text_config()
        assert type(model).__name__ == arch and text.num_hidden_layers == layers and text.hidden_size == 64
        assert set(getattr(text, "layer_types", None) or ["full_attention"]) >= {"full_attention"}
        assert sum(p.numel() for p in model.parameters()) < 50e6  # the vocabulary's embeddings, mostly


def test_the_vllm_check_without_vllm_says_how_to_get_it(workdir):
    from trainer.verl.rehearsal import gpu_extra_missing, vllm_args_check

    if gpu_extra_missing() is None:
        pytest.skip("vLLM is importable here (the gpu extra): the engine test covers it")
    c = vllm_args_check(composed("configs/train_single_node.yaml"), object())
    assert c.skipped and c.ok and c.detail == gpu_extra_missing()
    assert ("vllm not installed (bash scripts/setup_node.sh" in c.detail or
            "vLLM's CPU build here (the cpu extra), not the gpu extra's (bash scripts/setup_node.sh" in c.detail)


def test_the_launch_says_the_rehearsal_was_skipped_and_why(capsys, tmp_path):
    """Without the gpu extra, DRY_RUN=strict and true print why the rehearsal did not run, after
    the preflight; with it, DRY_RUN=true still leaves it to strict."""
    from trainer.verl.rehearsal import gpu_extra_missing

    env = {**BASE_ENV, "CONFIG": "configs/cpu_smoke.yaml", "SMOKE_DIR": str(tmp_path), "CKPT_DIR": str(tmp_path / "ck")}
    missing = gpu_extra_missing()
    for mode in ("true", "strict"):
        rc = main([], {**env, "DRY_RUN": mode})
        out = capsys.readouterr().out.splitlines()
        if missing is None and mode == "strict":
            assert "# rehearsal (trainer/verl/rehearsal.py): what a GPU start-up does first, run here without a GPU" in out
            continue
        assert rc == 0
        (line,) = [x for x in out if x.startswith("# rehearsal")]
        assert line == f"# rehearsal: skipped ({missing or 'DRY_RUN=strict runs it'})"
        assert out.index(line) > out.index("# preflight") and not any(x.startswith("ok    rehearsal") for x in out)
    if missing:
        assert "bash scripts/setup_node.sh" in missing


# --- the NVIDIA driver (preflight) -----------------------------------------------------------

@pytest.mark.parametrize("have,need,ok", [
    ("580.65.06", "580.65.06", True), ("580.95.05", "580.65.06", True), ("590.44.01", "580.65.06", True),
    ("580.9.1", "580.65.06", False),  # numeric, not lexical: 9 < 65
    ("575.57.08", "580.65.06", False), ("570.124.06", "580.65.06", False), ("1000.1", "580.65.06", True),
    ("580.65", "580.65.06", False), ("580.65.06.1", "580.65.06", True), ("", "580.65.06", False),
    ("N/A", "580.65.06", False), ("525.60.13", "525.60.13", True),
])
def test_driver_versions_compare_part_by_part(have, need, ok):
    assert pf.driver_at_least(have, need) is ok


def test_the_driver_floor_is_the_locked_torchs_cuda_major():
    """The locked torch 2.13.0 (PyPI) is a CUDA 13.0 build (its nvidia-*-cu13 wheels): driver >= 580.65.06."""
    lock = (ROOT / "uv.lock").read_text(encoding="utf-8")
    torch_entry = lock.split('\nname = "torch"\nversion = "2.13.0"\n', 1)[1].split("\n[[package]]", 1)[0]
    assert '"nvidia-nccl-cu13"' in torch_entry and "-cu12" not in torch_entry
    version, cuda = pf.torch_cuda()
    assert version.startswith("2.13.0") and cuda == "13.0"
    assert pf.DRIVER_FOR_CUDA[13] == "580.65.06"


def test_the_driver_check_reads_the_node_and_is_skipped_without_nvidia_smi(monkeypatch):
    old = pf.driver_check({"NODE_DRIVER": "570.124.06"})
    assert not old.ok and old.site and "needs driver >= 580.65.06" in old.detail and "570.124.06" in old.detail
    assert pf.driver_check({"NODE_DRIVER": "580.95.05"}).ok
    calls = []

    def smi(args, **kw):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, stdout="580.95.05\n575.57.08\n", stderr="")

    monkeypatch.setattr(pf.subprocess, "run", smi)
    two = pf.driver_check({})
    assert not two.ok and "580.95.05, 575.57.08" in two.detail  # one old GPU driver is enough to fail
    assert calls == [["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]]

    def absent(args, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(pf.subprocess, "run", absent)
    none = pf.driver_check({})
    assert none.ok and none.skipped and "no nvidia-smi on this node" in none.detail


# --- the engine test: the gpu extra's environment ----------------------------------------------

GPU_PY = Path(os.environ.get("TBT_GPU_PYTHON", ROOT / ".deps/gpu-env/bin/python"))
gpu_env = pytest.mark.skipif(not GPU_PY.exists() and not os.environ.get("TBT_REQUIRE_GPU_ENV"),
                             reason="gpu extra env not built: bash scripts/setup_engine_tests.sh")
# run in the gpu env: the rehearsal of each config, one process (the imports once)
DRIVER = """
import json, os, sys
from trainer.verl.launch import plan
from trainer.verl.rehearsal import rehearse
from dataclasses import asdict
out = {}
for name, config, cli, env in json.loads(sys.argv[1]):
    run_env = {**os.environ, "CONFIG": config, **env}
    _, cfg, _, extras = plan(cli, run_env)
    out[name] = [asdict(c) for c in rehearse(cfg, env={**run_env, **extras.env})]
print("RESULT " + json.dumps(out))
"""


@pytest.mark.engine
@gpu_env
def test_every_gpu_config_rehearsed_in_the_gpu_env():
    """CI builds the env (scripts/setup_engine_tests.sh, a README command) and sets TBT_REQUIRE_GPU_ENV=1, so there this
    test cannot be skipped. In that env: vLLM parses verl's server arguments for every config,
    nccl resolves (cupy), fla imports for the qwen3_5 family; flash_attention_2 passes where
    flash-attn is built, else fails as a GPU-node build; the smoke on sdpa passes whole."""
    assert GPU_PY.exists(), f"{GPU_PY} missing: run bash scripts/setup_engine_tests.sh"
    runs = [*GPU_CONFIGS, ("gpu_smoke sdpa", "configs/cpu_smoke.yaml",
                           [*GPU_SMOKE[:-2], "actor_rollout_ref.model.use_remove_padding=false",
                            "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"], SMOKE_ENV)]
    r = subprocess.run([str(GPU_PY), "-c", DRIVER, json.dumps(runs)], cwd=ROOT, capture_output=True, text=True,
                       timeout=1200, env={**BASE_ENV, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    results = {name: [pf.Check(**c) for c in checks] for name, checks in json.loads(line[len("RESULT "):]).items()}
    fa_built = subprocess.run([str(GPU_PY), "-c", "import flash_attn"], capture_output=True).returncode == 0
    for name, checks in results.items():
        lines = [c.line() for c in checks]
        args = by_rule(checks, "rehearsal: vLLM server arguments")
        assert args.ok and not args.skipped and "vLLM 0.27.1's FlexibleArgumentParser" in args.detail, lines
        assert by_rule(checks, "rehearsal: weight-sync backend").ok, lines
        assert by_rule(checks, "rehearsal: actor model config").ok, lines
        if name == "gpu_smoke sdpa":
            assert all(c.ok for c in checks), lines  # no compiled kernel needed
            continue
        attn = by_rule(checks, "rehearsal: attention implementation flash_attention_2")
        if fa_built:
            assert attn.ok, lines
        else:
            assert not attn.ok and "needs a GPU-node build: flash-attn" in attn.detail, lines
        flash = ("rehearsal: kernel flash_attn", "rehearsal: verl's unpadding helpers")  # flash-attn's too
        # rehearsed (by_rule finds exactly one: the kernel for every flash config, the unpadding helpers where
        # the trainer unpads, the fully-async configs), each failing exactly where flash-attn is absent
        for rule in flash if name in ASYNC else flash[:1]:
            c = by_rule(checks, rule)
            assert c.ok == fa_built and (fa_built or "needs a GPU-node build: flash-attn" in c.detail), c.line()
        rest = [c for c in checks if not c.ok and c is not attn and c.rule not in flash]
        assert rest == [], [c.line() for c in rest]  # nothing else fails
    for name in ASYNC:
        nccl = by_rule(results[name], "rehearsal: weight-sync backend nccl")
        assert "NCCLCheckpointEngine" in nccl.detail and by_rule(results[name], "rehearsal: kernel cupy").ok
    assert by_rule(results["reference_3x8"], "rehearsal: kernel fla").detail.startswith("imports")
    assert "tensor_parallel_size=4" in by_rule(results["reference_3x8"], "rehearsal: vLLM server arguments").detail


@pytest.mark.engine
@gpu_env
def test_dry_run_strict_runs_the_rehearsal_where_the_gpu_extra_is_installed(tmp_path):
    """scripts/gpu_smoke.sh through scripts/run_train.sh on the gpu env's interpreter: SMOKE_ATTN=sdpa
    runs the rehearsal and passes (exit 0). (The default flash_attention_2 failing as a GPU-node
    build is test_every_gpu_config_rehearsed_in_the_gpu_env's; a strict run's FAIL exiting 1,
    tests/test_launch.py's.)"""
    env = {**BASE_ENV, "TBT_PYTHON": str(GPU_PY), "DRY_RUN": "strict", "SMOKE_DIR": str(tmp_path)}
    sdpa = subprocess.run(["bash", "scripts/gpu_smoke.sh"], cwd=ROOT, env={**env, "SMOKE_ATTN": "sdpa"},
                          capture_output=True, text=True, timeout=900)
    assert sdpa.returncode == 0, sdpa.stdout[-3000:] + sdpa.stderr[-2000:]
    assert "# rehearsal (trainer/verl/rehearsal.py): what a GPU start-up does first, run here without a GPU" in sdpa.stdout
    assert "ok    rehearsal: vLLM server arguments" in sdpa.stdout
