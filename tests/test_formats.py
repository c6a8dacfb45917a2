"""The shared file formats, each read by one reader: episode records (ours and tb infer rows,
trainer/formats/attempts.py), bands.csv (trainer/formats/bandsfile.py) and agg.json
(trainer/formats/aggfile.py), with the summary printed after writing one (trainer/eval/summary.py).
Real files in tmp_path; every error names the file, the line (or field path) and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainer.data.probes import tally_probes
from trainer.formats.aggfile import AGG_VERSION, AggDoc, AggFileError, read_agg
from trainer.eval.aggregate import aggregate, aggregate_doc, write_json
from trainer.eval.compare import compare
from trainer.eval.cost import Price
from trainer.formats.coverage import Expected
from trainer.eval.summary import summary_text
from trainer.formats.attempts import Attempt, AttemptError, Tally, Usage, read_attempts, tally
from trainer.formats.bandsfile import CSV_COLUMNS, BandsFileError, BandsRow, bands_csv_text, header, read_bands_csv
from trainer.formats.record import EpisodeRecord

FIX = Path(__file__).parent / "fixtures" / "eval"
AGGS = [FIX / f"{n}.agg.json" for n in ("base", "candidate", "other")]


def ours(uid, rep, passed=True, sys_err=None, fp="f1"):
    return EpisodeRecord(uid=uid, repetition=rep, seed=rep, scenario="toy", fingerprint=fp,
                         policy={"kind": "openai", "model": "m"}, verdict={"passed": passed, "system_error": None},
                         system_error=sys_err, usage={"agent": {"input_tokens": 100, "cached_tokens": 40, "output_tokens": 7}})


def tb(uid, rep, result, sys_err=False, usage=None):
    return {"uid": uid, "test_result": {"result": result, "reward": 1.0 if result is True else 0.0,
                                        "is_system_error": sys_err},
            "metadata": {"scenario": "retail", "repetition": rep}, "usage": usage or []}


def lines(path, rows, tail=""):
    path.write_text("".join((r.to_json() if isinstance(r, EpisodeRecord) else json.dumps(r)) + "\n" for r in rows) + tail)
    return path


# ---------------------------------------------------------------------------- episode records

def test_ours_and_tb_infer_rows_through_one_reader(tmp_path):
    p = lines(tmp_path / "mixed.jsonl", [ours("a.py:t", 0), tb("a.py:t", 1, "pass", usage=[
        {"input_tokens": 50, "cached": 10, "output_tokens": 3}, {"input_tokens": 70, "cached": 0, "output_tokens": 4}]),
        tb("a.py:t", 2, None, sys_err=True), ours("b.py:t", 0, sys_err="sandbox: timeout")])
    read = read_attempts([p])
    assert read.torn == [] and read.problems == [] and read.lines == 4
    a, b, c, d = read.attempts
    assert (a.format, a.key, a.passed, a.where, a.fingerprint, a.models["agent"]) == ("ours", ("a.py:t", 0), True,
                                                                                     f"{p}:1", "f1", "m")
    assert a.usage["agent"] == Usage(100, 40, 7, 1)
    assert (b.format, b.key, b.passed, b.scenario, b.models) == ("tb", ("a.py:t", 1), True, "retail", {"agent": None})
    assert b.usage["agent"] == Usage(120, 10, 7, 1)  # the turns summed, one record
    assert (c.passed, c.system_error) == (False, "tb: is_system_error")
    assert (d.passed, d.system_error) == (False, "sandbox: timeout")
    assert tally(read.attempts) == {"a.py:t": Tally(2, 2, 1), "b.py:t": Tally(0, 0, 1)}


def test_a_bad_line_names_file_line_field_or_is_reported_with_skip_bad(tmp_path):
    p = lines(tmp_path / "r.jsonl", [ours("a.py:t", 0), {"version": 1, "uid": "a.py:t", "repetition": "one"},
                                     tb("a.py:t", 1, True) | {"metadata": "x"}])
    with pytest.raises(AttemptError, match=re.escape(f"{p}:2: repetition: expected an integer >= 0, got 'one'")) as e:
        read_attempts([p])
    assert (e.value.where, e.value.detail) == (f"{p}:2", "repetition: expected an integer >= 0, got 'one'")
    read = read_attempts([p], skip_bad=True)
    assert [a.where for a in read.attempts] == [f"{p}:1"]
    assert [str(x) for x in read.problems] == [f"{p}:2: repetition: expected an integer >= 0, got 'one'",
                                               f"{p}:3: metadata: expected an object"]
    with pytest.raises(AttemptError, match=re.escape(f"{tmp_path / 'none.jsonl'}: No such file")):
        read_attempts([tmp_path / "none.jsonl"], skip_bad=True)


def test_a_torn_last_line_is_skipped_and_reported_by_eval_and_probes(tmp_path):
    cut = ours("a.py:t", 1).to_json()[:30]
    p = lines(tmp_path / "r.jsonl", [ours("a.py:t", 0)], tail=cut)
    read = read_attempts([p])
    assert [a.key for a in read.attempts] == [("a.py:t", 0)] and read.torn == [f"{p}:2"] and read.lines == 2
    # the same cut in the middle of a file is a bad line, not a torn one
    q = lines(tmp_path / "q.jsonl", [ours("a.py:t", 0)], tail=cut + "\n" + ours("a.py:t", 1).to_json() + "\n")
    with pytest.raises(AttemptError, match=re.escape(f"{q}:2: not JSON")):
        read_attempts([q])

    class Task:  # what tally_probes needs of a task
        def fingerprint(self):
            return "f1"

    report = tally_probes([p, q], {"a.py:t": Task()})
    assert report.problems[:2] == [f"{p}:2: a cut-off last line (a write interrupted by a crash)",
                                   f"{q}:1: a.py:t repetition 0 counted already (kept the first)"]
    assert report.problems[2].startswith(f"{q}:2: not JSON (") and len(report.problems) == 3
    assert report.tallies == {"a.py:t": Tally(2, 2)} and report.duplicates == 1 and report.lines == 5


def test_probes_report_problems_in_file_and_line_order(tmp_path):
    class Task:
        def fingerprint(self):
            return "f1"

    z = lines(tmp_path / "z.jsonl", [ours("a.py:t", 0), {"uid": 3}, ours("a.py:t", 0)])
    a = lines(tmp_path / "a.jsonl", [{"hello": 1}, ours("a.py:t", 1, fp="old"), tb("x.py:t", 0, True)])
    report = tally_probes([z, a], {"a.py:t": Task()})
    assert [p.split(": ")[0] for p in report.problems] == [f"{z}:2", f"{z}:3", f"{a}:1"]
    assert report.changed == {"a.py:t": 1} and report.unknown_uids == {"x.py:t": 1}
    assert report.tallies == {"a.py:t": Tally(1, 1)}


def test_a_tally_is_checked():
    with pytest.raises(ValueError, match="0 <= c <= n"):
        Tally(2, 3)
    assert tally([Attempt("u", 0, False, None, "x:1"), Attempt("u", 1, True, None, "x:2")]) == {"u": Tally(2, 1, 0)}


# ---------------------------------------------------------------------------- bands.csv

def test_bands_csv_written_and_read_back(tmp_path):
    rows = [BandsRow("a.py:t", "data/samples", "toy", 8, 3, 1, "intermediate",
                     {"easy": 0.1, "intermediate": 0.85, "hard": 0.05}, True, "train", ""),
            BandsRow("b.py:t", "data/samples", "toy", 0, 0, 2, "", None, False, "", "not probed (2 system errors)")]
    text = bands_csv_text(["easy", "intermediate", "hard"], rows)
    assert text.splitlines()[0] == ("uid,dataset,domain,n,k,system_errors,band,mass_easy,mass_intermediate,mass_hard,"
                                    "kept,split,reason")
    assert text.splitlines()[2] == "b.py:t,data/samples,toy,0,0,2,,,,,no,,not probed (2 system errors)"
    p = tmp_path / "bands.csv"
    p.write_text(text)
    f = read_bands_csv(p)
    assert f.bands == ["easy", "intermediate", "hard"] and f.columns == header(f.bands)
    assert [r.line for r in f.rows] == [2, 3]
    assert [BandsRow(**{**r.__dict__, "line": 0}) for r in f.rows] == rows
    assert set(CSV_COLUMNS) <= set(f.columns)
    fixture = read_bands_csv(FIX / "bands.csv")  # make_fixtures.py's layout is prepare's
    assert len(fixture.rows) == 12 and fixture.rows[0].masses and fixture.bands == list(fixture.rows[0].masses)


def test_bands_csv_needs_only_the_columns_asked_for(tmp_path):
    p = tmp_path / "bands.csv"
    p.write_text("uid,n,k\nx,3,1\ny,,\n")
    f = read_bands_csv(p, need=("n", "k"))
    assert [(r.uid, r.n, r.k, r.kept, r.band, r.masses) for r in f.rows] == [("x", 3, 1, False, "", None),
                                                                             ("y", 0, 0, False, "", None)]
    with pytest.raises(BandsFileError, match=re.escape(f"{p}: line 1: missing column(s) dataset, domain")):
        read_bands_csv(p)


@pytest.mark.parametrize("body, message", [
    ("x,3,one,no\n", "line 2: k: expected an integer, got 'one'"),
    ("x,3,1,no\ny,2,-1,no\n", "line 3: k: expected an integer >= 0, got '-1'"),
    ("x,3,4,no\n", "line 2: k: 4 passed of n=3 probes"),
    ("x,3,1,maybe\n", "line 2: kept: expected yes or no, got 'maybe'"),
    ("x,3,1\n", "line 2: 3 field(s), the header has 4"),
    (",3,1,no\n", "line 2: uid: empty"),
])
def test_bands_csv_errors_name_file_line_and_column(tmp_path, body, message):
    p = tmp_path / "bands.csv"
    p.write_text("uid,n,k,kept\n" + body)
    with pytest.raises(BandsFileError, match=re.escape(f"{p}: {message}")):
        read_bands_csv(p, need=("n", "k", "kept"))


def test_bands_csv_masses_and_band_checked(tmp_path):
    p = tmp_path / "bands.csv"
    p.write_text("uid,band,mass_easy,mass_hard\nx,easy,0.9,lots\n")
    with pytest.raises(BandsFileError, match=re.escape(f"{p}: line 2: mass_hard: expected a number, got 'lots'")):
        read_bands_csv(p, need=("band",))
    p.write_text("uid,band,mass_easy,mass_hard\nx,medium,0.9,0.1\n")
    with pytest.raises(BandsFileError, match=re.escape(f"{p}: line 2: band: 'medium' is not one of the mass_ columns")):
        read_bands_csv(p, need=("band",))
    with pytest.raises(BandsFileError, match=re.escape(f"{tmp_path / 'no.csv'}: No such file")):
        read_bands_csv(tmp_path / "no.csv")


# ---------------------------------------------------------------------------- agg.json

@pytest.mark.parametrize("path", AGGS, ids=lambda p: p.name)
def test_agg_json_round_trip_is_exact(path, tmp_path):
    """The fixtures (written by the real aggregator) read into an AggDoc and written back: the same
    bytes, key order included."""
    doc = read_agg(path)
    assert doc.version == AGG_VERSION and doc.overall.cost is not None and doc.by_tag is None
    assert doc.to_json() == json.loads(path.read_text())
    write_json(doc, tmp_path / path.name)
    assert (tmp_path / path.name).read_bytes() == path.read_bytes()
    assert AggDoc.from_json(doc.to_json(), "again") == doc


def att(uid, rep, passed, sys_err=None):
    return Attempt(uid=uid, repetition=rep, passed=passed, system_error=sys_err, where=f"r.jsonl:{rep}", scenario="toy",
                   usage={"agent": Usage(1000, 200, 50, 1), "user": Usage(10, 0, 5, 1)}, models={"agent": "m", "user": "u"},
                   identities={"policy": {"kind": "openai", "model": "m"}})


ATTEMPTS = [att("a.py:t1", 0, True), att("a.py:t1", 1, True), att("a.py:t2", 0, False), att("a.py:t2", 1, False, "policy: 503")]
EXPECTED = Expected(uids=["a.py:t1", "a.py:t2"], repeat=2, tags={"a.py:t1": ["easy"], "a.py:t2": []})


def test_aggregate_writes_an_agg_doc_and_reads_it_back(tmp_path):
    doc = aggregate_doc(ATTEMPTS, EXPECTED, profile="none", prices={"m": Price(1.0, 2.0)}, resamples=100)
    assert doc.tasks["a.py:t2"].tally == Tally(1, 0, 1) and doc.tasks["a.py:t1"].tags == ["easy"]
    assert doc.overall.note and doc.overall.k_tasks == {1: 2, 2: 1} and doc.by_tag is not None
    assert aggregate(ATTEMPTS, EXPECTED, profile="none", prices={"m": Price(1.0, 2.0)}, resamples=100) == doc.to_json()
    write_json(doc, tmp_path / "agg.json")
    back = read_agg(tmp_path / "agg.json")
    assert back == doc and back.coverage.unresolved == doc.coverage.unresolved != []
    assert compare(back, doc) == compare(doc.to_json(), json.loads((tmp_path / "agg.json").read_text()))


def test_summary_text_of_an_agg_doc(tmp_path):
    doc = aggregate_doc(ATTEMPTS, Expected(uids=["a.py:t1", "a.py:t2"], repeat=2), profile="none",
                        prices={"m": Price(1.0, 2.0)}, resamples=100)
    assert summary_text(doc, "agg.json") == """\
agg.json: m: 2 task(s), 3 attempt(s), 2 passed
  pass@1 66.67% (Jeffreys 17.67%–96.13%, bootstrap 0.00%–100.00%)   pass@2 100.00%   pass^2 100.00%   observed 2/2 1 (100.00%)
  noise: 0% of tasks flip (mixed outcomes), ICC 1.00, effective samples 2 of 3, minimum detectable pass@1 difference 0.0 pt (paired, 95%, 80% power)
  note: uneven attempts per task (n from 1 to 2): pass@k and pass^k are over the tasks with n >= k, observed 2/2 over the tasks with n = 2
  toy     2 task(s)  pass@1  66.67%  observed 2/2 1
  cost: campaign $0.00330, per successful attempt $0.00165, per dependable task $0.00330
  unpriced (not counted: the cost is a lower bound): user: model 'u' has no price in the table (30 input, 15 output tokens)
  coverage (none): 3 of 4 keys scored; 1 unresolved (listed in agg.json under coverage)"""
    assert summary_text(read_agg(AGGS[0]), "base.agg.json").splitlines()[:2] == [
        "base.agg.json: Qwen/Qwen3-8B: 12 task(s), 60 attempt(s), 28 passed",
        "  pass@1 46.67% (Jeffreys 34.45%–59.20%, bootstrap 26.67%–65.04%)   pass@5 83.33%   pass^5 16.67%   "
        "observed 5/5 2 (16.67%)"]


def edited(tmp_path, change):
    doc = json.loads(AGGS[0].read_text())
    change(doc)
    p = tmp_path / "agg.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("version"), "version: missing: not an agg.json (tbt aggregate / tbt eval write version 1)"),
    (lambda d: d.update(version=0), "version: 0: this tbt reads agg.json version 1 only (aggregate the records again"),
    (lambda d: d["overall"]["pass_at_1"].pop("value"), "overall.pass_at_1.value: missing"),
    (lambda d: d["tasks"]["retail.py:test_0"].update(n="5"), "tasks.retail.py:test_0.n: expected an integer, got '5'"),
    (lambda d: d["tasks"]["retail.py:test_0"].update(c=9), "tasks.retail.py:test_0: expected 0 <= c <= n"),
    (lambda d: d["by_domain"]["retail"]["pass_at_k"].update(x=1.0), "by_domain.retail.pass_at_k: key 'x': expected k = 1"),
    (lambda d: d["overall"]["cost"]["by_role"]["agent"][0].pop("cost"), "overall.cost.by_role.agent.0.cost: missing"),
    (lambda d: d["coverage"].update(complete=False), "coverage.complete: False disagrees with the lists of faults"),
    (lambda d: d.pop("usage"), "usage: missing"),
])
def test_agg_json_faults_name_the_file_and_field(tmp_path, change, message):
    p = edited(tmp_path, change)
    with pytest.raises(AggFileError, match=re.escape(f"{p}: {message}")):
        read_agg(p)


def test_agg_json_not_json_or_not_an_object(tmp_path):
    p = tmp_path / "agg.json"
    p.write_text("[1, 2]")
    with pytest.raises(AggFileError, match=re.escape(f"{p}: (the document): expected an object, got list")):
        read_agg(p)
    p.write_text("{oops")
    with pytest.raises(AggFileError, match=re.escape(f"{p}: not JSON (")):
        read_agg(p)
    with pytest.raises(AggFileError, match="candidate: overall: missing"):
        compare(read_agg(AGGS[0]), {"version": 1, "label": "x", "sources": [], "profile": "full",
                                    "coverage": read_agg(AGGS[0]).coverage.to_dict(), "tasks": {}})


def test_a_records_token_trajectory_is_typed_and_written_as_before():
    """`tokens` reads back as the type it was written from (the token path's `TokenTrace`, the chat
    path's `TurnTokens`), and its JSON is the record format's: `weight_versions` only where stamped."""
    import json

    from trainer.formats.record import EpisodeRecord, TokenTrace, TurnTokens

    trace = TokenTrace(prompt_ids=[1, 2], response_ids=[3, 4, 5], response_mask=[1, 0, 1], logprobs=[-0.5, None, -1.0])
    rec = EpisodeRecord("t.py:test_x", 0, 7, tokens=trace)
    d = json.loads(rec.to_json())
    assert d["tokens"] == {"prompt_ids": [1, 2], "response_ids": [3, 4, 5], "response_mask": [1, 0, 1],
                           "logprobs": [-0.5, None, -1.0]}
    back = EpisodeRecord.from_dict(d)
    assert isinstance(back.tokens, TokenTrace) and back.tokens == trace and back.to_dict() == rec.to_dict()
    trace.weight_versions = [[3, 3], [3, 4]]
    assert EpisodeRecord.from_dict(json.loads(rec.to_json())).tokens.weight_versions == [[3, 3], [3, 4]]
    chat = EpisodeRecord("t.py:test_x", 1, 7, tokens=TurnTokens([{"prompt_ids": [1], "response_ids": [2]}]))
    d = json.loads(chat.to_json())
    assert d["tokens"] == {"turns": [{"prompt_ids": [1], "response_ids": [2]}]}
    assert EpisodeRecord.from_dict(d).tokens == chat.tokens
    assert EpisodeRecord.from_dict(json.loads(EpisodeRecord("u", 0, 0).to_json())).tokens is None
