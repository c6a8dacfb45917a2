#!/usr/bin/env bash
# Set up a GPU node: the gpu extra's environment from uv.lock with its two compiled kernels, the
# patched verl, and every kernel checked. Run it on each node (one command per node); with a uv
# cache on the shared filesystem the kernels compile once per cluster and the other nodes install
# the wheels the first one built.
#
#   bash scripts/setup_node.sh
#   UV_CACHE_DIR=/shared/uv-cache MAX_JOBS=16 FLASH_ATTN_CUDA_ARCHS=90 bash scripts/setup_node.sh
#   ROLE=head NODE_IP=10.0.0.1 GPUS_PER_NODE=8 CONFIG=configs/reference_3x8.yaml CKPT_DIR=/shared/ckpt \
#     bash scripts/setup_node.sh          (then Ray's head here; ROLE=worker HEAD_ADDRESS=... on the others)
#
# Steps, each said as it starts (== N/6), each skipped when already done (idempotent; rerun after a failure
# resumes: uv's cache keeps every wheel built or downloaded):
#   1. uv: present and at least the version pyproject.toml's [tool.uv] required-version names;
#   2. the environment's wheels (everything but flash-attn and causal-conv1d: nothing compiles);
#   3. the prerequisites of the build, all checked before anything compiles, each problem named with
#      its fix (python -m trainer.verl.node_setup check): CUDA toolkit of torch's CUDA major, its
#      cuBLAS / cuSPARSE headers, gcc, ninja, memory for MAX_JOBS nvcc jobs, disk, the driver;
#   4. causal-conv1d, compiled from its locked sdist against the locked torch, then imported;
#   5. flash-attn, likewise (hours on a few cores; tens of minutes with MAX_JOBS=16 and one arch);
#   6. verl's patches (scripts/prepare_verl.py --install), scripts/verify_verl_install.py, and every
#      kernel of the gpu extra imported (python -m trainer.verl.node_setup kernels);
#   7. with ROLE set (head | worker): this node's Ray, through scripts/start_ray.sh and its node
#      checks (its variables: NODE_IP, HEAD_ADDRESS, GPUS_PER_NODE, CONFIG, CKPT_DIR, ...), from
#      this environment; a node that fails a check does not start.
#
# Variables: UV_PROJECT_ENVIRONMENT (the environment, default .venv), UV_CACHE_DIR (shared: build
# once per cluster), CUDA_HOME (default /usr/local/cuda), MAX_JOBS, NVCC_THREADS,
# FLASH_ATTN_CUDA_ARCHS (default 80;90;100;120; 90 for H100/H200), BUILD_TIMEOUT (seconds for
# flash-attn's build: past it the build stops, said as started and not finished, exit 3),
# STOP_AFTER (prerequisites | causal-conv1d: stop after that step, exit 0).
# Exit 0: the node is ready; 1: a step failed (its message says what to do); 2: bad variables.
# -h / --help: this text. See docs/training-cluster.md, "Before the first cluster run".
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
env_dir="${UV_PROJECT_ENVIRONMENT:-$root/.venv}"
export UV_PROJECT_ENVIRONMENT="$env_dir"
py="$env_dir/bin/python"
case "${STOP_AFTER:-}" in "" | prerequisites | causal-conv1d) ;; *) echo "setup_node.sh: STOP_AFTER=${STOP_AFTER}: expected prerequisites or causal-conv1d" >&2; exit 2 ;; esac
if [[ -n ${BUILD_TIMEOUT:-} && ! ${BUILD_TIMEOUT} =~ ^[0-9]+$ ]]; then
  echo "setup_node.sh: BUILD_TIMEOUT=${BUILD_TIMEOUT}: expected a number of seconds" >&2; exit 2
fi
step() { echo "== $*" >&2; }
fail() { echo "setup_node.sh: $*" >&2; exit 1; }
seconds() { echo $(( $(date +%s) - $1 )); }

step "1/6 uv"
command -v uv >/dev/null 2>&1 || fail "uv is not on PATH: install it (python3 -m pip install uv)"
want=$(sed -n 's/^required-version = ">=\([0-9.]*\)"/\1/p' pyproject.toml)
have=$(uv --version | awk '{print $2}')
if [[ -n $want && $(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1) != "$want" ]]; then
  fail "uv $have is older than $want, the first that builds this project's kernels as uv.lock says ([tool.uv] extra-build-dependencies, match-runtime, extra-build-variables): python3 -m pip install -U uv"
fi
echo "uv $have (>= ${want:-any})"

step "2/6 the environment's wheels ($env_dir; nothing compiles)"
uv sync --frozen --inexact --extra gpu --no-install-package flash-attn --no-install-package causal-conv1d

step "3/6 the build's prerequisites"
"$py" -m trainer.verl.node_setup check || fail "fix the FAIL lines above, then rerun (nothing was compiled)"
[[ ${STOP_AFTER:-} == prerequisites ]] && { echo "STOP_AFTER=prerequisites: stopped"; exit 0; }
# where the toolkit lacks cuBLAS / cuSPARSE's headers, the environment's CUDA wheels hold them
include=$("$py" -m trainer.verl.node_setup include)
if [[ -n $include ]]; then
  export CPATH="$include${CPATH:+:$CPATH}" NVCC_APPEND_FLAGS="-I$include${NVCC_APPEND_FLAGS:+ $NVCC_APPEND_FLAGS}"
  echo "include path: $include (the environment's CUDA wheels)"
fi
export PATH="$env_dir/bin:${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"

step "4/6 causal-conv1d (compiled from its locked sdist)"
if "$py" -c "import torch, causal_conv1d_cuda" 2>/dev/null; then  # torch first: its libraries load the extension's
  echo "causal-conv1d: already built and importing"
else
  t0=$(date +%s)
  uv sync --frozen --inexact --extra gpu --no-install-package flash-attn \
    || fail "causal-conv1d did not build (the compiler's output above); rerun after fixing it"
  "$py" -c "import causal_conv1d, causal_conv1d_cuda" || fail "causal-conv1d built but does not import (above)"
  echo "causal-conv1d: built in $(seconds "$t0") s, imports"
fi
[[ ${STOP_AFTER:-} == causal-conv1d ]] && { echo "STOP_AFTER=causal-conv1d: stopped"; exit 0; }

step "5/6 flash-attn (compiled from its locked sdist; archs ${FLASH_ATTN_CUDA_ARCHS:-80;90;100;120}, MAX_JOBS ${MAX_JOBS:-as flash-attn picks})"
if "$py" -c "import torch, flash_attn_2_cuda" 2>/dev/null; then
  echo "flash-attn: already built and importing"
else
  t0=$(date +%s)
  rc=0
  if [[ -n ${BUILD_TIMEOUT:-} ]]; then
    timeout --signal=INT --kill-after=30 "$BUILD_TIMEOUT" uv sync --frozen --inexact --extra gpu || rc=$?
  else
    uv sync --frozen --inexact --extra gpu || rc=$?
  fi
  if [[ $rc -eq 124 || $rc -eq 130 || $rc -eq 137 ]] && [[ -n ${BUILD_TIMEOUT:-} ]]; then
    echo "flash-attn: build started, stopped by BUILD_TIMEOUT after $(seconds "$t0") s, not finished (rerun without it to build)" >&2
    exit 3
  fi
  [[ $rc -eq 0 ]] || fail "flash-attn did not build (the compiler's output above); rerun after fixing it"
  "$py" -c "import flash_attn, flash_attn_2_cuda" || fail "flash-attn built but does not import (above)"
  echo "flash-attn: built in $(seconds "$t0") s, imports"
fi

step "6/6 verl's patches and every kernel"
"$py" scripts/prepare_verl.py --install >/dev/null || fail "verl's patches did not apply (python scripts/prepare_verl.py says why)"
"$py" scripts/verify_verl_install.py || fail "verl is not as the launch needs it (above)"
"$py" -m trainer.verl.node_setup kernels || fail "a kernel does not import (above)"
echo "node ready: $env_dir"
if [[ -n ${ROLE:-} ]]; then
  step "7/7 this node's Ray (ROLE=$ROLE): scripts/start_ray.sh"
  RAY="$env_dir/bin/ray" exec bash scripts/start_ray.sh "$@"
fi
