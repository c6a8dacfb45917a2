"""`tbt export --format tb-infer`: our records as the ThinkingBox framework's `DecodeResult` rows.

The rows are checked against the framework's row shape as described in docs/evaluation.md
("Export"; read from its public chat_types / usage types), counted the way its `tb agg` counts
them (runs, passes, errors per task), and read back by `tbt aggregate` to the same numbers as the
records themselves: the round trip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fakes import Endpoint, completion
from trainer.cli import app
from trainer.formats.attempts import read_attempts
from trainer.formats.record import EpisodeRecord

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
EPISODES = ROOT / "tests" / "fixtures" / "datasets" / "episodes"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------------- the framework's row, as we read it

ROW_KEYS = {"uid", "messages", "test_result", "test_context", "test_tags", "tools", "raw_messages",
            "user_llm_history", "usage", "metadata", "is_system_error", "finish_reason"}
FINISH = {"done", "end_turn_tool", "agent_error", "agent_limit", "user_limit", "user_done", "no_user_llm", "skipped"}


def check_message(m: dict, where: str) -> None:
    assert isinstance(m.get("metadata"), dict), where
    t = m.get("T")
    if t == "Text":
        assert m["role"] in ("system", "user", "assistant") and isinstance(m["content"], str), where
        assert m["metadata"].get("tag", "text") in ("think", "text", "direct"), where
    elif t == "ParallelToolCall":
        assert m["tool_calls"], where
        for c in m["tool_calls"]:
            check_message(c, where)
    elif t == "ToolCall":
        assert isinstance(m["name"], str) and isinstance(m["arguments"], dict) and isinstance(m["id"], str), where
    elif t == "ToolResponse":
        assert isinstance(m["name"], str) and isinstance(m["content"], str) and isinstance(m["id"], str), where
    else:
        raise AssertionError(f"{where}: message type T={t!r}")


def check_row(r: dict, where: str) -> None:
    """What the framework's DecodeResult model accepts (field names, types, ranges)."""
    assert set(r) == ROW_KEYS, (where, set(r) ^ ROW_KEYS)
    assert isinstance(r["uid"], str) and ":" in r["uid"], where
    for m in r["messages"]:
        check_message(m, where)
    tr = r["test_result"]
    if tr is None:
        assert r["is_system_error"] is True and isinstance(r["metadata"]["error"]["message"], str), where
        assert set(r["metadata"]["error"]) == {"type", "message", "tb"}, where
    else:
        assert type(tr["result"]) is bool and type(tr["is_system_error"]) is bool, where
        assert isinstance(tr["reward"], float) and 0.0 <= tr["reward"] <= 1.0, where
        assert type(tr["lineno"]) is int and all(isinstance(tr[k], str) for k in ("tb", "prints", "line_content"))
        assert isinstance(tr["metadata"], dict), where
    assert type(r["is_system_error"]) is bool and r["finish_reason"] in FINISH, where
    for u in r["usage"]:
        assert type(u["input_tokens"]) is int and type(u["output_tokens"]) is int, where
        assert type(u["input_tokens_details"]["cached_tokens"]) is int, where
        assert type(u["output_tokens_details"]["reasoning_tokens"]) is int, where
    assert type(r["metadata"]["repetition"]) is int and isinstance(r["metadata"]["scenario"], str), where


def tb_agg_counts(rs: list[dict]) -> dict[str, tuple[int, int, int]]:
    """Per task (runs, passed, errors), counted as the framework's tb agg counts a row: an error when
    the row or its test result is a system error or there is no test result, else its `result`."""
    out: dict[str, list[int]] = {}
    for r in rs:
        t = out.setdefault(r["uid"], [0, 0, 0])
        t[0] += 1
        tr = r["test_result"]
        if r["is_system_error"] or tr is None or tr["is_system_error"]:
            t[2] += 1
        else:
            t[1] += tr["result"]
    return {uid: tuple(v) for uid, v in out.items()}


# ---------------------------------------------------------------------------- the round trip

def preflight(body: dict) -> bool:
    """The one cheap request a run sends each endpoint before its first episode."""
    return body.get("max_completion_tokens") == 1 or body.get("max_tokens") == 1

@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The toy list × 4 with a judge that is down after the preflight: the keys of the tasks that ask
    it end in (grading) system errors, left unresolved."""
    d = tmp_path_factory.mktemp("export")
    judge = Endpoint(lambda path, body: completion("Yes") if preflight(body) else (503, {"error": "overloaded"}))
    try:
        r = invoke("eval", SAMPLES, "--test-list", TOY, "--policy", "synthetic:p=0.5", "--judge",
                   f"openai:{judge.url}#j,retries=0", "--retries", "0", "-n", "4", "-o", d / "run.jsonl",
                   "--errors-output", d / "err.jsonl", "--coverage-profile", "none",
                   "--aggregate-output", d / "agg.json", "--no-progress")
    finally:
        judge.stop()
    assert r.exit_code == 0, r.output
    assert (d / "err.jsonl").read_text().strip(), "the fixture run is meant to hold system errors"
    return d


NUMBERS = ("tasks", "attempts", "passes", "pass_at_1", "pass_at_k", "pass_hat_k", "observed_k_of_k",
           "solved_at_least_once")


def numbers(doc: dict) -> dict:
    blocks = {"overall": doc["overall"], **{f"domain {k}": v for k, v in doc["by_domain"].items()},
              **{f"tag {k}": v for k, v in (doc.get("by_tag") or {}).items()}}
    cov = {k: doc["coverage"][k] for k in ("complete", "expected", "scored", "system_error_attempts")}
    for k in ("missing", "unresolved", "duplicated", "unexpected", "stale"):  # the keys (causes and places differ)
        cov[k] = [x.split(": ")[0] for x in doc["coverage"][k]]
    return {"tasks": doc["tasks"], "coverage": cov, "agent usage": doc["usage"].get("agent"),
            **{name: {k: b[k] for k in NUMBERS if k in b} for name, b in blocks.items()}}


@pytest.mark.parametrize("with_dataset", [False, True], ids=["records only", "with the dataset"])
def test_tbt_aggregate_of_the_export_gives_the_records_numbers(toy_run, tmp_path, with_dataset):
    d = toy_run
    tb = tmp_path / "run.tb.jsonl"
    r = invoke("export", d / "run.jsonl", d / "err.jsonl", "--format", "tb-infer", "-o", tb)
    assert r.exit_code == 0, r.output
    ours, theirs = rows(d / "run.jsonl"), rows(tb)
    errors = rows(d / "err.jsonl")
    assert len(theirs) == len(ours) + len(errors) == 20  # one row per task × repetition: 5 × 4
    for i, row in enumerate(theirs):
        check_row(row, f"{tb}:{i + 1}")
    scope = ["--dataset", SAMPLES, "--test-list", TOY] if with_dataset else []
    a, b = tmp_path / "ours.agg.json", tmp_path / "tb.agg.json"
    for src, out in (([d / "run.jsonl", d / "err.jsonl"], a), ([tb], b)):
        r = invoke("aggregate", *src, *scope, "--repeat", "4", "--coverage-profile", "none", "-o", out)
        assert r.exit_code == 0, r.output
    mine, back = json.loads(a.read_text()), json.loads(b.read_text())
    assert numbers(back) == numbers(mine)
    assert mine["coverage"]["unresolved"] and mine["overall"]["attempts"] == len(ours)  # the run has both kinds
    # what the framework's tb agg counts: every key a run, a system error an error, never a pass
    per_task = {uid: (4, t["c"], 4 - t["n"]) for uid, t in mine["tasks"].items()}
    assert tb_agg_counts(theirs) == per_task
    # each row is its record: same key, verdict, messages in order
    by_key = {(x["uid"], x["repetition"]): x for x in ours + errors}
    for row in theirs:
        rec = by_key[(row["uid"], row["metadata"]["repetition"])]
        assert row["metadata"]["fingerprint"] == rec["fingerprint"] and row["metadata"]["scenario"] == rec["scenario"]
        if rec["system_error"] is None:
            assert row["test_result"]["result"] is rec["verdict"]["passed"]
            assert row["metadata"]["tbt"]["end_reason"] == rec["end_reason"]
        else:  # a grading fault is the test's error, as the framework marks a test that raised
            assert rec["system_error"].startswith("grading: ") and row["test_result"]["is_system_error"] is True
        texts = [m["content"] for m in row["messages"] if m["T"] == "Text" and m["metadata"].get("tag") != "think"]
        assert texts == [m["content"] for m in rec["messages"] if m["role"] != "tool" and m.get("content")]


def test_a_replaced_system_error_is_not_a_row(toy_run, tmp_path):
    """tb infer writes one row per key: a system-error attempt that a scored one replaced is no row
    (tbt aggregate of the records counts it in the task's system_errors, the export cannot)."""
    d = toy_run
    scored = EpisodeRecord.from_dict(rows(d / "run.jsonl")[0])
    earlier = EpisodeRecord.from_dict({**scored.to_dict(), "system_error": "sandbox: server exited",
                                       "end_reason": "system_error"})
    errs = tmp_path / "err.jsonl"
    errs.write_text(earlier.to_json() + "\n")
    tb = tmp_path / "tb.jsonl"
    r = invoke("export", d / "run.jsonl", errs, "-o", tb)
    assert r.exit_code == 0 and "1 system-error attempt(s) a later one replaced are not rows" in r.output
    assert len(rows(tb)) == len(rows(d / "run.jsonl"))
    assert not any(x["is_system_error"] for x in rows(tb))


# ---------------------------------------------------------------------------- messages, finish and errors

DESK_QUERY = "What do I owe?"


def think(reasoning: str, content: str = "") -> str:  # raw Qwen model text
    return f"<think>\n{reasoning}\n</think>\n\n{content}"


def call(name: str, **args) -> str:
    return think("look up", f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>")


def desk_model(path: str, body: dict):
    """The desk task: a lookup whose tool speaks to the member, then a call tb_interpret rejects, then
    the end-turn tool. Every other task: the endpoint fails (a system error of the episode)."""
    if preflight(body):
        return completion("ok")
    if not any(DESK_QUERY in str(m.get("content")) for m in body["messages"]):
        return 503, {"error": "overloaded"}
    turns = [call("find_member", email="ada@example.org"),
             think("look up", '<tool_call>\n{"name": "list_loans", "arguments": {"member_id": \n</tool_call>'),
             call("return_book", loan_id="L-0001")]
    n = sum(m["role"] == "assistant" for m in body["messages"])
    return completion(turns[min(n, len(turns) - 1)])


def test_messages_and_end_reasons_as_the_framework_types_them(tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- episodes.py:test_desk\n- episodes.py:test_fine\n")
    fake = Endpoint(desk_model)
    try:
        r = invoke("run", EPISODES, "--test-list", listed, "--policy", f"openai:{fake.url}#m,retries=0",
                   "--user", "scripted", "--judge", "synthetic", "--retries", "0", "-n", "1",
                   "-o", tmp_path / "r.jsonl", "--errors-output", tmp_path / "e.jsonl", "--no-progress")
    finally:
        fake.stop()
    assert r.exit_code == 1, r.output  # test_fine's episode is a system error, left unresolved
    tb = tmp_path / "tb.jsonl"
    r = invoke("export", tmp_path / "r.jsonl", tmp_path / "e.jsonl", "-o", tb)
    assert r.exit_code == 0, r.output
    desk, fine = rows(tb)
    for i, row in enumerate((desk, fine)):
        check_row(row, f"row {i + 1}")
    assert desk["uid"] == "episodes.py:test_desk" and desk["finish_reason"] == "end_turn_tool"
    kinds = [(m["T"], m.get("role"), m["metadata"].get("tag")) for m in desk["messages"]]
    assert kinds[:2] == [("Text", "system", None), ("Text", "user", None)]  # no scenario instructions: one system
    direct = [m for m in desk["messages"] if m["metadata"].get("tag") == "direct"]
    assert [m["content"] for m in direct] == ["Welcome back, Ada Byron! You owe 0.0."]
    groups = [m for m in desk["messages"] if m["T"] == "ParallelToolCall"]
    assert [[c["name"] for c in g["tool_calls"]] for g in groups] == [["find_member"], [""], ["return_book"]]  # its JSON unreadable: no name
    rejected = groups[1]["tool_calls"][0]
    answer = next(m for m in desk["messages"] if m["T"] == "ToolResponse" and m["id"] == rejected["id"])
    assert rejected["metadata"]["error"] == answer["content"] and answer["content"].startswith("Error")
    assert groups[2]["metadata"]["is_end_turn_tool"] and groups[2]["tool_calls"][0]["metadata"]["is_end_turn_tool"]
    assert not any(m["T"] == "ToolResponse" and m["id"] == groups[2]["tool_calls"][0]["id"] for m in desk["messages"])
    assert desk["usage"][0]["input_tokens"] > 0 and desk["usage"][0]["output_tokens"] > 0
    # the endpoint's failure: no test result, the row a system error saying why
    assert fine["uid"] == "episodes.py:test_fine" and fine["is_system_error"] and fine["test_result"] is None
    assert "503" in fine["metadata"]["error"]["message"]
    (a,) = [x for x in read_attempts([tb]).attempts if x.uid == "episodes.py:test_fine"]
    assert a.system_error is not None and a.system_error.startswith("tb: policy") and not a.passed


def test_the_frameworks_own_usage_and_error_rows_are_read(tmp_path):
    """A row as tb infer writes it: usage with input_tokens_details, and an episode that failed
    (test_result null, is_system_error, metadata.error an ErrorInfo)."""
    p = tmp_path / "tb.jsonl"
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 9,
             "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": 109}
    p.write_text(json.dumps({"uid": "a.py:t", "messages": [], "test_result": {"result": True, "reward": 1.0},
                             "usage": [usage, usage], "metadata": {"repetition": 0}}) + "\n"
                 + json.dumps({"uid": "a.py:t", "messages": [], "test_result": None, "usage": [],
                               "metadata": {"repetition": 1, "error": {"type": "RuntimeError", "message": "boom",
                                                                       "tb": "Traceback ..."}},
                               "is_system_error": True}) + "\n")
    ok, err = read_attempts([p]).attempts
    u = ok.usage["agent"]
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, ok.passed) == (200, 120, 18, True)
    assert (err.passed, err.system_error) == (False, "tb: boom")


# ---------------------------------------------------------------------------- bad input

def test_bad_input_is_named_and_nothing_written(toy_run, tmp_path):
    d = toy_run
    out = tmp_path / "out.jsonl"
    tb = tmp_path / "tb.jsonl"
    assert invoke("export", d / "run.jsonl", "-o", tb).exit_code == 0
    r = invoke("export", tb, "-o", out)  # already exported
    assert r.exit_code == 2 and f"{tb}:1: a tb infer row already" in r.output and not out.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text((d / "run.jsonl").read_text().splitlines()[0] + "\n" + '{"version": 1, "uid": "a.py:t"}\n')
    r = invoke("export", bad, "-o", out)
    assert r.exit_code == 2 and f"{bad}:2: repetition" in " ".join(r.output.split()) and not out.exists()
    r = invoke("export", d / "run.jsonl", "--format", "csv", "-o", out)
    assert r.exit_code == 2 and "--format 'csv': expected one of tb-infer" in r.output


def test_records_of_two_runs_are_refused_unless_one_is_chosen(toy_run, tmp_path):
    d = toy_run
    other = tmp_path / "other.jsonl"
    r = invoke("run", SAMPLES, "--test-list", TOY, "--policy", "synthetic:p=0.9", "-n", "1", "-o", other,
               "--no-progress")
    assert r.exit_code == 0, r.output
    out = tmp_path / "out.jsonl"
    r = invoke("export", d / "run.jsonl", other, "-o", out)
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "2 different runs" in text and not out.exists()
    ident = read_attempts([other]).attempts[0].identity.id
    r = invoke("export", d / "run.jsonl", other, "--keep-identity", ident, "-o", out)
    assert r.exit_code == 0 and "left out" in r.output
    assert {x["metadata"]["tbt"]["run_id"] for x in rows(out)} == {ident} and len(rows(out)) == 5
