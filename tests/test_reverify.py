"""`tbt reverify`: stored episodes replayed in fresh sandboxes and regraded (trainer/eval/reverify.py).

Real components throughout: the toy tasks of the sample dataset played by the synthetic policy
through `runner.run` (real sandboxes, the in-process toy domain, the real grader), the records
file as written, and `tbt reverify` on it; a change is made where it happens in life (a test file
of a copied dataset edited, a rubric reworded) or, for what no edit of ours can produce (a
server answering otherwise), in the record the run left.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.eval.reverify import json_paths_differ
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY_LIST = SAMPLES / "lists" / "toy.yaml"


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The toy tasks, 3 times each, some deviating (passes, failures, judge questions)."""
    out = tmp_path_factory.mktemp("reverify") / "run.jsonl"
    res = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.5", test_list=str(TOY_LIST)), RunPlan(output=out, repeat=3))
    assert res.written == 15 and res.unresolved == []
    return out


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def reverify(*args):
    r = CliRunner().invoke(app, ["reverify", *map(str, args)])
    return r, (json.loads(r.stdout.strip().splitlines()[-1]) if "--json" in args and r.stdout.strip() else None)


def test_a_run_reverifies_identical(played):
    r, s = reverify(played, "--dataset", SAMPLES, "--json")
    assert r.exit_code == 0, r.output
    assert (s["records"], s["identical"], s["changed"], s["fingerprint_changed"], s["skipped"]) == (15, 15, [], [], [])
    # the toy domain stamps each new loan with the wall clock: named, and not a verdict change
    loans = {f"{d['uid']} #{d['repetition']}" for d in lines(played)
             if any(c["name"] == "checkout_book" and "loan" in (c.get("result") or "") for c in d["tool_calls"])}
    assert loans and set(s["results_differ"]) == loans
    assert "checkout_book: loan.recorded_at" in r.stderr


def test_an_edited_check_names_the_changed_verdicts(played, tmp_path):
    ds = tmp_path / "samples"
    shutil.copytree(SAMPLES, ds)
    f = ds / "test_case" / "toy" / "toy_loans.py"
    src = f.read_text()
    line = '    fines = record(fx, "members", "M-001")["fines_due"]\n'
    assert src.count(line) == 1
    f.write_text(src.replace(line, line.rstrip("\n") + '; assert fines == 0.75, "edited since the run"\n'))  # same line numbers
    r, s = reverify(played, "--dataset", ds, "--json")
    assert r.exit_code == 1, r.output
    uid = "toy_loans.py:test_fine_correction"
    recorded = {d["repetition"]: d["verdict"] for d in lines(played) if d["uid"] == uid}
    # the edited assertion fails wherever the fine was removed, and passes where it was not (then the
    # next assertion decides, as before): exactly the records whose fine was removed change
    removed = {rep for rep, v in recorded.items() if v["lineno"] != 36}
    assert removed and {(c["uid"], c["repetition"]) for c in s["changed"]} == {(uid, rep) for rep in removed}
    assert s["identical"] == 15 - len(removed) and s["fingerprint_changed"] == []
    for c in s["changed"]:
        assert c["fields"]["explanation"]["replayed"] == "edited since the run"
        assert c["fields"]["lineno"]["replayed"] == 35
        if recorded[c["repetition"]]["passed"]:
            assert c["fields"]["passed"] == {"recorded": True, "replayed": False}
    assert f"changed  {uid} #" in r.stderr and "passed: true -> false" in r.stderr


def test_a_reworded_rubric_is_a_changed_task_and_its_recorded_answer_is_not_reused(played, tmp_path):
    ds = tmp_path / "samples"
    shutil.copytree(SAMPLES, ds)
    f = ds / "test_case" / "toy" / "toy_traps.py"
    old = "Does the assistant decline the checkout because Dana's account is suspended"
    f.write_text(f.read_text().replace(old, "Does the assistant refuse the checkout because Dana is suspended"))
    uid = "toy_traps.py:test_checkout_suspended"
    asked = {d["repetition"] for d in lines(played) if d["uid"] == uid and d["verdict"]["judge_calls"]}
    r, s = reverify(played, "--dataset", ds, "--json")
    assert r.exit_code == 1, r.output
    assert s["fingerprint_changed"] == [f"{uid} #{rep}" for rep in range(3)]  # the rubric is the task's init
    assert {(c["uid"], c["repetition"]) for c in s["changed"]} == {(uid, rep) for rep in asked}
    for c in s["changed"]:
        assert "judge question 1 is now 'Does the assistant refuse the checkout" in c["fields"]["system_error"]["replayed"]
        assert c["fingerprint_changed"]
    # asked again (the record's judge: synthetic), the new question is answered: no system error,
    # and what differs is the question in judge_calls
    r, s = reverify(played, "--dataset", ds, "--json", "--reask-judge")
    assert r.exit_code == 1, r.output
    for c in s["changed"]:
        assert set(c["fields"]) == {"judge_calls"}
        assert c["fields"]["judge_calls"]["replayed"][0]["question"].startswith("Does the assistant refuse")


def test_judge_answers_come_from_the_record_unless_asked_again(played, tmp_path):
    recs = lines(played)
    i = next(i for i, d in enumerate(recs) if d["verdict"]["judge_calls"] and d["verdict"]["passed"])
    recs[i]["verdict"]["judge_calls"][0]["answer"] = False  # as if the run's judge had said no
    tampered = write(tmp_path / "tampered.jsonl", recs)
    r, s = reverify(tampered, "--dataset", SAMPLES, "--json")
    assert r.exit_code == 1 and [(c["uid"], c["repetition"]) for c in s["changed"]] == [(recs[i]["uid"], recs[i]["repetition"])]
    assert s["changed"][0]["fields"]["passed"] == {"recorded": True, "replayed": False}
    # re-asked: the synthetic judge (the record's) answers yes again, every verdict as recorded
    r, s = reverify(played, "--dataset", SAMPLES, "--json", "--reask-judge")
    assert r.exit_code == 0 and s["identical"] == 15, r.output
    # re-asked with no judge: every record whose test asks one is now a system error
    r, s = reverify(played, "--dataset", SAMPLES, "--json", "--reask-judge", "--judge", "none")
    asks = {(d["uid"], d["repetition"]) for d in lines(played) if d["verdict"]["judge_calls"]}
    assert r.exit_code == 1 and {(c["uid"], c["repetition"]) for c in s["changed"]} == asks
    assert all("no judge is configured" in c["fields"]["system_error"]["replayed"] for c in s["changed"])


def test_an_ambiguous_recorded_answer_fails_closed_again(played, tmp_path):
    recs = lines(played)
    i = next(i for i, d in enumerate(recs) if d["verdict"]["judge_calls"] and d["verdict"]["passed"])
    call = recs[i]["verdict"]["judge_calls"][0]
    recs[i]["verdict"]["judge_calls"][0] = {"question": call["question"], "answer": None, "ambiguous": ["Maybe.", "Yes and no."]}
    r, s = reverify(write(tmp_path / "ambiguous.jsonl", recs), "--dataset", SAMPLES, "--json")
    (c,) = s["changed"]
    assert c["fields"]["passed"]["replayed"] is False and "judge_calls" not in c["fields"]  # the same calls, replayed
    assert c["fields"]["explanation"]["replayed"].startswith("judge answer ambiguous (asked twice)")
    assert "Yes and no." in c["fields"]["explanation"]["replayed"] and "system_error" not in c["fields"]


def test_a_different_end_state_or_tool_result_is_shown_where_it_differs(played, tmp_path):
    """What a server answering otherwise looks like: the run's record holding a golden-diff row the
    replay does not leave, and a tool result the replay does not return."""
    recs = lines(played)
    i = next(i for i, d in enumerate(recs) if not d["verdict"]["passed"] and any(d["verdict"]["diff"].values()))
    server, rows = next((s, r) for s, r in recs[i]["verdict"]["diff"].items() if r)
    gone = rows.pop(0)
    j = next(j for j, d in enumerate(recs) if d["tool_calls"] and d["tool_calls"][0]["name"] == "find_member" and j != i)
    result = json.loads(recs[j]["tool_calls"][0]["result"])
    result["fines_due"] = 99.0
    recs[j]["tool_calls"][0]["result"] = json.dumps(result)
    r, s = reverify(write(tmp_path / "server.jsonl", recs), "--dataset", SAMPLES, "--json")
    assert r.exit_code == 1
    (c,) = s["changed"]
    assert (c["uid"], c["repetition"]) == (recs[i]["uid"], recs[i]["repetition"])
    assert c["rows"] == {server: {"recorded_only": [], "replayed_only": [gone]}}
    assert f"diff {server}: + " in r.stderr and gone["path"] in r.stderr
    assert f"{recs[j]['uid']} #{recs[j]['repetition']}" in s["results_differ"]
    assert json_paths_differ(recs[j]["tool_calls"][0]["result"], json.dumps({**result, "fines_due": 0.0})) == ["fines_due"]


def test_what_cannot_be_replayed_is_named(played, tmp_path):
    recs = lines(played)
    gone = {**recs[0], "uid": "toy_loans.py:test_no_longer_there"}
    syserr = {**recs[1], "system_error": "policy endpoint: HTTP 503", "end_reason": "system_error"}
    tb = {"uid": recs[2]["uid"], "test_result": {"result": True, "reward": 1.0}, "metadata": {"repetition": 0}}
    r, s = reverify(write(tmp_path / "mixed.jsonl", [gone, syserr, tb, recs[3]]), "--dataset", SAMPLES, "--json")
    assert r.exit_code == 1 and s["records"] == 4 and s["identical"] == 1
    assert [(c["uid"], c["reason"]) for c in s["changed"]] == [(gone["uid"], "task not in the dataset")]
    assert [k["reason"].split(" (")[0].split(":")[0] for k in s["skipped"]] == ["a system error, never scored",
                                                                              "a tb infer record"]


@pytest.mark.parametrize("argv, message", [
    (["{run}"], "give --dataset DIR, the folder the records were played on (their dataset: samples)"),
    (["{run}", "--dataset", str(SAMPLES), "--judge", "synthetic"], "--judge is the judge to re-ask"),
    (["{run}", "--dataset", str(SAMPLES), "--reask-judge", "--judge", "oracle"], "unknown judge kind 'oracle'"),
    (["{bad}", "--dataset", str(SAMPLES)], "bad.jsonl:2: "),
])
def test_bad_input_is_one_message_and_exit_2(played, tmp_path, argv, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(played.read_text().splitlines()[0] + "\n{\"uid\": 3}\n")
    r = CliRunner().invoke(app, ["reverify", *[a.format(run=played, bad=bad) for a in argv]])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output
