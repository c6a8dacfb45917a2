"""trainer/verl/hooks.py: the reference family's process-local hooks on verl, loaded as a verl plugin
in every process that imports verl; and the reference run's accelerate fix, guarded."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from trainer.verl.tiny import build_tiny_qwen3_5

    return build_tiny_qwen3_5(tmp_path_factory.mktemp("q35") / "model", hidden=32)


def test_importing_verl_puts_the_hooks_in_force_in_a_fresh_process():
    """No import of ours, no variable: verl's own plugin discovery (the `verl.plugins` entry point
    of pyproject.toml) loads the hooks, as it does in every Ray worker."""
    code = ("import sys, verl; assert 'trainer.verl.hooks' in sys.modules, 'not loaded by verl';"
            "from verl.experimental.agent_loop import agent_loop as m;"
            "print(getattr(m.AgentLoopWorker._compute_position_ids, '_thinkingbox_text_position_ids', False))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "True", r.stdout + r.stderr[-3000:]


def _worker(tiny: Path):
    """verl's agent-loop worker as far as `_compute_position_ids` reads it: the processor of a
    Qwen3.5 checkpoint with `get_rope_index` bound the way verl binds it (verl.utils.tokenizer)."""
    from transformers import AutoConfig
    from transformers.models.qwen3_vl import Qwen3VLModel
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    config = AutoConfig.from_pretrained(str(tiny))
    processor = types.SimpleNamespace(config=config, image_token_id=config.image_token_id,
                                      video_token_id=config.video_token_id)
    processor.get_rope_index = types.MethodType(Qwen3VLModel.get_rope_index, processor)
    processor.get_vision_position_ids = types.MethodType(Qwen3VLModel.get_vision_position_ids, processor)
    worker = AgentLoopWorker.__new__(AgentLoopWorker)
    worker.processor = processor
    return worker


def test_a_text_only_sample_gets_verls_1d_positions_and_the_model_reads_them_alike(tiny):
    """verl's own method gives a text-only sample four rows (text + three multimodal rotary rows);
    the hook gives verl's 1-D positions, the first row; the model's logits are the same with
    either (the rotary rows of text are its positions again)."""
    from transformers import AutoModelForImageTextToText
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from trainer.verl import hooks

    hooks.install()
    worker = _worker(tiny)
    ids = torch.randint(0, 5000, (1, 24), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    text = {"mm_token_type_ids": torch.zeros_like(ids)}  # what the processor gives a text-only sample
    stock = AgentLoopWorker._compute_position_ids.__wrapped__(worker, ids, mask, dict(text))
    hooked = worker._compute_position_ids(ids, mask, dict(text))
    assert stock.shape == (1, 4, 24) and hooked.shape == (1, 24)
    assert torch.equal(hooked[0], stock[0, 0]) and all(torch.equal(stock[0, r], stock[0, 0]) for r in (1, 2, 3))
    model = AutoModelForImageTextToText.from_pretrained(str(tiny), dtype=torch.float32).eval()
    with torch.no_grad():
        four = model(input_ids=ids, position_ids=stock.transpose(0, 1)).logits
        one = model(input_ids=ids, position_ids=hooked).logits
    torch.testing.assert_close(one, four, rtol=0, atol=1e-6)


def test_a_sample_with_an_image_keeps_verls_multimodal_positions(tiny):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from trainer.verl import hooks

    hooks.install()
    worker = _worker(tiny)
    cfg = worker.processor.config
    grid = torch.tensor([[1, 4, 4]])  # one image of 4 x 4 patches: 4 tokens after the 2 x 2 merge
    ids = torch.tensor([[1, 2, cfg.vision_start_token_id] + [cfg.image_token_id] * 4 + [cfg.vision_end_token_id, 3, 4]])
    mask = torch.ones_like(ids)
    inputs = {"image_grid_thw": grid, "mm_token_type_ids": (ids == cfg.image_token_id).long()}
    stock = AgentLoopWorker._compute_position_ids.__wrapped__(worker, ids, mask, dict(inputs))
    hooked = worker._compute_position_ids(ids, mask, dict(inputs))
    assert hooked.shape == (1, 4, ids.shape[1]) and torch.equal(hooked, stock)
    assert not torch.equal(stock[0, 1], stock[0, 0])  # the image's rows differ from the text positions


@pytest.mark.parametrize("inputs, text", [(None, True), ({}, True), ({"image_grid_thw": None}, True),
                                          ({"image_grid_thw": torch.zeros(0, 3)}, True),
                                          ({"image_grid_thw": torch.tensor([[1, 2, 2]])}, False),
                                          ({"pixel_values_videos": torch.ones(2, 3)}, False)])
def test_what_counts_as_text_only(inputs, text):
    from trainer.verl.hooks import is_text_only

    assert is_text_only(inputs) is text


def test_installing_twice_wraps_once():
    from verl.experimental.agent_loop import agent_loop

    from trainer.verl import hooks

    hooks.install()
    first = agent_loop.AgentLoopWorker._compute_position_ids
    hooks.install()
    hooks.patch_agent_loop(agent_loop)
    assert agent_loop.AgentLoopWorker._compute_position_ids is first and hooks.active()


def test_meta_init_keeps_the_hf_initialized_marker(tiny):
    """verl builds every rank but the first of an untied model under accelerate's
    `init_empty_weights`; the parameters it re-creates on the meta device keep transformers'
    `_is_hf_initialized` marker (the reference run needed a hook for an accelerate that dropped
    it). Guarded here: a downgrade that loses it fails this test."""
    from accelerate import init_empty_weights

    param = torch.nn.Parameter(torch.ones(2))
    param._is_hf_initialized = True
    with init_empty_weights():
        layer = torch.nn.Module()
        layer.register_parameter("w", param)
    assert layer.w.device.type == "meta" and layer.w._is_hf_initialized is True
