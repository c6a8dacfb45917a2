#!/usr/bin/env bash
# What the engine tests (`uv run pytest -m engine`) need beyond `uv sync --extra cpu`, installed
# once; the README's start runs it before them, and so does CI. Idempotent: rerun to repair.
#   - the gpu extra's environment in .deps/gpu-env (scripts/setup_gpu_env.sh: vLLM, cupy, fla-core
#     from uv.lock; ~8 GB), for the start-up rehearsal of every GPU config (tests/test_rehearsal.py);
#   - a headless browser (Debian's chromium) for the HTML report and viewer tests
#     (tests/test_report.py, tests/test_view.py), installed with apt-get where there is none.
#
#   bash scripts/setup_engine_tests.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

bash "$root/scripts/setup_gpu_env.sh"

have_browser() { command -v chromium || command -v chromium-browser || command -v google-chrome || command -v google-chrome-stable; }
if browser="$(have_browser)"; then
  echo "browser ready: $browser"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
  echo "browser ready: $(have_browser) (Debian's chromium, installed now)"
else
  echo "error: no headless browser (chromium, chromium-browser, google-chrome) and no root apt-get to install one:" \
       "install Debian's or your system's chromium, then rerun this script" >&2
  exit 1
fi
