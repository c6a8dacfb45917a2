"""LoRA steps of verl FSDP checkpoints: the adapter folded into a merged model, or exported alone.

verl 0.9.0 saves a LoRA actor (actor_rollout_ref.model.lora_rank > 0) as its PEFT model: the model
shards hold the base weights (`base_model.model.<module>.base_layer.weight`) and the adapter
(`...<module>.lora_A.default.weight`, `lora_B`), `actor/lora_train_meta.json` its r and lora_alpha.
verl's merger writes such a step's Hugging Face model with the base weights only and the adapter
beside it (TARGET/lora_adapter): `tbt checkpoint merge` folds it in (`fold_adapter_into`: W + scale *
B @ A, in float32, stored in the model's dtype), or builds the whole model in float32 from the
shards (`full_precision_lora_model`), or writes the adapter alone in PEFT's layout
(`adapter_from_step`, `write_adapter`) for vLLM's `--lora-modules` and `PeftModel.from_pretrained`.
Verifying a step (its meta, its adapter keys) is trainer/verl/checkpoint.py's. torch, safetensors
and transformers are imported where a function needs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from trainer.verl.checkpoint import LORA_META, WEIGHT_FILES, is_adapter_key, read_lora_meta

PEFT_PREFIX = "base_model.model."
ADAPTER_DIR = "lora_adapter"  # where verl's merger writes a LoRA step's adapter, inside its target
ADAPTER_KEY_RE = re.compile(r"^base_model\.model\.(.+)\.lora_([AB])\.weight$")
# adapter_config.json settings a fold of W + scale * B @ A cannot honour (each with why)
ADAPTER_REFUSED = MappingProxyType({
    "use_dora": "DoRA rescales each output column by a learned magnitude",
    "fan_in_fan_out": "the base layer stores its weight transposed (Conv1D)",
    "rank_pattern": "per-module ranks",
    "alpha_pattern": "per-module alphas",
    "lora_bias": "the adapter trains a bias",
    "modules_to_save": "modules trained in full beside the adapter",
    "target_parameters": "LoRA on parameters (not modules)",
})


class AdapterError(ValueError):
    """A LoRA adapter that cannot be folded or exported as asked (the message names the file)."""


@dataclass
class Adapter:
    """A PEFT LoRA adapter: per adapted module (its name in the model, `model.layers.0.self_attn.q_proj`)
    the pair (A: r x in, B: out x r), and the scale its update is applied with: W + scale * B @ A."""

    r: int
    lora_alpha: float
    use_rslora: bool
    modules: dict  # module -> (A, B)
    config: dict
    source: str

    @property
    def scale(self) -> float:
        return self.lora_alpha / (self.r ** 0.5 if self.use_rslora else self.r)

    @property
    def target_modules(self) -> list[str]:
        return sorted({m.rsplit(".", 1)[-1] for m in self.modules})

    def summary(self) -> str:
        dtypes = sorted({str(t.dtype).removeprefix("torch.") for ab in self.modules.values() for t in ab})
        rs = " (rsLoRA: alpha / sqrt(r))" if self.use_rslora else ""
        return (f"{len(self.modules)} modules ({', '.join(self.target_modules)}), r {self.r}, alpha "
                f"{self.lora_alpha:g}, scale {self.scale:g}{rs}, {'/'.join(dtypes)}")


def parse_adapter(config: dict, tensors: dict, source: str) -> Adapter:
    """An `Adapter` from a PEFT adapter_config.json's content and adapter_model.safetensors' tensors
    (PEFT names: `base_model.model.<module>.lora_A.weight`); `AdapterError` for anything but plain
    LoRA on linear layers (DoRA, embedding LoRA, per-module ranks, ...): folding it as W + scale * B @ A
    would give a model that is not the adapter's."""
    cfg = f"{source}/adapter_config.json"
    peft_type = str(config.get("peft_type") or "LORA")
    if peft_type.upper() != "LORA":
        raise AdapterError(f"{cfg}: peft_type {peft_type}, not LORA")
    for key, why in ADAPTER_REFUSED.items():
        if config.get(key) not in (None, False, {}, [], "none"):
            raise AdapterError(f"{cfg}: {key} {config[key]!r} ({why}): only plain LoRA folds into the weights")
    if config.get("bias", "none") != "none":
        raise AdapterError(f"{cfg}: bias {config['bias']!r} (the adapter trains biases): only plain LoRA folds")
    r, alpha = config.get("r"), config.get("lora_alpha")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise AdapterError(f"{cfg}: r {r!r} is not a positive integer")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha <= 0:
        raise AdapterError(f"{cfg}: lora_alpha {alpha!r} is not a positive number (the adapter would do nothing)")
    pairs: dict[str, dict[str, object]] = {}
    for key, t in tensors.items():
        m = ADAPTER_KEY_RE.match(key)
        if not m:
            what = ("DoRA's magnitude vector" if "lora_magnitude_vector" in key else
                    "embedding LoRA" if "lora_embedding_" in key else "not a lora_A/lora_B weight")
            raise AdapterError(f"{source}/adapter_model.safetensors: {key} ({what}): only plain LoRA on linear "
                               "layers folds into the weights")
        pairs.setdefault(m.group(1), {})[m.group(2)] = t
    if not pairs:
        raise AdapterError(f"{source}/adapter_model.safetensors: no lora_A/lora_B weights")
    modules = {}
    for module, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise AdapterError(f"{source}/adapter_model.safetensors: {module} has lora_{''.join(ab)} only")
        a, b = ab["A"], ab["B"]
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != r or b.shape[1] != r:
            raise AdapterError(f"{source}/adapter_model.safetensors: {module}: lora_A {tuple(a.shape)}, lora_B "
                               f"{tuple(b.shape)} are not (r, in), (out, r) for r {r}")
        modules[module] = (a, b)
    return Adapter(r=r, lora_alpha=alpha, use_rslora=bool(config.get("use_rslora")), modules=modules,
                   config=config, source=str(source))


def read_adapter(folder: Path) -> Adapter:
    """The PEFT adapter in `folder` (adapter_config.json, adapter_model.safetensors)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        config = json.loads((folder / "adapter_config.json").read_text())
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        raise AdapterError(f"{folder}/adapter_config.json: missing") from None
    except (OSError, UnicodeError, ValueError) as e:
        raise AdapterError(f"{folder}/adapter_config.json: unreadable: {e}") from None
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise AdapterError(f"{weights}: missing")
    return parse_adapter(config, load_file(str(weights)), str(folder))


def fold_into_state(state: dict, adapter: Adapter, dtype=None) -> list[str]:
    """W += scale * B @ A for every adapted module's `<module>.weight` in `state` (a Hugging Face
    state dict), computed in float32 and stored in `dtype` (default: W's own). The modules folded;
    `AdapterError` naming the first one whose weight is missing or of another shape (nothing folded then)."""
    import torch

    plan = []
    for module, (a, b) in adapter.modules.items():
        key = f"{module}.weight"
        w = state.get(key)
        if w is None:
            raise AdapterError(f"{adapter.source}: the adapter adapts {module}, but the model has no {key} "
                               "(a tied weight the merger dropped?)")
        if tuple(w.shape) != (b.shape[0], a.shape[1]):
            raise AdapterError(f"{adapter.source}: {module}: lora_B @ lora_A is {(b.shape[0], a.shape[1])}, "
                               f"{key} is {tuple(w.shape)}")
        plan.append((key, a, b))
    with torch.no_grad():
        for key, a, b in plan:
            w = state[key]
            state[key] = (w.float() + adapter.scale * (b.float() @ a.float())).to(dtype or w.dtype).contiguous()
    return [k.removesuffix(".weight") for k, _, _ in plan]


def model_weight_files(folder: Path) -> dict[str, list[str]]:
    """{safetensors file: its keys} of a Hugging Face model folder (one model.safetensors, or an
    index and its shards); `AdapterError` for one saved otherwise."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files: dict[str, list[str]] = {}
        for key, name in json.loads(index.read_text())["weight_map"].items():
            files.setdefault(name, []).append(key)
        return files
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            return {"model.safetensors": list(f.keys())}
    raise AdapterError(f"{folder}: no model.safetensors (or its index) to fold the adapter into")


def fold_adapter_into(target: Path, adapter: Adapter) -> list[str]:
    """Fold `adapter` into the Hugging Face model in `target`, in place: each safetensors file that
    holds an adapted weight is rewritten (through a temporary file beside it) with W + scale * B @ A,
    computed in float32 and stored in W's dtype. Every adapted module must be there (checked before a
    file is touched). The modules folded."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    target = Path(target)
    files = model_weight_files(target)
    where = {k: name for name, keys in files.items() for k in keys}
    missing = [m for m in adapter.modules if f"{m}.weight" not in where]
    if missing:
        raise AdapterError(f"{adapter.source}: the adapter adapts {missing[0]}"
                           + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else "")
                           + f", but {target} has no {missing[0]}.weight (a tied weight the merger dropped?)")
    folded: list[str] = []
    for name in sorted({where[f"{m}.weight"] for m in adapter.modules}):
        path = target / name
        with safe_open(str(path), "pt") as f:
            metadata = f.metadata() or {"format": "pt"}
        tensors = load_file(str(path))
        part = Adapter(adapter.r, adapter.lora_alpha, adapter.use_rslora,
                       {m: ab for m, ab in adapter.modules.items() if where[f"{m}.weight"] == name},
                       adapter.config, adapter.source)
        folded += fold_into_state(tensors, part)
        tmp = path.with_name(f".{path.name}.folding")
        save_file(tensors, str(tmp), metadata=metadata)
        os.replace(tmp, path)
    return folded


def load_full_state(actor_dir: Path, world_size: int) -> dict:
    """The full state dict of a step's model shards, each tensor as saved (the FSDP parameters'
    dtype: float32 as trained), by joining every rank's local piece along its `Shard` dim, as verl's
    merger does but without its cast to bfloat16. Only a 1-D mesh (FSDP, no HSDP or TP) is joined;
    `AdapterError` otherwise."""
    import logging
    import warnings

    import torch
    from torch.distributed.tensor import DTensor, Replicate, Shard

    actor_dir = Path(actor_dir)
    shards = []
    log = logging.getLogger("torch.distributed.device_mesh")  # "unpickling of the DeviceMesh before the PGs"
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for rank in range(world_size):
                path = actor_dir / f"model_world_size_{world_size}_rank_{rank}.pt"
                shards.append(torch.load(path, map_location="cpu", weights_only=False))  # DTensors: as verl's merger
    finally:
        log.setLevel(level)
    state = {}
    for key in shards[0]:
        pieces = [sd[key] for sd in shards]
        first = pieces[0]
        if isinstance(first, DTensor):
            placements = tuple(first.placements)
            if len(placements) != 1:
                raise AdapterError(f"{actor_dir}: {key} is placed {placements} (a mesh of more than one dim: "
                                   "HSDP or TP); only FSDP shards are joined here")
            locals_ = [p._local_tensor for p in pieces]
            if isinstance(placements[0], Shard):
                state[key] = torch.cat(locals_, dim=placements[0].dim)
            elif isinstance(placements[0], Replicate):
                state[key] = locals_[0]
            else:
                raise AdapterError(f"{actor_dir}: {key} is placed {placements[0]}; only Shard/Replicate are joined")
        else:
            state[key] = torch.cat(pieces, dim=0) if world_size > 1 else first  # as verl's merger
    return state


def split_peft_state(state: dict) -> tuple[dict, dict]:
    """(base, adapter) of a PEFT model's state dict: the base under its Hugging Face names
    (`base_model.model.` and `.base_layer` dropped, as verl's merger renames them), the adapter
    under PEFT's saved names (`.default` dropped: `base_model.model.<module>.lora_A.weight`)."""
    base, adapter = {}, {}
    for key, t in state.items():
        if is_adapter_key(key):
            adapter[key.replace(".default.weight", ".weight")] = t
        else:
            base[key.removeprefix(PEFT_PREFIX).replace(".base_layer.weight", ".weight")
                 .replace(".base_layer.bias", ".bias")] = t
    return base, adapter


def adapter_config(meta: dict, target_modules: list[str]) -> dict:
    """adapter_config.json for a verl LoRA step, as PEFT writes it (`LoraConfig(...).to_dict()`,
    enums as their values), from lora_train_meta.json's r / lora_alpha / task_type and the adapted
    modules' names (`q_proj`, ...: what verl's merger and vLLM's `--lora-modules` use)."""
    from peft import LoraConfig

    config = LoraConfig(r=meta["r"], lora_alpha=meta["lora_alpha"], target_modules=target_modules,
                        task_type=meta.get("task_type") or "CAUSAL_LM", bias="none").to_dict()
    for key in ("task_type", "peft_type"):
        config[key] = getattr(config[key], "value", config[key])
    config["target_modules"] = sorted(config["target_modules"])
    config["inference_mode"] = True
    return json.loads(json.dumps(config, default=lambda o: sorted(o) if isinstance(o, set) else str(o)))


def adapter_from_step(actor_dir: Path, world_size: int, state: dict | None = None) -> tuple[Adapter, dict]:
    """(the step's adapter as trained, the base state under Hugging Face names): from the model
    shards (`state`: already loaded) and lora_train_meta.json."""
    actor_dir = Path(actor_dir)
    meta, problem = read_lora_meta(actor_dir / LORA_META)
    if problem:
        raise AdapterError(f"{actor_dir / LORA_META}: {problem}")
    base, tensors = split_peft_state(state if state is not None else load_full_state(actor_dir, world_size))
    if not tensors:
        raise AdapterError(f"{actor_dir}: the model shards hold no adapter (lora_A/lora_B)")
    target_modules = sorted({k.split(".")[-3] for k in tensors})
    adapter = parse_adapter(adapter_config(meta, target_modules), tensors, str(actor_dir))
    return adapter, base


def write_adapter(adapter: Adapter, folder: Path) -> None:
    """A PEFT adapter folder: adapter_config.json and adapter_model.safetensors (the tensors as they
    are, PEFT names), what `PeftModel.from_pretrained(base, folder)` and vLLM's `--lora-modules` load."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"{PEFT_PREFIX}{m}.lora_{x}.weight": t.contiguous()
               for m, (a, b) in adapter.modules.items() for x, t in (("A", a), ("B", b))}
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps(adapter.config, indent=2) + "\n")


def full_precision_lora_model(actor_dir: Path, world_size: int, target: Path) -> tuple[Adapter, list[str]]:
    """A LoRA step's merged model in float32, exact: the base weights and the adapter as trained,
    joined from the model shards (`load_full_state`: the FSDP parameters, float32), the adapter
    folded in float32 (W + scale * B @ A), saved with `save_pretrained` in the model class its
    huggingface/config.json names, with config dtype float32 and the tokenizer, chat template and
    generation config of huggingface/. Not from huggingface/'s saved weights (save_contents
    hf_model): for a PEFT model verl saves the PEFT state there under its PEFT names
    (`base_model.model....base_layer.weight`), which no model class loads, and a run without hf_model
    has none; the shards are there for every step and hold the same values. The adapter and the
    modules folded."""
    import torch
    import transformers

    actor_dir, target = Path(actor_dir), Path(target)
    hf = actor_dir / "huggingface"
    transformers.utils.logging.disable_progress_bar()
    adapter, base = adapter_from_step(actor_dir, world_size)
    base = {k: v.float() for k, v in base.items()}
    folded = fold_into_state(base, adapter, torch.float32)
    config = transformers.AutoConfig.from_pretrained(str(hf), local_files_only=True)
    arch = (config.architectures or ["AutoModelForCausalLM"])[0]
    cls = getattr(transformers, arch, None) or transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = cls._from_config(config, dtype=torch.float32) if hasattr(cls, "_from_config") else cls(config)
    if getattr(config, "tie_word_embeddings", False):  # as verl's drop_tied_target_keys: one copy of a tied weight
        model.tie_weights()
        seen: dict[int, str] = {}
        for name, param in model.named_parameters(remove_duplicate=False):
            if id(param) in seen and seen[id(param)] in base:
                base.pop(name, None)
            seen.setdefault(id(param), name)
    expected = set(model.state_dict())
    unknown = sorted(set(base) - expected)
    if unknown:
        raise AdapterError(f"{actor_dir}: the model shards hold {unknown[0]}"
                           + (f" (+{len(unknown) - 1} more)" if len(unknown) > 1 else "")
                           + f", which {arch} has not")
    model.config.dtype = torch.float32
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target), state_dict=base)
    for f in hf.iterdir():  # tokenizer, chat template, generation config: as saved with the step
        if (f.is_file() and f.name != "config.json" and f.name not in WEIGHT_FILES
                and f.suffix not in (".safetensors", ".bin")):
            shutil.copy2(f, target / f.name)
    return adapter, folded
