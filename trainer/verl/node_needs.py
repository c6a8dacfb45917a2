"""What a config needs on a node beyond verl and this project, checked there before verl starts:
the launch node's before a single-node launch (trainer/verl/launch.py), every node's on a Ray
cluster (trainer/verl/nodes.py, in a task pinned to each node; scripts/start_ray.sh on its own
node before Ray starts there). Each failure names what is missing and its fix:

- **compiled kernels** the config needs import there: flash_attn for flash attention (verl's
  default), fla and causal_conv1d for the qwen3_5 family on GPUs (and fla with Ulysses SP > 1
  anywhere), cupy for the `nccl` weight sync (trainer/verl/rehearsal.py's `kernels_named`);
- **the tracker can start**: with wandb among `trainer.logger`, a key on the node
  (`WANDB_API_KEY`, or `wandb login`'s ~/.netrc) or a `WANDB_MODE` of offline / disabled, which the
  launch gives every worker (trainer/verl/tracker.py); verl's TaskRunner calls `wandb.init` on
  whichever node Ray places it;
- **the JIT tools on the workers' PATH**: a vLLM rollout on GPUs JIT-compiles FlashInfer's kernels
  with ninja and nvcc, found on the PATH the node's Ray workers were started with;
- **room for the kept checkpoints**: the free space of the checkpoint directory against the saves
  kept (`trainer.max_actor_ckpt_to_keep`, else every save of the run) times one save's size: the
  model's parameters (from its safetensors headers) in fp32 plus Adam's two fp32 moments.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainer.verl.preflight import cfg_get, cfg_int, local_path
from trainer.verl.tracker import WANDB_LOCAL, loggers, wandb_key_here

GB = 1e9
QWEN3_5 = ("qwen3_5", "qwen3_5_moe")
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                     "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


@dataclass(frozen=True)
class Needs:
    """What a config needs on every node (sent to each node's check; plain values only)."""

    kernels: tuple[tuple[str, str], ...] = ()  # (import name, why the config needs it)
    wandb: bool = False  # wandb is among trainer.logger
    tools: tuple[tuple[str, str], ...] = ()  # (executable on PATH, why)
    ckpt_dir: str = ""  # the checkpoint directory ("" or relative: not checked)
    ckpt_bytes: int = 0  # the kept saves' total size (0: unknown here)
    ckpt_why: str = ""  # how ckpt_bytes was reckoned


def model_type(cfg: Any) -> str:
    """The actor's model_type: its config.json where the model is here, else the family's stand-in."""
    from trainer.verl.rehearsal import stand_in_family

    path = str(cfg_get(cfg, "actor_rollout_ref.model.path", "") or "")
    local = local_path(path) if path else None
    if local is not None and (local / "config.json").is_file():
        try:
            return str(json.loads((local / "config.json").read_text(encoding="utf-8")).get("model_type", ""))
        except (OSError, ValueError):
            pass
    return stand_in_family(cfg)


def on_gpus(cfg: Any) -> bool:
    return str(cfg_get(cfg, "trainer.device", "cuda") or "cuda") != "cpu"


def kernels_needed(cfg: Any) -> list[tuple[str, str]]:
    """(import name, why) of every compiled kernel the config needs: those the rehearsal requires,
    and on GPUs the qwen3_5 family's two (the torch fallbacks are for CPU runs, far too slow at the
    reference run's context)."""
    from trainer.verl.rehearsal import kernels_named

    kind = model_type(cfg)
    gpu = on_gpus(cfg)
    out = []
    for module, why, required in kernels_named(cfg, kind):
        if required or (gpu and kind in QWEN3_5 and module in ("fla", "causal_conv1d")):
            out.append((module, why if required else f"{why} (required on GPUs)"))
    return out


def tools_needed(cfg: Any) -> list[tuple[str, str]]:
    if not on_gpus(cfg) or str(cfg_get(cfg, "actor_rollout_ref.rollout.name", "")) != "vllm":
        return []
    why = "vLLM's FlashInfer kernels are JIT-compiled on the node at first use"
    return [("ninja", why), ("nvcc", why)]


def parameter_count(model_dir: Path) -> int | None:
    """The parameters of the safetensors files in `model_dir`, read from their headers (None: none here)."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        try:
            with f.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(min(size, 100_000_000)))
            shapes = [t["shape"] for name, t in header.items() if name != "__metadata__"]
        except (OSError, ValueError, struct.error, KeyError, TypeError, AttributeError):
            return None  # not a safetensors file this can read: the save is not sized (and the load will say why)
        for shape in shapes:
            n = 1
            for d in shape:
                n *= d
            total += n
    return total


def checkpoint_need(cfg: Any) -> tuple[str, int, str]:
    """(the checkpoint directory, the bytes its kept saves need, how that was reckoned)."""
    ckpt = str(cfg_get(cfg, "trainer.default_local_dir", "") or "")
    save_freq, steps = cfg_int(cfg, "trainer.save_freq"), cfg_int(cfg, "trainer.total_training_steps")
    if not ckpt or save_freq <= 0:
        return ckpt, 0, "no saves (trainer.save_freq <= 0)"
    keep = cfg_get(cfg, "trainer.max_actor_ckpt_to_keep")
    saves = steps // save_freq if steps > 0 else 0
    kept = int(keep) if isinstance(keep, int) and keep > 0 else saves
    how_kept = (f"trainer.max_actor_ckpt_to_keep={keep}" if isinstance(keep, int) and keep > 0
                else f"every save kept: {steps} steps / save_freq {save_freq}")
    path = str(cfg_get(cfg, "actor_rollout_ref.model.path", "") or "")
    n = parameter_count(local_path(path)) if path and local_path(path).is_dir() else None
    if n is None or kept <= 0:
        return ckpt, 0, f"{path or 'the model'}: no safetensors here to size a save from"
    lora = cfg_int(cfg, "actor_rollout_ref.model.lora_rank") > 0
    contents = [str(x) for x in (cfg_get(cfg, "actor_rollout_ref.actor.checkpoint.save_contents", None)
                                 or ["model", "optimizer", "extra"])]
    per_param = 4 * ("model" in contents) + (0 if lora else 8) * ("optimizer" in contents) + 2 * ("hf_model" in contents)
    one = n * per_param
    why = (f"{kept} save(s) kept ({how_kept}) x {one / GB:.1f} GB a save ({n / 1e9:.2f}B parameters x {per_param} B: "
           + ("fp32 parameters" if "model" in contents else "")
           + ("" if lora or "optimizer" not in contents else " and Adam's two fp32 moments")
           + (" and the bf16 hf_model" if "hf_model" in contents else "") + ")")
    return ckpt, kept * one, why


def needs_of(cfg: Any) -> Needs:
    ckpt, need, why = checkpoint_need(cfg)
    return Needs(kernels=tuple(kernels_needed(cfg)), wandb="wandb" in loggers(cfg), tools=tuple(tools_needed(cfg)),
                 ckpt_dir=ckpt, ckpt_bytes=need, ckpt_why=why)



def need_problems(needs: Needs, env: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of `needs` on this node, in this process's environment."""
    from trainer.verl.rehearsal import importable, where_from

    env = os.environ if env is None else env
    problems: list[str] = []
    notes: list[str] = []
    for module, why in needs.kernels:
        ok, error = importable(module)
        if ok:
            notes.append(f"kernel {module} imports")
        else:
            problems.append(f"kernel {module} does not import here ({why}): {error}; {where_from(module)}")
    if needs.wandb:
        mode = str(env.get("WANDB_MODE", "") or "online")
        if mode in WANDB_LOCAL:
            notes.append(f"wandb {mode}")
        elif wandb_key_here(env):
            notes.append(f"wandb {mode} with a key")
        else:
            problems.append(f"tracker: trainer.logger has wandb, WANDB_MODE is {mode} here and no wandb key is here "
                            "(verl's trainer process starts wandb on whichever node Ray places it): set WANDB_API_KEY in "
                            "this node's environment before its scripts/start_ray.sh, or run `wandb login` on it; "
                            "or launch with WANDB_MODE=offline (the launch gives it to every worker)")
    path = env.get("PATH", "")
    for tool, why in needs.tools:
        if shutil.which(tool, path=path):
            notes.append(f"{tool} on PATH")
        else:
            problems.append(f"{tool} is not on the PATH of this node's workers ({why}): start the node's Ray with "
                            "scripts/start_ray.sh, which puts the environment's bin/ (ninja) and $CUDA_HOME/bin (nvcc) "
                            "on PATH, after bash scripts/setup_node.sh")
    if needs.ckpt_dir.startswith("/") and needs.ckpt_bytes > 0:
        where = Path(needs.ckpt_dir)
        while not where.exists() and where != where.parent:
            where = where.parent
        free = shutil.disk_usage(where).free
        if free < needs.ckpt_bytes:
            problems.append(f"checkpoint directory {needs.ckpt_dir}: {needs.ckpt_bytes / GB:.1f} GB needed, "
                            f"{free / GB:.1f} GB free on {where}'s filesystem ({needs.ckpt_why}): free space there, "
                            "lower trainer.max_actor_ckpt_to_keep, or set CKPT_DIR to a larger filesystem")
        else:
            notes.append(f"checkpoint space {needs.ckpt_bytes / GB:.1f} of {free / GB:.1f} GB free")
    return problems, notes


def describe(needs: Needs) -> list[str]:
    """What a node's check of `needs` would check (DRY_RUN)."""
    lines = [f"kernel {m} imports ({why})" for m, why in needs.kernels]
    if needs.wandb:
        lines.append("wandb can start: WANDB_MODE offline/disabled (the launch forwards it), or a key on the node")
    lines += [f"{t} on the workers' PATH ({why})" for t, why in needs.tools]
    if needs.ckpt_dir.startswith("/") and needs.ckpt_bytes > 0:
        lines.append(f"checkpoint directory {needs.ckpt_dir} has {needs.ckpt_bytes / GB:.1f} GB free ({needs.ckpt_why})")
    elif needs.ckpt_dir:
        lines.append(f"checkpoint space not checked: {needs.ckpt_why}")
    return lines


__all__ = ["GB", "Needs", "checkpoint_need", "describe", "kernels_needed", "model_type", "need_problems", "needs_of",
           "parameter_count", "tools_needed"]
