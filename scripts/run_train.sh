#!/usr/bin/env bash
# Launch GRPO training on verl: compose verl's config offline, check it, run it.
#
#   DRY_RUN=true CONFIG=configs/cpu_smoke.yaml scripts/run_train.sh      (print the CPU smoke's launch)
#   uv run tbt quickstart && DRY_RUN=true TRAIN_FILE=$PWD/quickstart/prepared/train.parquet \
#     VAL_FILE=$PWD/quickstart/prepared/test.parquet TBT_USER_API_KEY=EMPTY TBT_JUDGE_API_KEY=EMPTY \
#     TBT_USER_SPEC='openai:http://127.0.0.1:8001/v1#Qwen/Qwen3-8B' \
#     TBT_JUDGE_SPEC='openai:http://127.0.0.1:8002/v1#Qwen/Qwen3-8B' \
#     scripts/run_train.sh trainer.total_training_steps=50 trainer.save_freq=5
#   scripts/run_train.sh [verl overrides...]          (the same without DRY_RUN: against RAY_ADDRESS)
#
# Variables (all optional unless the config needs them): CONFIG (default
# configs/train_single_node.yaml), MODEL_PATH, MODEL_FAMILY (hermes|xml), TRAIN_FILE, VAL_FILE,
# CKPT_DIR, NNODES, GPUS_PER_NODE (config), NODE_GPUS (this node, default nvidia-smi), EXPERIMENT,
# TBT_USER_SPEC / TBT_JUDGE_SPEC (specs as in `tbt run --help`) with their keys in
# TBT_USER_API_KEY / TBT_JUDGE_API_KEY, RAY_ADDRESS.
# DRY_RUN=true prints the command and every resolved override (secrets redacted) and the
# preflight, then exits 0: no Ray, no GPU, no server, no model. The preflight names every problem
# in one run (unset variables, missing files, relative data paths on several nodes, a synthetic
# judge or scripted user outside a smoke config, the topology): FAIL lines, exit 1.
# -h / --help: this text. See docs/training.md.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then
  PY=.venv/bin/python
else
  PY="uv run --frozen python"
fi
exec $PY -m trainer.verl.launch "$@"
