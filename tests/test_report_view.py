"""`tbt report --view` (issue 28): the trajectory viewer of every run's episodes written beside the
report (NAME-episodes.html, from the records each agg.json names in its sources), linked from the
runs table, and each comparison's tasks that moved most linking to their episodes in it.

Real evaluations of the toy tasks (tbt eval, synthetic policies), and a run whose judge cannot be
reached (its judge-asking tasks leave real system errors in its .errors.jsonl); the real report
and viewer.
"""

from __future__ import annotations

import json
import re
import shutil
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from evals import SAMPLES, cli, evaluate
from trainer.env.taskformat.tasks import load_dataset
from trainer.formats.aggfile import read_agg
from trainer.eval.report import ReportError, report
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec

@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    return evaluate(tmp_path_factory.mktemp("rview"), {"base": "synthetic:p=0.4", "cand": "synthetic:p=0.9"}, 3)


def page_json(page: str):
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def hrefs(page: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]*)"', page)]


def test_the_report_links_a_viewer_page_written_beside_it(evals, tmp_path):
    out = tmp_path / "out" / "report.html"
    written = report([evals / "base.agg.json", evals / "cand.agg.json"], out, view=True)
    viewer = out.parent / "report-episodes.html"
    assert written[0] == out and written[-1] == viewer and viewer.is_file()
    page = out.read_text()
    assert "<script" not in page  # the report stays a page without script
    links = hrefs(page)
    assert links and all((out.parent / urlsplit(h).path).is_file() for h in links)  # every link: a file beside it
    assert {urlsplit(h).path for h in links} == {"report-episodes.html"}
    data = page_json(viewer.read_text())
    assert [r["name"] for r in data["runs"]] == ["synthetic:p=0.4", "synthetic:p=0.9"]  # the report's labels
    for i, name in enumerate(("base", "cand")):  # every record the agg.json was made from is in the page
        scored = (evals / f"{name}.jsonl").read_text().splitlines()
        assert data["runs"][i]["scored"] == len(scored) == read_agg(evals / f"{name}.agg.json").overall.attempts
    assert {t["domain"] for t in data["tasks"]} == {"toy"}  # grouped by the agg.json's domains
    # the tasks that moved most: each count opens that task's episodes of that run
    moved = [urlsplit(h) for h in links if urlsplit(h).fragment]
    assert moved and "Tasks that moved most" in page
    have = {(e["uid"], e["run"]) for e in data["episodes"]}
    for u in moved:
        q = parse_qs(u.fragment)
        assert (unquote(q["uid"][0]), int(q["run"][0])) in have
    b, c = read_agg(evals / "base.agg.json"), read_agg(evals / "cand.agg.json")
    changed = {x for x in b.tasks if b.tasks[x].c / b.tasks[x].n != c.tasks[x].c / c.tasks[x].n}
    assert {unquote(parse_qs(u.fragment)["uid"][0]) for u in moved} == changed
    assert page.count("in the viewer</a>") == 2  # the runs table: a link per run


def test_the_viewer_holds_the_system_errors_beside_the_records(tmp_path):
    d = tmp_path
    ds = load_dataset(SAMPLES)
    only = frozenset(sorted(u for u, t in ds.tasks.items() if "domain:toy" in t.tags)
                     + sorted(u for u, t in ds.tasks.items() if "judge" in t.tags)[:2])
    run(RunSpec(dataset=str(SAMPLES), policy="synthetic", judge="openai:http://127.0.0.1:9/v1#j,retries=0,timeout=2"),
        RunPlan(output=d / "j.jsonl", repeat=2, retries=0, only=only, preflight=False))
    errors = len((d / "j.errors.jsonl").read_text().splitlines())
    res = cli("aggregate", d / "j.jsonl", d / "j.errors.jsonl", "--dataset", SAMPLES, "--coverage-profile", "none",
              "-o", d / "j.agg.json")
    assert res.exit_code == 0, res.output
    report([d / "j.agg.json"], d / "r.html", view=True)
    data = page_json((d / "r-episodes.html").read_text())
    assert errors and data["runs"][0]["system_errors"] == errors


def test_sources_are_found_beside_the_agg_json_and_a_missing_one_writes_nothing(evals, tmp_path, monkeypatch):
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in ("base.jsonl", "base.agg.json"):
        shutil.copy(evals / f, moved / f)
    doc = json.loads((moved / "base.agg.json").read_text())
    doc["sources"] = ["some/where/else/base.jsonl"]  # aggregated elsewhere: the file is found beside the agg.json
    (moved / "base.agg.json").write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    report([moved / "base.agg.json"], tmp_path / "a" / "r.html", view=True)
    assert (tmp_path / "a" / "r-episodes.html").is_file()
    (moved / "base.jsonl").unlink()
    with pytest.raises(ReportError, match="was aggregated from some/where/else/base.jsonl, which is not there"):
        report([moved / "base.agg.json"], tmp_path / "b" / "r.html", view=True)
    assert not (tmp_path / "b").exists()
    res = cli("report", moved / "base.agg.json", "--html", tmp_path / "c" / "r.html", "--view")
    assert res.exit_code == 2 and "--view" in res.output and not (tmp_path / "c").exists()


def test_the_command_says_where_the_viewer_went(evals, tmp_path):
    res = cli("report", evals / "base.agg.json", evals / "cand.agg.json", "--html", tmp_path / "r.html", "--view")
    assert res.exit_code == 0, res.output
    assert "the episode viewer r-episodes.html, linked from it" in res.output and (tmp_path / "r-episodes.html").is_file()
    plain = cli("report", evals / "base.agg.json", "--html", tmp_path / "p.html")
    assert plain.exit_code == 0 and not (tmp_path / "p-episodes.html").exists()
    assert "episodes.html" not in (tmp_path / "p.html").read_text()
