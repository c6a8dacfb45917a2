#!/usr/bin/env bash
# Build the environment of the gpu extra (`uv sync --extra gpu`: vLLM, cupy, fla-core) on a machine
# without a GPU, for the rehearsal (trainer/verl/rehearsal.py: DRY_RUN=strict runs it where vLLM
# imports) and its engine test (tests/test_rehearsal.py). Everything comes from uv.lock, like the
# project venv, in its own directory (.deps/gpu-env, gitignored; ~8 GB, mostly CUDA wheels).
#
# Left out: flash-attn and causal-conv1d, the gpu extra's two packages PyPI has as sources only.
# They compile with nvcc against torch (hours on a few cores); on a GPU node `uv sync --extra gpu`
# builds them (docs/training-cluster.md, "Before the first cluster run"), and the rehearsal here reports
# them as "needs a GPU-node build". Idempotent: rerun to repair.
#
#   bash scripts/setup_gpu_env.sh            # then: uv run pytest -m engine tests/test_rehearsal.py
#   GPU_ENV=/some/dir bash scripts/setup_gpu_env.sh     (the test reads TBT_GPU_PYTHON=/some/dir/bin/python)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
env="${GPU_ENV:-$root/.deps/gpu-env}"
cd "$root"

UV_PROJECT_ENVIRONMENT="$env" uv sync --quiet --frozen --extra gpu \
    --no-install-package flash-attn --no-install-package causal-conv1d
# the project's verl patches, as the launch applies them before a run
"$env/bin/python" scripts/prepare_verl.py --install >/dev/null
# smoke test: what the rehearsal imports (vLLM's parser, cupy for the nccl weight sync, fla)
"$env/bin/python" - <<'EOF'
import importlib.metadata as md
import cupy, fla  # noqa: F401
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: F401
import verl.checkpoint_engine  # noqa: F401  (verl imports its engines here, each ImportError swallowed)
from verl.checkpoint_engine import CheckpointEngineRegistry
CheckpointEngineRegistry.get("nccl")  # KeyError when cupy does not import
print(f"gpu env ready: vllm {md.version('vllm')}, cupy-cuda13x {md.version('cupy-cuda13x')}, fla-core {md.version('fla-core')}, "
      f"torch {md.version('torch')}; left out: flash-attn, causal-conv1d (built on a GPU node)")
EOF
