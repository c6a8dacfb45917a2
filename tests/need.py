"""What a test needs beyond the default environment, skipped with the command that provides it,
or failed where the environment must provide it (CI sets the TBT_REQUIRE_* variables)."""

from __future__ import annotations

import importlib.util
import os

import pytest


def need_vllm() -> None:
    """vLLM importable: `uv sync --extra cpu` installs its CPU build. Skips without it, unless
    TBT_REQUIRE_VLLM is set, where it fails."""
    if importlib.util.find_spec("vllm") is not None:
        return
    why = "vLLM is not installed in this environment: run `uv sync --extra cpu`"
    if os.environ.get("TBT_REQUIRE_VLLM"):
        pytest.fail(f"{why} (TBT_REQUIRE_VLLM is set, so this test may not skip)")
    pytest.skip(why)
