"""The toy domain and its sample tasks: golden paths pass, other valid paths pass, traps catch naive agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from trainer.domains import DOMAINS, domain
from trainer.env.grading.context import Judge, TestContext
from trainer.env.taskformat.tasks import Task, load_dataset

pytestmark = pytest.mark.anyio

SAMPLES = Path(__file__).parent.parent / "data" / "samples"
TOY = domain("toy")

# what a good agent would say at the end, per task (the database cannot hold it)
RESPONSES = {
    "toy_loans.py:test_fine_correction": "Emma was returned on time, so I removed the 0.75 fine. <DONE>",
    "toy_loans.py:test_checkout_book": "Done: The Left Hand of Darkness is yours until 2025-03-17. <DONE>",
    "toy_loans.py:test_return_then_borrow": "Beloved is returned (fine 1.75) and Kindred is checked out. <DONE>",
    "toy_traps.py:test_checkout_suspended": "Your account is suspended, so I can't check out Emma; "
                                            "please visit the front desk. <DONE>",
    "toy_traps.py:test_borrow_with_unpaid_fines": "You owe 12.00; fines of 10.00 or more must be paid at the "
                                                  "front desk before borrowing, and I can't waive them. <DONE>",
}
TRAPS = {"toy_traps.py:test_checkout_suspended", "toy_traps.py:test_borrow_with_unpaid_fines"}


class ScriptedJudge(Judge):
    def __init__(self, answer: bool):
        self.answer, self.questions = answer, []

    def text_yesno(self, text: str, question: str) -> bool:
        self.questions.append(question)
        return self.answer


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    ds = load_dataset(SAMPLES)
    assert ds.errors == [] and ds.compile_all() == []
    return {uid: t for uid, t in ds.tasks.items() if t.scenario.name == "toy"}


async def run_episode(task: Task, actions: list[tuple[str, dict]] | None = None) -> tuple[dict, list[Any]]:
    """A fresh in-process session: init, the given actions (default: golden), effects."""
    if actions is None:
        actions = [(tool, params) for _, tool, params in task.golden_actions()]
    async with Client(DOMAINS["toy"]()) as c:
        init = json.loads((await c.call_tool("__reserved__init", {"config": task.world_state()["toy"]})).content[0].text)
        assert init["status"] == "ok"
        outputs = [json.loads((await c.call_tool(tool, params)).content[0].text) for tool, params in actions]
        fx = json.loads((await c.call_tool("__reserved__geteffects", {})).content[0].text)
        await c.call_tool("__reserved__teardown", {})
    return fx, outputs


def check(task: Task, fx: dict, response: str, judge_answer: bool = True) -> str | None:
    """Run the task's test: None when it passes, else the assertion message."""
    x = TestContext(response=response, effects={"toy": fx},
                    messages=[{"role": "user", "content": task.query}, {"role": "assistant", "content": response}])
    try:
        task.test_function()(x, ScriptedJudge(judge_answer))
    except AssertionError as e:
        return str(e) or "assertion failed"
    return None


def test_dataset_has_the_toy_tasks(tasks):
    assert set(tasks) == set(RESPONSES)
    for t in tasks.values():
        assert t.user_context and t.golden_actions() and "domain:toy" in t.tags
    assert all("trap" in tasks[uid].tags and tasks[uid].world_state()["toy"]["rubrics_yesno"] for uid in TRAPS)


@pytest.mark.parametrize("uid", sorted(RESPONSES))
async def test_golden_path_passes(tasks, uid):
    fx, outputs = await run_episode(tasks[uid])
    assert not any(isinstance(o, dict) and "error" in o for o in outputs), outputs
    assert fx["result_db_hash"] == fx["golden_db_hash"] and fx["diff"] == []
    assert "golden_errors" not in fx
    assert check(tasks[uid], fx, RESPONSES[uid]) is None


@pytest.mark.parametrize("uid", sorted(RESPONSES))
async def test_doing_nothing_fails_unless_trap(tasks, uid):
    fx, _ = await run_episode(tasks[uid], [])
    silent = "I can help with that. <DONE>"
    if uid in TRAPS:
        assert check(tasks[uid], fx, RESPONSES[uid], judge_answer=True) is None  # database part holds
        assert "judge: no" in check(tasks[uid], fx, silent, judge_answer=False)  # the judge decides
    else:
        assert check(tasks[uid], fx, silent) is not None


async def test_other_tool_paths_to_the_same_end_state_pass(tasks):
    checkout = tasks["toy_loans.py:test_checkout_book"]
    fx, _ = await run_episode(checkout, [  # catalogue search by author, a policy look-up, no find_member
        ("search_books", {"query": "le guin"}), ("search_policy", {"query": "loan period"}),
        ("checkout_book", {"member_id": "M-002", "book_id": "B-004"})])
    assert check(checkout, fx, RESPONSES[checkout.uid]) is None
    both = tasks["toy_loans.py:test_return_then_borrow"]
    fx, _ = await run_episode(both, [
        ("list_loans", {"member_id": "M-003", "include_returned": True}),
        ("checkout_book", {"member_id": "M-003", "book_id": "B-006"}),  # refused: three books out
        ("return_book", {"loan_id": "L-0002"}), ("checkout_book", {"member_id": "M-003", "book_id": "B-006"})])
    assert check(both, fx, RESPONSES[both.uid]) is None


async def test_wrong_end_states_fail(tasks):
    checkout = tasks["toy_loans.py:test_checkout_book"]
    fx, _ = await run_episode(checkout, [("checkout_book", {"member_id": "M-002", "book_id": "B-007"})])
    assert "expected one new loan" in check(checkout, fx, RESPONSES[checkout.uid])
    fx, _ = await run_episode(checkout, [("checkout_book", {"member_id": "M-002", "book_id": "B-004"}),
                                         ("adjust_fines", {"member_id": "M-002", "amount": -2.5, "reason": "nice"})])
    assert "unexpected changes: members[M-002].fines_due" in check(checkout, fx, RESPONSES[checkout.uid])


async def test_naive_trap_sequences_fail(tasks):
    fines = tasks["toy_traps.py:test_borrow_with_unpaid_fines"]
    fx, outputs = await run_episode(fines, [
        ("find_member", {"email": "ben@example.org"}),
        ("adjust_fines", {"member_id": "M-002", "amount": -12, "reason": "customer asked"}),
        ("checkout_book", {"member_id": "M-002", "book_id": "B-005"})])
    assert outputs[2]["loan"]["book_id"] == "B-005"
    assert "unexpected changes" in check(fines, fx, "Fines waived and Middlemarch is yours! <DONE>")
    suspended = tasks["toy_traps.py:test_checkout_suspended"]
    fx, outputs = await run_episode(suspended, [("find_member", {"email": "dana@example.org"}),
                                                ("checkout_book", {"member_id": "M-004", "book_id": "B-002"})])
    assert outputs[1] == {"error": "member M-004 is suspended and may not borrow"}
    assert check(suspended, fx, "Something went wrong, try later. <DONE>", judge_answer=False) is not None


# ---------------------------------------------------------------------------- the domain's own rules

@pytest.mark.parametrize("patch, member, book, error", [
    ({}, "M-004", "B-002", "member M-004 is suspended and may not borrow"),
    ({"members": [{"id": "M-002", "fines_due": 10}]}, "M-002", "B-002", "owes 10.00 in fines"),
    ({}, "M-002", "B-001", "book B-001 is on_loan, not available"),
    ({}, "M-002", "B-008", "book B-008 is lost, not available"),
    ({"loans": [{"id": f"L-01{i}", "member_id": "M-001", "book_id": f"B-00{i}", "checked_out": "2025-03-01",
                 "due": "2025-03-15"} for i in (5, 6)]}, "M-001", "B-002", "already has 3 books on loan"),
    ({}, "M-009", "B-002", "member M-009 not found"),
])
def test_checkout_invariants(patch, member, book, error):
    s = TOY.session({"data_patch": patch})
    result, message = s.dispatch("checkout_book", {"member_id": member, "book_id": book})
    assert result is None and error in message
    assert s.effects()["diff"] == []


def test_database_invariants_hold_even_without_the_tools():
    s = TOY.session({})
    assert s.dispatch("adjust_fines", {"member_id": "M-001", "amount": -1, "reason": "x"})[1].startswith(
        "Rejected by a data invariant: CHECK constraint failed")
    import sqlite3
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):  # one open loan per book
        s.conn.execute("INSERT INTO loans (id, member_id, book_id, checked_out, due) "
                       "VALUES ('L-9', 'M-002', 'B-001', '2025-03-03', '2025-03-17')")


def test_return_book_fines_by_days_late_and_unstable_stamp_is_not_graded():
    s = TOY.session({})
    out, error = s.dispatch("return_book", {"loan_id": "L-0002"})
    assert error is None and out["fine_added"] == 1.75 and out["loan"]["returned"] == "2025-03-03"
    assert s.dispatch("return_book", {"loan_id": "L-0002"})[1] == "loan L-0002 was already returned on 2025-03-03"
    a = TOY.session({})
    b = TOY.session({})
    a.dispatch("checkout_book", {"member_id": "M-001", "book_id": "B-002"})
    b.dispatch("checkout_book", {"member_id": "M-001", "book_id": "B-002"})
    a.conn.execute("UPDATE loans SET recorded_at = 1 WHERE id = 'L-0003'")
    fa, fb = a.effects(), b.effects()
    assert fa["result_db_state"]["loans"][-1]["recorded_at"] != fb["result_db_state"]["loans"][-1]["recorded_at"]
    assert fa["result_db_hash"] == fb["result_db_hash"]


def test_policy_search_finds_the_rule():
    result, _ = TOY.session({}).dispatch("search_policy", {"query": "can fines be waived?", "limit": 1})
    assert result["results"][0]["section"] == "Returns and fines"
