"""Process-local hooks on verl for the reference model's family, in every process that imports verl.

verl loads the `verl.plugins` entry points of the environment when it is imported (its
`VERL_USE_EXTERNAL_PLUGINS`, default `auto`): pyproject.toml names this module there, so the
driver, verl's TaskRunner and every Ray worker on every node where this project is installed run
`install()` before any of verl's own modules is used, with nothing to set per node. verl swallows a
plugin that fails to import, so `active()` says whether the hooks are in force here, and the launch
checks it (trainer/verl/preflight.py).

The hook:

- **Text-only batches of a multimodal-rotary model get 1-D position ids.** A Qwen3.5 / Qwen3.8
  checkpoint ships a Qwen3-VL processor; verl's agent loop then computes every sample's position
  ids with the model's `get_rope_index`: four rows (the text positions and three multimodal rotary
  rows), image or not. For a text-only sample the three rows are the text positions again, so the
  rotary angles are those of the 1-D ids the model expands itself; but the four-row layout sends
  the batch down verl's multimodal input path, which skips Ulysses slicing (patch 0009 picks the
  path by the batch's inputs, and expects the text layout for a text batch). A sample without
  image or video grids gets `compute_position_id_with_mask`, verl's own 1-D ids; one with them is
  left to verl.

The reference run's other process-local fix, accelerate's `init_on_device` keeping Hugging Face's
`_is_hf_initialized` marker on parameters it re-creates on the meta device (verl builds every
rank but the first there for a model with an untied head), is accelerate's own behaviour from the
locked accelerate 1.15 on: tests/test_hooks.py guards it instead of a hook here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
MARK = "_thinkingbox_text_position_ids"  # set on the wrapped method: the hook is in force
MULTIMODAL_KEYS = ("image_grid_thw", "video_grid_thw", "pixel_values", "pixel_values_videos")


def is_text_only(multi_modal_inputs: Any) -> bool:
    """No image or video in a sample's multimodal inputs (absent, None or empty tensors)."""
    if not multi_modal_inputs:
        return True
    for key in MULTIMODAL_KEYS:
        value = multi_modal_inputs.get(key)
        if value is not None and (not hasattr(value, "numel") or value.numel() > 0):
            return False
    return True


def patch_agent_loop(module: Any) -> None:
    """Wrap `AgentLoopWorker._compute_position_ids` of verl's agent-loop module (idempotent)."""
    worker = module.AgentLoopWorker
    original = worker._compute_position_ids
    if getattr(original, MARK, False):
        return

    def compute_position_ids(self, input_ids, attention_mask, multi_modal_inputs, mm_processor_kwargs=None):
        if is_text_only(multi_modal_inputs):
            return module.compute_position_id_with_mask(attention_mask)
        return original(self, input_ids, attention_mask, multi_modal_inputs, mm_processor_kwargs)

    setattr(compute_position_ids, MARK, True)
    compute_position_ids.__wrapped__ = original
    worker._compute_position_ids = compute_position_ids


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds verl's agent-loop module as Python would, and patches it once it has run."""

    def __init__(self) -> None:
        self.loader: Any = None

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != AGENT_LOOP:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec) if hasattr(self.loader, "create_module") else None

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        patch_agent_loop(module)


def install() -> None:
    """Put the hooks in force in this process (idempotent): now if verl's agent loop is imported,
    else when it is."""
    module = sys.modules.get(AGENT_LOOP)
    if module is not None and hasattr(module, "AgentLoopWorker"):
        patch_agent_loop(module)
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def active() -> bool:
    """Whether the hooks are in force in this process (imports verl's agent loop to see)."""
    import importlib

    module = importlib.import_module(AGENT_LOOP)
    return bool(getattr(module.AgentLoopWorker._compute_position_ids, MARK, False))


install()

__all__ = ["AGENT_LOOP", "MULTIMODAL_KEYS", "active", "install", "is_text_only", "patch_agent_loop"]
