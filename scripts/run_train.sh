#!/usr/bin/env bash
# Launch GRPO training on verl: compose verl's config offline, check it, run it.
#
#   DRY_RUN=true scripts/run_train.sh trainer.total_training_steps=50 trainer.save_freq=5
#   scripts/run_train.sh [verl overrides...]          (against RAY_ADDRESS)
#
# Variables (all optional unless the config needs them): CONFIG (default
# configs/train_single_node.yaml), MODEL_PATH, MODEL_FAMILY (hermes|xml), TRAIN_FILE, VAL_FILE,
# CKPT_DIR, NNODES, GPUS_PER_NODE (config), NODE_GPUS (this node, default nvidia-smi), EXPERIMENT, TBT_USER_SPEC / TBT_JUDGE_SPEC (specs as in
# `tbt run --help`) with their keys in TBT_USER_API_KEY / TBT_JUDGE_API_KEY, RAY_ADDRESS.
# DRY_RUN=true prints the command and every resolved override (secrets redacted) and the
# preflight, then exits 0: no Ray, no GPU, no server, no model. See docs/training.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then
  PY=.venv/bin/python
else
  PY="uv run --frozen python"
fi
exec $PY -m trainer.verl.launch "$@"
