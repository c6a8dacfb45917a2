"""What the command line prints (issue 25.7): `tbt show` piped keeps whole uids and lists the
errors file's attempts; help text wraps between tokens; user data is never turned into emoji;
tags once each; `serve-proxy` says where it listens; `parity --against vllm` checks its
environment first; the cost-Pareto plot's dollars are plain numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from trainer.cli import app
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.preflight import judged_tasks
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
UNREACHABLE_JUDGE = "openai:http://127.0.0.1:9/v1#judge,retries=0,timeout=2"


def tbt(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """`tbt` as a pipe sees it: stdout is not a terminal."""
    return subprocess.run([sys.executable, "-m", "trainer.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "80", **(env or {})}, timeout=timeout)


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """Toy and telecom tasks that ask the judge, against a judge that cannot be reached: real
    system errors in r.errors.jsonl, and scored episodes of the tasks that do not ask it."""
    d = tmp_path_factory.mktemp("show")
    ds = load_dataset(SAMPLES)
    judged = judged_tasks(list(ds.tasks.values()))
    assert judged, "the samples have tasks that ask the judge"
    plain = [u for u in sorted(ds.tasks) if u not in judged and u.startswith("toy_")][:3]
    only = frozenset(judged[:2] + plain)
    res = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.5", judge=UNREACHABLE_JUDGE),
              RunPlan(output=d / "r.jsonl", repeat=2, retries=1, only=only, preflight=False))
    assert res.unresolved
    return d, sorted(only), judged[:2]


def test_show_failed_piped_keeps_whole_uids_and_lists_the_errors_files_attempts(judged_run):
    d, uids, judged = judged_run
    errors = [json.loads(x) for x in (d / "r.errors.jsonl").read_text().splitlines()]
    assert errors and {e["uid"] for e in errors} <= set(judged)
    r = tbt("show", "r.jsonl", "--failed", cwd=d)
    assert r.returncode == 0, r.stderr
    rows = [x for x in r.stdout.splitlines() if x.startswith("│")]
    shown = [x.split("│")[1].strip() for x in rows]
    assert set(shown) <= set(uids) and set(judged) <= set(shown)  # whole uids, never cut
    assert f"{len(errors)} system-error attempt(s) from the errors file" in r.stdout
    sys_err = [x for x in rows if "sys-err" in x]
    assert len(sys_err) >= len(errors) and any("JudgeUnavailable" in x or "judge" in x.lower() for x in sys_err)
    # one of them opened by uid: the attempt from the errors file is there too
    one = tbt("show", "r.jsonl", judged[0], "--failed", cwd=d)
    assert one.returncode == 0 and "SYSTEM ERROR" in one.stdout
    # without --failed: the records only; a named errors file that is not there is refused
    assert "from the errors file" not in tbt("show", "r.jsonl", cwd=d).stdout
    bad = tbt("show", "r.jsonl", "--failed", "--errors", "nope.jsonl", cwd=d)
    assert bad.returncode == 2 and "--errors nope.jsonl: no such file" in bad.stderr


def test_a_line_number_in_a_message_stays_text(tmp_path):
    """`r.jsonl:100:` once printed as `r.jsonl💯` (rich's emoji codes)."""
    (tmp_path / "r.jsonl").write_text("\n" * 99 + "{not json\n")
    r = tbt("show", "r.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "r.jsonl:100:" in r.stderr and "\N{HUNDRED POINTS SYMBOL}" not in r.stderr
    assert "\N{HUNDRED POINTS SYMBOL}" not in r.stdout


def _pieces(text: str) -> list[str]:
    """Every whitespace token of `text`, cut after each `,` and `|` (where help may wrap)."""
    return [p for tok in text.split() for p in re.split(r"(?<=[,|])(?=[^\s,|])", tok) if p]


def _commands(group, path=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


@pytest.mark.parametrize("width", [80, 100])
def test_help_wraps_between_tokens_never_inside_one(width):
    """Every token of every option's help (cut only at `,` and `|`) is printed whole: no
    "bi modal", "opena i:URL" or "--errors- output"."""
    root = typer.main.get_command(app)
    runner = CliRunner()
    seen = 0
    for path, cmd in _commands(root):
        r = runner.invoke(app, [*path, "--help"], terminal_width=width)
        assert r.exit_code == 0, (path, r.output)
        flat = r.output
        for p in cmd.params:
            for piece in _pieces(getattr(p, "help", None) or ""):
                assert piece in flat, f"tbt {' '.join(path)} --help ({width} columns): {piece!r} is cut\n{flat}"
                seen += 1
    assert seen > 500
    run_help = runner.invoke(app, ["run", "--help"], terminal_width=80).output
    assert "bimodal|" in run_help and "openai:URL#MODEL[," in run_help and "--errors-output" in run_help


def test_tags_are_listed_once_each():
    ds = load_dataset(SAMPLES)
    assert all(len(t.tags) == len(set(t.tags)) for t in ds.tasks.values())
    proc = [t for t in ds.tasks.values() if t.scenario.name == "procurement"]
    assert proc and all(t.tags.count("domain:procurement") == 1 for t in proc)
    assert proc[0].tags[0] == "domain:procurement"  # the scenario's first: order kept
    r = CliRunner().invoke(app, ["tasks", "list", str(SAMPLES)])
    assert r.exit_code == 0 and "domain:procurement,domain:procurement" not in r.output
    assert "domain:procurement," in r.output


def test_serve_proxy_says_where_it_listens():
    p = subprocess.Popen([sys.executable, "-m", "trainer.cli", "serve-proxy", "--port", "0", "--upstream",
                          "http://127.0.0.1:9/v1"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) \(upstream http://127\.0\.0\.1:9/v1, family hermes\)", line)
        assert m, line + (p.stderr.read() if p.poll() is not None else "")
        assert httpx.get(f"http://127.0.0.1:{m.group(1)}/healthz", timeout=5).status_code == 200
    finally:
        p.terminate()
        p.wait(10)


def test_serve_proxy_on_a_taken_port_fails_without_the_line():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = tbt("serve-proxy", "--port", str(port), timeout=60)
    assert r.returncode == 1 and "listening on" not in r.stdout
    assert f"could not listen on 127.0.0.1:{port} (--host, --port)" in r.stderr


def test_parity_against_vllm_checks_its_environment_before_any_work(tmp_path):
    t = time.monotonic()
    r = tbt("parity", "--generate", "500", "--seed", "0", "--against", "vllm", "--write", str(tmp_path / "w.jsonl"),
            env={"TBT_VLLM_PYTHON": str(tmp_path / "no-env" / "python")})
    assert r.returncode == 2 and f"no Python at {tmp_path / 'no-env' / 'python'}" in r.stderr
    assert "uv sync --extra cpu" in r.stderr
    assert not (tmp_path / "w.jsonl").exists()  # nothing generated or written first
    assert time.monotonic() - t < 20


def test_the_cost_pareto_axis_is_in_plain_dollars():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from trainer.eval.report_plots import ParetoPoint, pareto_figure

    fig = pareto_figure([ParetoPoint("base", 40.0, 1.2e-5), ParetoPoint("cand", 55.0, 1.5e-5),
                         ParetoPoint("other", 50.0, 1.3e-5)])
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "cost per successful attempt ($)"
    assert ax.yaxis.get_offset_text().get_text() == ""  # no "1e−5" under "($)"
    pairs = [(v, t.get_text()) for v, t in zip(ax.get_yticks(), ax.get_yticklabels()) if t.get_text()]
    assert len(pairs) >= 3 and all(re.fullmatch(r"\d+\.\d+", x) for _, x in pairs)
    assert [float(x) for _, x in pairs] == pytest.approx([v for v, _ in pairs], rel=1e-6)  # the label is the value
