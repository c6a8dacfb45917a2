#!/usr/bin/env bash
# Start the serving proxy in front of vLLM: PORT (8014) -> UPSTREAM (http://127.0.0.1:8001/v1).
#   PORT=8014 UPSTREAM=http://127.0.0.1:8001/v1 FAMILY=hermes bash scripts/launch_sysmerge.sh
# Check it with: curl --fail http://127.0.0.1:8014/readyz   (200 only while the upstream answers)
# RECORD=FILE: also append every completion to FILE as a parity record (tbt parity FILE --against vllm);
#   a relative FILE is relative to the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-8014}"
UPSTREAM="${UPSTREAM:-http://127.0.0.1:8001/v1}"
FAMILY="${FAMILY:-hermes}"
HOST="${HOST:-127.0.0.1}"
[[ "$PORT" =~ ^[0-9]+$ ]] && (( PORT > 0 && PORT < 65536 )) || { echo "error: PORT=$PORT is not a port number" >&2; exit 2; }
[[ "$UPSTREAM" =~ ^https?:// ]] || { echo "error: UPSTREAM=$UPSTREAM is not an http(s) URL" >&2; exit 2; }
if [[ -x .venv/bin/tbt ]]; then TBT=.venv/bin/tbt; else TBT="uv run --frozen tbt"; fi
exec $TBT serve-proxy --upstream "$UPSTREAM" --port "$PORT" --host "$HOST" --family "$FAMILY" ${MODEL:+--model "$MODEL"} ${RECORD:+--record "$RECORD"}
