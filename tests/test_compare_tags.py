"""`tbt compare` per tag (issue 28): each tag's pass@1, pass@k and observed k/k base → candidate,
and its pass@1 change marked distinguishable or not by the verdict of the overall and per-domain
changes (metrics.pass_at_1_change, the sign-flip test over the tag's tasks), Bonferroni over the
tags as a family of their own: a dataset's tags never move the overall and per-domain verdicts.

Real evaluations of the toy tasks (tbt eval, synthetic policies, real records and agg.json); the
toy tasks' tags come from their test files.
"""

from __future__ import annotations

import json

import pytest

from evals import SAMPLES, TOY, cli, evaluate
from trainer.env.taskformat.tasks import load_dataset
from trainer.formats.aggfile import read_agg
from trainer.eval.compare import change_mark, compare, render
from trainer.eval.metrics import pass_at_1_change
from trainer.eval.report import report

@pytest.fixture(scope="module")
def aggs(tmp_path_factory):
    return evaluate(tmp_path_factory.mktemp("tags"), {"base": "synthetic:p=0.3", "cand": "synthetic:p=1"}, 6)


def test_every_tag_gets_its_figures_and_its_verdict(aggs):
    b, c = read_agg(aggs / "base.agg.json"), read_agg(aggs / "cand.agg.json")
    tasks = load_dataset(SAMPLES, test_list=TOY).tasks
    want = sorted({t for task in tasks.values() for t in task.tags if not t.startswith("domain:")})
    cmp = compare(b, c)
    assert [g["tag"] for g in cmp["tags"]] == want and len(want) >= 5
    ch = cmp["change"]
    assert sorted(ch["tags"]) == want
    assert ch["tests"] == 1 and ch["domain_tests"] == 0 and ch["domains"] == {}  # one domain (toy): the overall alone
    assert ch["tag_tests"] == len(want)  # the tags: their own family
    assert ch["pairing"] == "seed" and "run seed 0" in ch["pairing_why"]  # both evaluated at --seed 0
    for g in cmp["tags"]:
        us = [u for u in b.tasks if g["tag"] in (b.tasks[u].tags or [])]
        for who, doc in (("base", b), ("candidate", c)):
            cs, ns = sum(doc.tasks[u].c for u in us), sum(doc.tasks[u].n for u in us)
            assert g[who]["tasks"] == len(us) and g[who]["pass_at_1"] == pytest.approx(cs / ns)
        assert g["change_pt"]["pass_at_1"] == pytest.approx((g["candidate"]["pass_at_1"] - g["base"]["pass_at_1"]) * 100)
        # the same verdict as the overall and per-domain rows: over the tag's tasks, at the family's size
        assert ch["tags"][g["tag"]] == pass_at_1_change([b.tasks[u].tally for u in us], [c.tasks[u].tally for u in us],
                                                        tests=ch["tag_tests"], pairing="seed")
    marks = {t: change_mark(x) for t, x in ch["tags"].items()}
    # each tag holds 1 to 3 tasks, judged 7 together: no sign-flip test over so few tasks can call one
    assert all(m.startswith(("NOT", "no change", "— (1 task)")) for m in marks.values()), marks
    assert any(m.startswith("NOT") for m in marks.values()) and any(m.startswith("—") for m in marks.values()), marks
    # 5 toy tasks: the smallest p of a sign-flip test over 5 tasks is 2/2^5 = 0.0625, so no verdict of a change
    assert ch["tasks"] == 5 and ch["distinguishable"] is False and ch["delta"] > 0 and ch["needed"]["tasks"] >= 6


def test_the_text_and_the_json_carry_the_tag_rows(aggs):
    res = cli("compare", aggs / "base.agg.json", aggs / "cand.agg.json")
    assert res.exit_code == 0, res.output
    text = res.output
    cmp = json.loads(cli("compare", aggs / "base.agg.json", aggs / "cand.agg.json", "--json").output)
    assert cmp["tags"] and render(cmp) == text.rstrip("\n")
    block = text[text.index("Per tag (%)"):]
    assert f"(the {cmp['change']['tag_tests']} tags judged together, Bonferroni)" in block.splitlines()[0]
    rows = {line.split()[0]: line for line in block.splitlines()[2:] if line.strip()}
    for g in cmp["tags"]:
        assert rows[g["tag"]].rstrip().endswith(change_mark(cmp["change"]["tags"][g["tag"]])), rows[g["tag"]]
    overall = [x for x in text.splitlines() if x.startswith("pass@1 change")]
    assert len(overall) == 1 and "interval" in overall[0] and "sign-flip" in overall[0]  # one verdict
    assert "Bonferroni" not in overall[0]  # the overall change alone in its family: the tags do not count


def test_runs_aggregated_without_tags_have_no_tag_rows(aggs, tmp_path):
    for name in ("base", "cand"):  # without --dataset agg.json knows no tags
        res = cli("aggregate", aggs / f"{name}.jsonl", "-o", tmp_path / f"{name}.agg.json")
        assert res.exit_code == 0, res.output
    cmp = compare(read_agg(tmp_path / "base.agg.json"), read_agg(tmp_path / "cand.agg.json"))
    assert cmp["tags"] == [] and cmp["change"]["tags"] == {} and cmp["change"]["tag_tests"] == 0
    assert "Per tag" not in render(cmp)
    tagged = compare(read_agg(aggs / "base.agg.json"), read_agg(aggs / "cand.agg.json"))
    overall = {k: v for k, v in cmp["change"].items() if k not in ("tags", "tag_tests")}
    assert {k: v for k, v in tagged["change"].items() if k not in ("tags", "tag_tests")} == overall  # tags never move it


def test_the_report_shows_the_tag_rows(aggs, tmp_path):
    html, *_ = report([aggs / "base.agg.json", aggs / "cand.agg.json"], tmp_path / "r.html")
    page = html.read_text()
    assert "<h3>Per tag</h3>" in page and "tags judged together (Bonferroni)" in page
    cmp = compare(read_agg(aggs / "base.agg.json"), read_agg(aggs / "cand.agg.json"))
    for g in cmp["tags"]:
        assert f"<td>{g['tag']}</td>" in page
