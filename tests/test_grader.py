"""The grader's rules (docs/sandbox.md, "Verdicts"; the arguments: docs/tasks.md) on a real fixture dataset, in-process and isolated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.env.grading.context import Judge, JudgeUnavailable, TestContext
from trainer.env.grading.grader import Verdict, context_from_json, context_to_json, grade

DATASET = Path(__file__).parent / "fixtures" / "datasets" / "grading"


@pytest.fixture(scope="module")
def tasks():
    from trainer.env.taskformat.tasks import load_dataset
    return load_dataset(DATASET, strict=True).tasks


def ctx(count: int = 2, response: str = "") -> TestContext:
    return TestContext(response=response, effects={"notes": {"count": count}},
                       messages=[{"role": "user", "content": "hello"}])


class Scripted(Judge):
    def __init__(self, answer: bool):
        self.answer, self.asked = answer, []

    def text_yesno(self, text: str, question: str) -> bool:
        self.asked.append((text, question))
        return self.answer


def line_of(task, needle: str) -> int:
    return next(i for i, line in enumerate(task.file.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_rules(tasks, isolate):
    t = lambda name: tasks[f"grading_cases.py:{name}"]  # noqa: E731
    v = grade(t("test_passes"), ctx(), isolate=isolate)
    assert (v.passed, v.reward, v.system_error, v.explanation, v.lineno) == (True, 1.0, None, "", None)

    v = grade(t("test_fails"), ctx(), isolate=isolate)
    assert (v.passed, v.reward, v.system_error) == (False, 0.0, None)
    assert v.explanation == "expected 3 notes, found 2"
    assert v.lineno == line_of(t("test_fails"), "assert count == 3")

    v = grade(t("test_bare_assert"), ctx(), isolate=isolate)
    assert not v.passed and v.system_error is None and v.explanation == "AssertionError()"

    v = grade(t("test_partial"), ctx(), isolate=isolate)
    assert (v.passed, v.reward, v.system_error) == (False, 0.25, None)
    v = grade(t("test_over_one"), ctx(), isolate=isolate)
    assert (v.passed, v.reward) == (True, 1.0)

    v = grade(t("test_crashes"), ctx(), isolate=isolate)
    assert not v.passed and v.reward == 0.0 and v.system_error.startswith("KeyError")
    assert v.lineno == line_of(t("test_crashes"), 'x.effects["missing_server"]')

    v = grade(t("test_fixture"), ctx(), isolate=isolate)
    assert v.passed, v
    assert not grade(t("test_fixture"), ctx(count=5), isolate=isolate).passed


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_judge_answers_and_records(tasks, isolate):
    task = tasks["grading_cases.py:test_asks_judge"]
    yes, no = Scripted(True), Scripted(False)
    v = grade(task, ctx(response="thank you!"), yes, isolate=isolate)
    assert v.passed and v.judge_calls == [{"question": "Is the reply polite?", "answer": True}]
    assert yes.asked == [("thank you!", "Is the reply polite?")]  # the parent's judge was asked
    v = grade(task, ctx(response="go away"), no, isolate=isolate)
    assert not v.passed and v.system_error is None and v.explanation == "the reply is not polite"


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_no_judge_configured_is_a_system_error(tasks, isolate):
    v = grade(tasks["grading_cases.py:test_asks_judge"], ctx(response="hi"), isolate=isolate)
    assert not v.passed and v.reward == 0.0
    assert v.system_error.startswith("JudgeUnavailable") and "no judge is configured" in v.system_error

    class Down(Judge):
        def text_yesno(self, text, question):
            raise JudgeUnavailable("judge unreachable after 4 attempts")

    v = grade(tasks["grading_cases.py:test_asks_judge"], ctx(response="hi"), Down(), isolate=isolate)
    assert v.system_error and "unreachable" in v.system_error


def test_hostile_test_cannot_take_the_grader_down(tasks):
    v = grade(tasks["grading_cases.py:test_exits"], ctx(), isolate=True)
    assert not v.passed and "exited with 9" in v.system_error


def test_verdict_and_context_are_json():
    v = Verdict(False, 0.0, None, "why", 12, [{"question": "q", "answer": None}])
    assert Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v
    from trainer.env.grading.context import ToolCall, ToolCallRecord
    c = TestContext(response="r", effects={"s": {"a": 1}},
                    tool_calls=[ToolCallRecord(ToolCall("t", {"x": 1}, "c1"), "ok")], session_id="s1")
    assert context_from_json(json.loads(json.dumps(context_to_json(c)))) == c


def _dataset(tmp_path: Path, test_files: dict[str, str]) -> dict:
    from trainer.env.taskformat.tasks import load_dataset
    for rel in ("agent/think.yaml", "scenario/notes.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((DATASET / rel).read_text())
    (tmp_path / "test_case").mkdir()
    for name, text in test_files.items():
        (tmp_path / "test_case" / name).write_text(text)
    return load_dataset(tmp_path, strict=True).tasks


def test_isolated_test_that_prints_a_lot_or_hangs_is_bounded(tmp_path):
    from trainer.env.grading.grader import grade_in_subprocess

    tasks = _dataset(tmp_path, {"noisy.py": '''
def test_chatty(x, judge):
    """!
    scenario: notes
    query: q
    """
    print("x" * 500_000)  # more than a pipe holds: must not block the child


def test_hangs(x, judge):
    """!
    scenario: notes
    query: q
    """
    import time
    time.sleep(600)
'''})
    assert grade(tasks["noisy.py:test_chatty"], ctx(), isolate=True).passed
    v = grade_in_subprocess(tasks["noisy.py:test_hangs"], ctx(), Judge(), {}, timeout=2)
    assert not v.passed and v.system_error == "test subprocess killed after 2s without a verdict"


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_yaml_test_code_runs_its_own_function_not_an_imported_helper(tmp_path, isolate):
    tasks = _dataset(tmp_path, {"cases.yaml": '''
test_cases:
- uid: counted
  scenario: notes
  query: q
  test_code: |
    from trainer.domains.checks import assert_unchanged

    def check(x, judge):
        assert x.effects["notes"]["count"] == 2, "wrong count"
'''})
    task = tasks["cases.yaml:counted"]
    assert grade(task, ctx(), isolate=isolate).passed
    assert grade(task, ctx(count=3), isolate=isolate).explanation == "wrong count"


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_replay_judge_questions_are_recorded_as_not_evaluated(tasks, isolate):
    from trainer.env.golden import ReplayJudge
    v = grade(tasks["grading_cases.py:test_asks_judge"], ctx(response="hi"), ReplayJudge(), isolate=isolate)
    assert v.passed and v.judge_calls == [{"question": "Is the reply polite?", "answer": None}]
