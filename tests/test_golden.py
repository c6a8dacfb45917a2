"""`tbt validate-golden` run as the real CLI on fixture datasets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from trainer.cli import app
from trainer.env.golden import mutations

FIX = Path(__file__).parent / "fixtures" / "datasets"
SANDBOX = FIX / "sandbox"


def run(*args: str) -> tuple[int, dict]:
    r = CliRunner().invoke(app, ["validate-golden", *args, "--json"])
    return r.exit_code, json.loads(r.stdout.strip().splitlines()[-1])


def test_fixture_dataset_perturb_and_noop():
    code, s = run(str(SANDBOX), "--perturb", "--noop", "--concurrency", "3")
    assert code == 0, s["failures"]
    assert (s["tasks"], s["passed"], s["failed"], s["system_errors"]) == (5, 5, 0, 0)
    assert s["judge_not_evaluated"] == 2  # replays ask no judge: the database part decides
    p = s["perturbed"]
    assert (p["tasks"], p["sensitive"]) == (4, 4) and p["read_only"] == ["notes_tasks.py:test_lookup"]
    weak = {(q["uid"], q["kind"], q["tool"], q.get("argument")) for q in p["passing_perturbations"]}
    assert weak == {  # the planted weak check: its label writes are never read
        ("notes_tasks.py:test_weak_check", "mutate", "add_note", "label"),
        ("notes_tasks.py:test_weak_check", "drop", "set_label", None),
        ("notes_tasks.py:test_weak_check", "mutate", "set_label", "note_id"),
        ("notes_tasks.py:test_weak_check", "mutate", "set_label", "label"),
    }
    assert s["noop"] == {"tasks": 5, "passed": 1, "expected_to_pass": 1}  # only the look-up
    assert s["failures"] == []


def notes_dataset(root: Path, tests: str) -> Path:
    """A one-file dataset over the notes fixture server."""
    (root / "agent").mkdir()
    (root / "agent" / "a.yaml").write_text("system_instructions: hi\n")
    (root / "scenario").mkdir()
    (root / "scenario" / "notes.yaml").write_text((SANDBOX / "scenario" / "notes.yaml").read_text())
    (root / "test_case").mkdir()
    (root / "test_case" / "cases.py").write_text(tests)
    (root / "servers.yaml").write_text((SANDBOX / "servers.yaml").read_text().replace(
        "../../servers", str(FIX.parent / "servers")))
    return root


GOLDEN = """
    init:
      notes:
        golden_test_case:
          tool_interactions:
          - {tool: add_note, parameters: {text: hi}}
"""


def test_failures_are_reported_and_exit_nonzero(tmp_path):
    ds = notes_dataset(tmp_path, f'''
def test_wrong(x, judge):
    """!
    scenario: notes
    query: add a note{GOLDEN}    """
    assert x.effects["notes"]["result_db_state"]["notes"][-1]["text"] == "bye", "expected bye"


def test_broken(x, judge):
    """!
    scenario: notes
    query: add a note{GOLDEN}    """
    return x.effects["nowhere"]
''')
    code, s = run(str(ds))
    assert code == 1
    assert {f["uid"]: (f["kind"], f["explanation"][:12]) for f in s["failures"]} == {
        "cases.py:test_wrong": ("golden_failed", "expected bye"), "cases.py:test_broken": ("system_error", "KeyError: 'n")}
    assert (s["tasks"], s["passed"], s["failed"], s["system_errors"]) == (2, 0, 1, 1)


def test_stdio_servers_yaml_and_python(tmp_path):
    lst = tmp_path / "l.yaml"
    lst.write_text("- notes_tasks.py:test_delete_note\n")
    code, s = run(str(SANDBOX), "--test-list", str(lst), "--servers", str(SANDBOX / "servers_stdio.yaml"),
                  "--python", sys.executable, "--strip-sources", "--noop")
    assert code == 0, s["failures"]
    assert (s["passed"], s["noop"]["passed"]) == (1, 0)


def test_insensitive_task_is_a_failure(tmp_path):
    ds = notes_dataset(tmp_path, f'''
def test_blind(x, judge):
    """!
    scenario: notes
    query: add a note{GOLDEN}    """
    assert "notes" in x.effects
''')
    code, s = run(str(ds), "--perturb", "--noop")
    assert code == 1
    assert {f["kind"] for f in s["failures"]} == {"insensitive", "noop_passed"}
    assert (s["perturbed"]["tasks"], s["perturbed"]["sensitive"]) == (1, 0)


def test_alternative_golden_paths_must_pass_too(tmp_path):
    ds = notes_dataset(tmp_path, '''
def test_hi(x, judge):
    """!
    scenario: notes
    query: add a note saying hi
    init:
      notes:
        golden_test_case:
          tool_interactions:
          - {tool: add_note, parameters: {text: hi}}
          alternatives:
          - tool_interactions:
            - {tool: list_notes, parameters: {}}
            - {tool: add_note, parameters: {text: hi}}
          - tool_interactions:
            - {tool: add_note, parameters: {text: hello}}
    """
    new = [n["text"] for n in x.effects["notes"]["result_db_state"]["notes"]
           if n not in x.effects["notes"]["initial_db_state"]["notes"]]
    assert new == ["hi"], f"new notes: {new}"
''')
    code, s = run(str(ds))
    assert code == 1 and s["passed"] == 1
    assert s["alternatives"] == {"tasks": 1, "paths": 2, "passed": 1}
    assert [(f["kind"], f["explanation"]) for f in s["failures"]] == [
        ("alternative_failed", "alternative path 2: new notes: ['hello']")]


def test_mutations_preserve_type():
    assert mutations(True) == [False] and mutations(3) == [4] and mutations(2.5) == [3.5]
    assert mutations("a") == ["a_x"] and mutations("") == ["x"] and mutations([1, 2]) == [[1]]
    assert mutations(None) == [] and mutations({"a": 1}) == [] and mutations([]) == []
