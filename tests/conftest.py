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


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one worker per core for the default run (everything but the
    engine tests); none, one process as before, once a `-m` selects engine tests (`-m engine`,
    `-m ''`): each of those starts a Ray cluster, verl's trainer or vLLM sized for the whole
    machine, and two at once run out of memory. PYTEST_XDIST_AUTO_NUM_WORKERS still decides first."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if (config.option.markexpr or "").strip() != "not engine":
        return 0
    return None
