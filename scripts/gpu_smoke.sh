#!/usr/bin/env bash
# The training smoke on one GPU with verl's vLLM rollout: run it before a big launch.
#
#   scripts/gpu_smoke.sh                 (SMOKE_DIR, CKPT_DIR optional)
#   DRY_RUN=true scripts/gpu_smoke.sh    (print the launch and the preparation, start nothing)
#   SMOKE_ATTN=sdpa scripts/gpu_smoke.sh (no flash-attn needed: see below)
#
# The same smoke as configs/cpu_smoke.yaml (2 steps of 2 tasks x 8 episodes, groups of 8,
# token-mean GRPO, the zero-variance filter, member re-runs, a checkpoint every step, the
# smoke-only reward shaping that gives a random model non-zero advantages), with the cluster's
# engines instead of the CPU ones: the CUDA platform, NCCL, verl's vLLM rollout in hybrid mode,
# bf16. The model is the same random-weight tiny Qwen3 (hidden 64, head_dim 64: vLLM-compatible),
# built on the spot, no download. Further arguments are verl overrides.
#
# The actor's attention (SMOKE_ATTN): flash_attention_2 (default) with remove-padding, as the real
# configs run, which needs flash-attn built on the node (`uv sync --extra gpu`); or sdpa, PyTorch's
# own attention on padded rows (use_remove_padding=false), which needs no compiled kernel: for a
# node where flash-attn is not built yet. DRY_RUN=strict with the gpu extra rehearses either
# (docs/training-cluster.md, "Before the first cluster run").
set -euo pipefail
cd "$(dirname "$0")/.."
case "${SMOKE_ATTN:=flash_attention_2}" in
  flash_attention_2) padding=true ;;
  sdpa) padding=false ;;  # verl's packing of rows and Ulysses SP patch only the flash-attention path
  *) echo "error: SMOKE_ATTN=$SMOKE_ATTN: expected flash_attention_2 or sdpa" >&2; exit 2 ;;
esac
SMOKE_DIR=${SMOKE_DIR:-/tmp/tbt-gpu-smoke}
export SMOKE_DIR CKPT_DIR=${CKPT_DIR:-$SMOKE_DIR/checkpoints}
export CONFIG=configs/cpu_smoke.yaml SMOKE_PLATFORM=nvidia SMOKE_DEVICE=cuda
overrides=(
  actor_rollout_ref.rollout.name=vllm
  actor_rollout_ref.rollout.dtype=bfloat16
  actor_rollout_ref.rollout.free_cache_engine=true
  actor_rollout_ref.rollout.gpu_memory_utilization=0.3
  actor_rollout_ref.rollout.load_format=auto
  actor_rollout_ref.rollout.enforce_eager=true
  actor_rollout_ref.actor.fsdp_config.dtype=bfloat16
  actor_rollout_ref.model.use_remove_padding=$padding
  +actor_rollout_ref.model.override_config.attn_implementation=$SMOKE_ATTN
)
exec scripts/run_train.sh "${overrides[@]}" "$@"
