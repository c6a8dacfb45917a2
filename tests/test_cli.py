"""`tbt` as a new user meets it: every example that any `--help` prints runs (exit 0) on the
repository's own data, and bad input ends in one clear message and exit 2, never a traceback.

The examples are read from the rendered help (what a user copies), not from the source: an
example that click rewrapped into a paragraph is not found, and that command then fails
`test_every_command_shows_examples_line_by_line`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import sys
from pathlib import Path

import pytest
import httpx
import typer
from typer.testing import CliRunner

from trainer.cli import app
from trainer.core.parity import default_vllm_python

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
VLLM_PY = default_vllm_python() or Path("vllm-not-installed")  # $TBT_VLLM_PYTHON, else this Python where vLLM is
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


# ---------------------------------------------------------------------------- help examples

def command_paths(group, path: tuple[str, ...] = ()):
    """(path, is_group) for every command under `group`: (("tasks",), True), (("tasks", "list"), False), ..."""
    for name, cmd in group.commands.items():
        sub = getattr(cmd, "commands", None)  # a group (typer vendors its own click: no isinstance)
        yield path + (name,), sub is not None
        if sub is not None:
            yield from command_paths(cmd, path + (name,))


def examples(help_text: str) -> list[str]:
    """Lines starting with `tbt ` in an "Examples:" block, or one after "Example:" / "e.g." on
    its line; a trailing comment (two spaces, then `(` or `#`) is not part of the command. A line
    holding two commands is a rewrapped paragraph: nothing is read from it."""
    found, in_block = [], False
    for line in help_text.splitlines():
        s = line.strip()
        inline = re.search(r"(?:\bExample:|\be\.g\.)\s*(tbt .*)", s)
        if inline and " tbt " not in inline.group(1):
            found.append(inline.group(1))
        elif re.match(r"Examples?\b[^:]*:$", s):
            in_block = True
        elif in_block and s.startswith("tbt ") and " tbt " not in s:
            found.append(s)
        elif in_block and s:
            in_block = False
    return [re.split(r"\s{2,}[(#]", ex)[0].strip() for ex in found]


PATHS = [((), True), *command_paths(typer.main.get_command(app))]
HELP = {path: invoke(*path, "--help").output for path, _ in PATHS}
LEAVES = [path for path, is_group in PATHS if not is_group]
EXAMPLES = sorted({ex for text in HELP.values() for ex in examples(text)})


def help_id(path: tuple[str, ...]) -> str:
    return " ".join(("tbt",) + path)


@pytest.mark.parametrize("path", LEAVES, ids=help_id)
def test_every_command_shows_examples_line_by_line(path):
    text = HELP[path]
    assert "Traceback" not in text
    found = examples(text)
    assert found, f"`{help_id(path)} --help` shows no example on a line of its own:\n{text}"
    assert all(ex.split()[1:1 + len(path)] == list(path) for ex in found), found
    assert not re.search(r"\w- \w", "\n".join(found)), f"a word split by rewrapping: {found}"


def test_top_level_epilog_lists_every_command():
    groups = {path[0] for path, is_group in PATHS if is_group and path}  # tasks, checkpoint
    listed = {tuple(ex.split()[1:3]) if ex.split()[1] in groups else (ex.split()[1],)
              for ex in examples(HELP[()])}
    assert listed == set(LEAVES)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("examples")
    (d / "data").symlink_to(ROOT / "data")
    (d / "tests").symlink_to(ROOT / "tests")  # fixtures that examples read (tbt report)
    return d


def vllm_engine(example: str):
    """The example as a parameter; one that runs vLLM's own parsers (their environment) or verl's
    model merger (a verl process loading FSDP shards) is an engine test."""
    argv = shlex.split(example)[1:]
    merger = argv[:2] == ["checkpoint", "merge"] and not {"--full-precision", "--adapter-only"} & set(argv)  # no merger run
    engine = (argv[0] == "parity" and "vllm" in argv) or merger
    return pytest.param(example, marks=pytest.mark.engine) if engine else example


@pytest.mark.parametrize("example", [vllm_engine(ex) for ex in EXAMPLES], ids=EXAMPLES)
def test_help_example_runs(example, run_dir):
    argv = shlex.split(example)[1:]
    if argv[0] == "quickstart" and "--train" in argv:
        # verl's trainer on CPU: tests/test_quickstart_train.py runs the short example as shown (engine,
        # TBT_CPU_SMOKE=1); the default one and its control (~1 h each on 2 cores) are the runs
        # docs/training.md and bench/learning.py measure
        assert "--n 2 --train --steps 1 --k 4" in " ".join(argv) or argv in (
            ["quickstart", "--train", "--json"], ["quickstart", "--train", "--control", "--json"],
            ["quickstart", "--train", "--lora", "--json"]), argv
        pytest.skip("verl's trainer: run by tests/test_quickstart_train.py (TBT_CPU_SMOKE=1) or measured in docs")
    if argv[0] == "serve-domain":  # a stdio server: a closed stdin ends it at once
        r = subprocess.run([sys.executable, "-m", "trainer.cli", *argv], cwd=ROOT, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        return
    if argv[0] == "serve-proxy":  # a server: it must come up (healthz), then it is stopped; it may write --record
        port = argv[argv.index("--port") + 1]
        p = subprocess.Popen([sys.executable, "-m", "trainer.cli", *argv], cwd=run_dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            deadline, up = time.monotonic() + 60, False
            while time.monotonic() < deadline and p.poll() is None and not up:
                try:
                    up = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
                except httpx.HTTPError:
                    time.sleep(0.2)
            assert up, p.stderr.read() if p.poll() is not None else "no answer on /healthz"
        finally:
            p.terminate()
            p.wait(10)
        return
    if argv[0] == "parity" and "vllm" in argv and not VLLM_PY.exists() and not os.environ.get("TBT_REQUIRE_VLLM"):
        pytest.skip("vLLM is not installed here: uv sync --extra cpu")
    cwd = os.getcwd()
    os.chdir(ROOT)  # examples name paths relative to the repository root
    if argv[0] in ("run", "show", "probe", "quickstart", "report", "checkpoint", "warm-start"):  # they write files: in a scratch directory that sees data/ and tests/
        os.chdir(run_dir)
        if argv[0] == "show" and not Path(argv[1]).exists():
            assert invoke("run", "data/samples", "--policy", "synthetic", "--repeat", "2", "--output", argv[1],
                          "--no-progress").exit_code == 0
    if argv[0] in ("eval", "aggregate", "compare", "export", "reverify", "view", "report"):  # records and agg.json: in the scratch directory too
        os.chdir(run_dir)
        for name, make in EVAL_INPUTS.items():  # what the example reads: an agg.json, or the records beside it
            if {name, name.replace(".agg.json", ".jsonl")} & set(argv) and not Path(name).exists():
                assert invoke(*shlex.split(make), "--no-progress").exit_code == 0, make
    try:
        r = invoke(*argv)
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, f"{example}\n{r.output}\n{r.exception!r}"


_TOY_EVAL = "eval data/samples --test-list data/samples/lists/toy.yaml -n 4 "
_PRICED = " --prices data/prices.example.yaml --price-model agent=Qwen/Qwen3-8B"
EVAL_INPUTS = {  # what the aggregate and compare examples read, made as the eval examples make them
    "run.jsonl": _TOY_EVAL + "--policy synthetic -o run.jsonl --errors-output err.jsonl --aggregate-output agg.json",
    "base.agg.json": _TOY_EVAL + "--policy synthetic:p=0.5 -o base.jsonl --aggregate-output base.agg.json" + _PRICED,
    "cand.agg.json": _TOY_EVAL + "--policy synthetic:p=0.9 -o cand.jsonl --aggregate-output cand.agg.json" + _PRICED,
}


# ---------------------------------------------------------------------------- bad input

@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    """Bad files of every kind a user might pass."""
    d = tmp_path_factory.mktemp("bad")
    files = {
        "file.txt": "not a folder\n",
        "servers_bad.yaml": "servers:\n  notes: {type: mcp-process\n",
        "servers_shape.yaml": "- notes\n",
        "servers_entry.yaml": "servers:\n  toy: {type: in-process, factory: 'no_such_module:make'}\n",
        "list_bad.yaml": "- toy_loans.py:test_checkout_book\n- [\n",
        "list_shape.yaml": "toy_loans.py: test_checkout_book\n",
        "list_unknown.yaml": "- toy_loans.py:test_checkout_book\n- toy_loans.py:test_nothing\n",
        "records.jsonl": '{"id": "a"\n',
    }
    for name, text in files.items():
        (d / name).write_text(text)
    (d / "empty").mkdir()
    (d / "undecidable" / "agent").mkdir(parents=True)  # two agents, neither think nor default
    for name in ("first", "second"):
        (d / "undecidable" / "agent" / f"{name}.yaml").write_text("system_instructions: hi\n")
    for sub in ("scenario", "test_case"):
        os.symlink(SAMPLES / sub, d / "undecidable" / sub)
    return d


S = str(SAMPLES)
UID = "toy_loans.py:test_checkout_book"
# (argv with {bad} for the fixture folder, what the message must name)
BAD_INPUTS = [
    (["tasks", "list", "{bad}/missing"], "does not exist"),
    (["tasks", "list", "{bad}/file.txt"], "is a file"),
    (["tasks", "list", "{bad}/empty"], "{bad}/empty: not a ThinkingBox dataset"),
    (["tasks", "list", S, "--test-list", "{bad}/missing.yaml"], "does not exist"),
    (["tasks", "list", S, "--test-list", "{bad}/empty"], "is a directory"),
    (["tasks", "list", S, "--test-list", "{bad}/list_bad.yaml"], "{bad}/list_bad.yaml:3: invalid YAML"),
    (["tasks", "list", S, "--test-list", "{bad}/list_shape.yaml"], "{bad}/list_shape.yaml:1: a test list must be"),
    (["tasks", "list", S, "--test-list", "{bad}/list_unknown.yaml"], "{bad}/list_unknown.yaml:2: test toy_loans.py:test_nothing"),
    (["tasks", "show", "{bad}/missing", UID], "does not exist"),
    (["tasks", "show", S, "toy_loans.py:test_checkout"], "no task 'toy_loans.py:test_checkout'"),
    (["tasks", "show", S, "nothing_like_it"], "see `tbt tasks list`"),
    (["tasks", "show", S, UID, "--agent", "ghost"], "no agent 'ghost' (have: assistant)"),
    (["tasks", "show", "{bad}/undecidable", UID], "several agents (first, second)"),
    (["tasks", "validate", "{bad}/file.txt"], "is a file"),
    (["tasks", "validate", "{bad}/empty", "--json"], "not a ThinkingBox dataset"),
    (["tasks", "validate", S, "--test-list", "{bad}/list_unknown.yaml", "--json"], "list_unknown.yaml:2"),
    (["validate-golden", "{bad}/missing"], "does not exist"),
    (["validate-golden", "{bad}/file.txt"], "is a file"),
    (["validate-golden", S, "--servers", "{bad}/missing.yaml"], "does not exist"),
    (["validate-golden", S, "--servers", "{bad}/servers_bad.yaml"], "{bad}/servers_bad.yaml:3: invalid YAML"),
    (["validate-golden", S, "--servers", "{bad}/servers_shape.yaml"], "{bad}/servers_shape.yaml: servers: must hold"),
    (["validate-golden", S, "--servers", "{bad}/servers_entry.yaml"],
     "{bad}/servers_entry.yaml:2: servers.toy: cannot load factory 'no_such_module:make'"),
    (["validate-golden", S, "--test-list", "{bad}/list_bad.yaml", "--json"], "{bad}/list_bad.yaml:3: invalid YAML"),
    (["validate-golden", S, "--python", "{bad}/no-python"], "no such executable"),
    (["validate-golden", S, "--concurrency", "0"], "--concurrency"),
    (["parity", "{bad}/missing.jsonl"], "missing.jsonl"),
    (["parity", "{bad}/records.jsonl"], "records.jsonl:1"),
]


@pytest.mark.parametrize("argv,message", BAD_INPUTS, ids=[" ".join(a).replace("{bad}/", "") for a, _ in BAD_INPUTS])
def test_bad_input_is_one_clear_message_and_exit_2(bad, argv, message):
    r = invoke(*(a.replace("{bad}", str(bad)) for a in argv))
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert r.exit_code == 2, r.output
    assert message.replace("{bad}", str(bad)) in " ".join(r.output.split()), r.output


# ---------------------------------------------------------------------------- reports

def test_validate_golden_json_reports_load_errors(tmp_path):
    """A dataset that loads with errors: they are the JSON's `errors` (file, line, key), and exit 1."""
    root = tmp_path / "ds"
    (root / "agent").mkdir(parents=True)
    (root / "agent" / "a.yaml").write_text("system_instructions: hi\n")
    os.symlink(SAMPLES / "scenario", root / "scenario")
    (root / "test_case").mkdir()
    good = (SAMPLES / "test_case" / "toy" / "toy_loans.py").read_text()
    (root / "test_case" / "toy_loans.py").write_text(good)
    (root / "test_case" / "broken.py").write_text('def test_x(x, judge):\n    """!\n    scenario: nowhere\n    query: hi\n    """\n')
    r = invoke("validate-golden", str(root), "--json")
    assert r.exit_code == 1, r.output
    s = json.loads(r.stdout)
    assert s["failures"] == [] and s["passed"] == s["tasks"] == 3
    assert [(Path(e["file"]).name, e["line"], e["key"]) for e in s["errors"]] == [("broken.py", 3, "scenario")]
    assert "nowhere" in s["errors"][0]["message"]
    clean = invoke("validate-golden", str(SAMPLES), "--test-list", str(SAMPLES / "lists" / "toy.yaml"), "--json")
    assert clean.exit_code == 0 and json.loads(clean.stdout)["errors"] == []
