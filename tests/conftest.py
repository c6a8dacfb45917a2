"""Test-session settings that must hold before any test module imports its libraries."""

import os

# Ray run under `uv run` copies the whole working directory (the virtualenv included: GBs) into
# every session for its workers unless told not to; a local test cluster needs none of it.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


import pytest  # noqa: E402

from fakes import Endpoint  # noqa: E402

_PATCH_NOTE = pytest.StashKey[str]()


def pytest_configure(config):
    """The project's patches put into the installed verl before any test module imports it, as
    `scripts/run_train.sh` does before every launch (idempotent: a patched verl is left as it is).
    Many tests run verl's patched modules, and a fresh `uv sync` (or `uv sync --reinstall`) leaves
    verl's stock files. Done once, by the process that starts the run (with pytest-xdist, before
    its workers start): nothing imports verl while its files change. A verl the patches must not
    touch (another version, a file edited by hand) stops the run here, naming the file and the fix."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    from trainer.verl.patching import PatchError, apply_all, site_of_installed, states

    try:
        site = site_of_installed()
        before = sum(s.state == "applied" for s in states(site))
        after = apply_all(site)
    except PatchError as e:
        pytest.exit(f"tests/conftest.py: the project's verl patches cannot go into the installed verl: {e}\n"
                    "fix: `uv sync --reinstall-package verl`, then `uv run python scripts/prepare_verl.py --install`",
                    returncode=4)
    applied = len(after) - before
    config.stash[_PATCH_NOTE] = (f"verl patches: {len(after)} in force in {site / 'verl'}"
                                 + (f" ({applied} applied now, as scripts/prepare_verl.py --install does)" if applied else ""))


def pytest_report_header(config):
    note = config.stash.get(_PATCH_NOTE, None)
    return [note] if note else []


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


@pytest.fixture(scope="session")
def lora_smoke(tmp_path_factory) -> dict:
    """The CPU LoRA smoke on verl's vLLM rollout (configs/cpu_smoke_lora.yaml: 2 steps, then a
    second launch to step 3), run once for the engine tests that read it: tests/test_train_on_cpu.py
    and tests/test_vllm_rollout_on_cpu.py."""
    from test_train_on_cpu import run_lora_smoke

    return run_lora_smoke(tmp_path_factory)

