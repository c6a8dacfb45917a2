"""Compare only like with like (issue 24 item 4): `tbt compare` / `tbt report` refuse runs of a
different k or over different task sets unless told (--at-k, --common-tasks) and then say so;
runs are labelled by their policy spec, so two synthetic runs are told apart.

Real evaluations of the toy tasks (`tbt eval`, synthetic policies, real records and agg.json).
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.formats.aggfile import read_agg
from trainer.eval.compare import CompareError, compare

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("like")
    three = d / "three.yaml"
    three.write_text("".join(f"- {u}\n" for u in TOY.read_text().split("- ")[1:4]).replace("\n\n", "\n"))
    out = {}
    for name, policy, n, lst in (("r4", "synthetic:p=0.5", 4, TOY), ("r2", "synthetic:p=0.9", 2, TOY),
                                 ("s2", "synthetic:p=0.9", 2, three), ("q4", "synthetic:p=0.9", 4, TOY)):
        res = cli("eval", SAMPLES, "--test-list", lst, "--policy", policy, "-n", n, "-o", d / f"{name}.jsonl",
                  "--aggregate-output", d / f"{name}.agg.json", "--no-progress")
        assert res.exit_code == 0, res.output
        out[name] = d / f"{name}.agg.json"
    out["dir"] = d
    return out


def test_labels_default_to_the_policy_spec(runs):
    assert read_agg(runs["r4"]).label == "synthetic:p=0.5" and read_agg(runs["r2"]).label == "synthetic:p=0.9"
    res = cli("compare", runs["r2"], runs["q4"], "--at-k", 2)  # same label: the files tell them apart
    assert res.exit_code == 0 and "synthetic:p=0.9 (r2.agg.json) → synthetic:p=0.9 (q4.agg.json)" in res.output


def test_another_k_is_refused_and_compared_at_the_common_k_when_asked(runs):
    res = cli("compare", runs["r4"], runs["r2"])
    msg = flat(res.output)
    assert res.exit_code == 2 and "4 attempts per task" in msg and "--at-k 2" in msg and "Table 1" not in msg, msg
    res = cli("compare", runs["r4"], runs["r2"], "--at-k", 2)
    assert res.exit_code == 0, res.output
    msg = flat(res.output)
    assert "note: compared at k = 2 (--at-k): synthetic:p=0.5 has 4 attempts per task" in msg
    assert "Observed 2/2 (estimated)" in msg and "pass@2 (tasks solved at least once) (estimated)" in msg
    assert "Observed 4|2" not in msg and "at k = 2; 4 and 2 attempts per task" in msg
    # the figures: the repeat-4 run's 2/2 and pass@2 are the unbiased estimators from its attempts
    cmp = json.loads(cli("compare", runs["r4"], runs["r2"], "--at-k", 2, "--json").output)
    b = read_agg(runs["r4"])
    want_hat = sum(comb(t.c, 2) / comb(t.n, 2) for t in b.tasks.values()) / len(b.tasks)
    want_at = sum(1 - comb(t.n - t.c, 2) / comb(t.n, 2) for t in b.tasks.values()) / len(b.tasks)
    kk, p1, pk = cmp["table1"]
    assert kk["base"]["share"] == pytest.approx(want_hat) and kk["base"]["count"] == pytest.approx(want_hat * 5)
    assert pk["base"]["share"] == pytest.approx(want_at)
    c = read_agg(runs["r2"])  # the repeat-2 run: what it observed
    assert kk["candidate"]["count"] == c.overall.observed_k_of_k.tasks == sum(t.c == 2 for t in c.tasks.values())
    assert p1["base"]["share"] == b.overall.pass_at_1.value  # pass@1: every attempt
    assert cmp["k"] == "2" and cmp["k_runs"] == {"base": 4, "candidate": 2}
    with pytest.raises(CompareError, match="between 1 and the smaller run's k"):
        compare(b, c, at_k=3)
    # the same k asked of two repeat-4 runs at 2: both estimated
    res = cli("compare", runs["r4"], runs["q4"], "--at-k", 2)
    assert res.exit_code == 0 and res.output.count("note: compared at k = 2") == 2


def test_other_tasks_are_refused_and_compared_on_the_common_ones_when_asked(runs):
    res = cli("compare", runs["r2"], runs["s2"])
    msg = flat(res.output)
    assert res.exit_code == 2 and "hold different tasks (2 only in" in msg and "--common-tasks" in msg, msg
    res = cli("compare", runs["r2"], runs["s2"], "--common-tasks", "--json")
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.output)
    assert cmp["tasks"]["base"] == cmp["tasks"]["candidate"] == 3 and len(cmp["tasks"]["only_in_base"]) == 2
    assert any("compared on the 3 tasks both runs hold" in n for n in cmp["notes"])
    a = read_agg(runs["r2"])
    shared = [u for u in read_agg(runs["s2"]).tasks]
    assert cmp["table1"][1]["base"]["count"] == sum(a.tasks[u].c for u in shared)  # pass@1 over the shared tasks only
    # both at once: another k and other tasks
    res = cli("compare", runs["r4"], runs["s2"], "--common-tasks")
    assert res.exit_code == 2 and "--at-k 2" in flat(res.output)
    res = cli("compare", runs["r4"], runs["s2"], "--common-tasks", "--at-k", 2)
    assert res.exit_code == 0 and "compared on the 3 tasks" in flat(res.output)


def test_cost_is_left_out_and_said_when_not_over_the_runs_own_campaigns(runs, tmp_path):
    d = runs["dir"]
    priced = {}
    for name in ("r4", "r2"):
        res = cli("aggregate", d / f"{name}.jsonl", "-o", tmp_path / f"{name}.agg.json", "--prices",
                  ROOT / "data" / "prices.example.yaml", "--price-model", "agent=Qwen/Qwen3-8B")
        assert res.exit_code == 0, res.output
        priced[name] = tmp_path / f"{name}.agg.json"
    cmp = json.loads(cli("compare", priced["r4"], priced["r2"], "--at-k", 2, "--json").output)
    assert "table3" not in cmp and any("Table 3 (cost) left out" in n for n in cmp["notes"])


def test_the_report_refuses_unlike_runs_and_says_how_it_compared_them(runs, tmp_path):
    page = tmp_path / "r.html"
    res = cli("report", runs["r4"], runs["r2"], "--html", page)
    assert res.exit_code == 2 and "--at-k 2" in flat(res.output) and not page.exists()
    res = cli("report", runs["r4"], runs["r2"], "--html", page, "--at-k", 2)
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert "compared at k = 2 (--at-k)" in html and "Observed 2/2 (estimated)" in html
