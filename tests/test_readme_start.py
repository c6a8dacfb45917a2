"""The README's start is what CI runs: .ci/run runs the commands of README.md's ```bash start
block, as written and in order, and nothing else before the test command (scripts/readme_start.py
reads the block). Checked on the real files, and by running .ci/run itself over a stand-in README
with a recording `uv` on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from readme_start import NoStart, start_commands  # noqa: E402


def test_the_readme_start_installs_prepares_and_runs_both_suites():
    cmds = start_commands()
    assert cmds[0] == "uv sync --extra cpu && uv run tbt quickstart"
    assert "uv run pytest" in cmds and cmds[-1] == "TBT_CPU_SMOKE=1 uv run pytest -m engine"
    # every script a start command runs is in the repository
    for cmd in cmds:
        for script in re.findall(r"\bscripts/\S+", cmd):
            assert (ROOT / script).is_file(), f"README's start runs {script}, which does not exist"


def test_ci_runs_the_readme_start_and_sets_nothing_up_before_it():
    """.ci/run's lines before it runs the README's commands: only comments, shell settings, uv's own
    install, variables and the reading of the block; no `uv sync`, no script, no apt-get."""
    text = (ROOT / ".ci" / "run").read_text()
    assert "python3 scripts/readme_start.py" in text
    before = text.split("for cmd in", 1)[0]
    allowed = (r"#", r"set -euo pipefail$", r'cd "\$\(dirname "\$0"\)/\.\."$',
               r"command -v uv >/dev/null 2>&1 \|\| python3 -m pip install --quiet uv$", r"export [A-Z_]+=\S+( [A-Z_]+=\S+)*$",
               r'start="\$\(python3 scripts/readme_start\.py\)"$', r'mapfile -t commands <<< "\$start"$')
    for line in before.splitlines()[1:]:
        line = line.strip()
        assert not line or any(re.match(a, line) for a in allowed), f".ci/run sets up before the README's start: {line!r}"


@pytest.fixture
def ci_copy(tmp_path):
    """.ci/run and scripts/readme_start.py in a scratch repository, a `uv` on PATH that writes its
    arguments to calls.log and exits with $FAKE_UV_RC (0 by default)."""
    (tmp_path / ".ci").mkdir()
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    shutil.copy(ROOT / "scripts" / "readme_start.py", tmp_path / "scripts" / "readme_start.py")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "uv").write_text('#!/bin/sh\necho "uv $*" >> "$CALLS"\n'
                             'case "$*" in *"-m engine"*) exit "${FAKE_UV_RC:-0}";; esac\nexit 0\n')
    (bin_ / "uv").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "CALLS": str(tmp_path / "calls.log")}
    return tmp_path, env


def readme(root: Path, *lines: str) -> None:
    (root / "README.md").write_text("# x\n\n## Start (fresh machine)\n\n```bash\n" + "\n".join(lines)
                                    + "\n```\n\n## Layout\n\n```bash\nuv run not-this\n```\n")


def test_ci_runs_each_readme_command_in_order_then_verifies(ci_copy):
    root, env = ci_copy
    readme(root, "uv sync --extra cpu && uv run tbt quickstart", "# a comment", "", "uv run pytest",
           'echo "TBT_REQUIRE_VLLM=$TBT_REQUIRE_VLLM" >> "$CALLS"', "TBT_CPU_SMOKE=1 uv run pytest -m engine")
    r = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (root / "calls.log").read_text().splitlines() == [
        "uv sync --extra cpu", "uv run tbt quickstart", "uv run pytest", "TBT_REQUIRE_VLLM=1",
        "uv run pytest -m engine", "uv sync --frozen --extra cpu", "uv run python scripts/verify_verl_install.py"]
    assert "+ uv run pytest\n" in r.stderr  # each command is echoed as it starts


def test_ci_stops_at_the_first_failing_command_with_its_exit_code(ci_copy):
    root, env = ci_copy
    readme(root, "uv run pytest", "TBT_CPU_SMOKE=1 uv run pytest -m engine", "uv run never")
    r = subprocess.run(["bash", str(root / ".ci" / "run")], env={**env, "FAKE_UV_RC": "5"}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 5
    assert "selected no tests" in r.stderr
    assert (root / "calls.log").read_text().splitlines() == ["uv run pytest", "uv run pytest -m engine"]


def test_a_readme_without_a_start_block_stops_ci_naming_the_file(ci_copy, tmp_path):
    root, env = ci_copy
    (root / "README.md").write_text("# x\n\n## Start\n\nno block here\n\n## Layout\n\n```bash\nuv run x\n```\n")
    with pytest.raises(NoStart, match=r"README.md:3: the start section has no ```bash block"):
        start_commands(root / "README.md")
    r = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "README.md:3: the start section has no ```bash block" in r.stderr
    assert not (root / "calls.log").exists()
