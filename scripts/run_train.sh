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
# TBT_USER_API_KEY / TBT_JUDGE_API_KEY, RAY_ADDRESS, NODE_DRIVER (this node's NVIDIA driver,
# default nvidia-smi), TBT_PYTHON (the interpreter: default .venv/bin/python, else uv run; e.g. the
# environment `uv sync --extra gpu` made elsewhere through UV_PROJECT_ENVIRONMENT).
# DRY_RUN=true prints the command and every resolved override (secrets redacted), the preflight
# and the patches, and starts nothing: no Ray, no GPU, no server, no model. The preflight names
# every problem in one run. A config check (the topology, batch sizes, the checkpoint directory,
# relative data paths on several nodes) that fails is a FAIL line: exit 1. An input of the launch
# site (an unset variable, a missing file, a synthetic judge or scripted user outside a smoke
# config, an endpoint's key variable) is a need line, and the dry run exits 0 with a last line
# naming what a launch here would still need. DRY_RUN=strict fails on those too (FAIL lines,
# exit 1), as a real launch does: run it on the launch node just before launching; where the gpu
# extra is installed it also runs the rehearsal (trainer/verl/rehearsal.py). Empty, false,
# 0 or no: a real launch (any failed check: FAIL lines, exit 1); another value: exit 2.
# On a Ray cluster (RAY_ADDRESS set, or several nodes) every node is checked before verl starts:
# patched verl as this node's, hooks, inputs, the shared checkpoint directory, endpoints (docs/training-cluster.md,
# "A multi-node launch"); a node that is not ready is named and nothing starts (exit 1).
# -h / --help: this text. See docs/training-cluster.md.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
cd "$(dirname "$0")/.."
if [[ -n ${TBT_PYTHON:-} ]]; then
  PY=$TBT_PYTHON
elif [[ -x .venv/bin/python ]]; then
  PY=.venv/bin/python
else
  PY="uv run --frozen python"
fi
exec $PY -m trainer.verl.launch "$@"
