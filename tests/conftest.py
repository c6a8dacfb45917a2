"""Test-session settings that must hold before any test module imports its libraries."""

import os

# Ray run under `uv run` copies the whole working directory (the virtualenv included: GBs) into
# every session for its workers unless told not to; a local test cluster needs none of it.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


import pytest  # noqa: E402

from fakes import Endpoint  # noqa: E402


@pytest.fixture
def endpoints():
    """Makes real local OpenAI-compatible endpoints (tests/fakes.py) and stops them after the test."""
    made: list[Endpoint] = []

    def make(answer):
        made.append(Endpoint(answer))
        return made[-1]

    yield make
    for e in made:
        e.stop()
