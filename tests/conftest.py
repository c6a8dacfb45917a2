"""Test-session settings that must hold before any test module imports its libraries."""

import os

# Ray run under `uv run` copies the whole working directory (the virtualenv included: GBs) into
# every session for its workers unless told not to; a local test cluster needs none of it.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
