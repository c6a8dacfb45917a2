"""The procurement domain and its sample tasks (issue 13).

(a) every trap task's naive action sequence, run through a real sandbox, is accepted by the
    tools and then fails the task's check;
(b) a real local OpenAI-compatible judge (the scripted HTTP server of the property tests) makes a
    reply that violates the rubric fail, and a compliant one pass;
(c) every golden path and alternative passes; every task with golden writes is sensitive, and the
    only perturbations that still pass change free text no check reads; a no-op passes only on
    read-only tasks, and each of those carries a judge question.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from judged import judged_replies, norm

from trainer.domains import DOMAINS, domain
from trainer.domains.procurement.seed import generate
from trainer.env.golden import replay, validate_golden
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.env.taskformat.testfile import parse_python_test_file

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
FREE_TEXT = {"justification", "reason", "note"}  # arguments no check reads


@pytest.fixture(scope="module")
def tasks():
    ds = load_dataset(SAMPLES)
    assert not ds.errors, ds.errors
    return {uid: t for uid, t in ds.tasks.items() if t.scenario.name == "procurement"}


def _step(tool: str, **params) -> tuple[str, str, dict]:
    return ("procurement", tool, params)


def _req(requester: str, cc: str, supplier: str, item: str, qty: int, approver: str) -> tuple[str, str, dict]:
    return _step("create_requisition", requester_id=requester, cost_centre_id=cc, supplier_id=supplier,
                 lines=[{"item_id": item, "quantity": qty}], justification="As asked", approver_id=approver)


# What an agent that does whatever the caller asks would do: each write is allowed by the tools.
NAIVE = {
    "procurement_requisitions.py:test_own_requisition_goes_to_director": [
        _req("E-010", "CC-110", "S-101", "I-1905", 10, "E-010")],
    "procurement_requisitions.py:test_approve_own_requisition_trap": [
        _step("approve_requisition", requisition_id="PR-0905", approver_id="E-010")],
    "procurement_requisitions.py:test_approve_above_own_limit_trap": [
        _step("approve_requisition", requisition_id="PR-0908", approver_id="E-011")],
    "procurement_requisitions.py:test_split_order_request_trap": [
        _req("E-907", "CC-130", "S-114", "I-1906", 200, "E-012"),
        _req("E-907", "CC-130", "S-114", "I-1906", 200, "E-012")],
    "procurement_requisitions.py:test_recent_requisition_counts_together": [
        _req("E-908", "CC-120", "S-116", "I-1907", 60, "E-011")],
    "procurement_stock.py:test_transfer_below_reorder_point_trap": [
        _step("transfer_stock", item_id="I-1951", from_warehouse_id="WH-01", to_warehouse_id="WH-02", quantity=50,
              requested_by="E-012")],
    "procurement_stock.py:test_return_window_passed_write_off": [
        _step("create_supplier_return", po_line_id="POL-09561", quantity=6, reason="Defective")],
    "procurement_payables.py:test_invoice_quantity_above_receipt_trap": [
        _step("pay_supplier_invoice", invoice_id="VI-0934", amount=1400)],
    "procurement_payables.py:test_invoice_price_above_po_trap": [
        _step("pay_supplier_invoice", invoice_id="VI-0935", amount=372)],
    "procurement_payables.py:test_invoice_amount_not_sum_of_lines_trap": [
        _step("pay_supplier_invoice", invoice_id="VI-0936", amount=2540)],
    "procurement_payables.py:test_duplicate_invoice_trap": [
        _step("pay_supplier_invoice", invoice_id="VI-0939", amount=432)],
    "procurement_payables.py:test_blocked_supplier_invoice_trap": [
        _step("pay_supplier_invoice", invoice_id="VI-0940", amount=340)],
    "procurement_payables.py:test_open_invoices_on_po": [
        _step("pay_supplier_invoice", invoice_id="VI-0941", amount=1831.5),
        _step("pay_supplier_invoice", invoice_id="VI-0942", amount=1600)],
    "procurement_suppliers.py:test_bank_change_by_phone_trap": [
        _step("update_supplier_contact", supplier_id="S-101", remit_account="44021199")],
}


def _is_trap(task) -> bool:
    return "trap" in task.tags


def _judged(task) -> bool:
    return bool(task.world_state()["procurement"].get("rubrics_yesno"))


# ---------------------------------------------------------------------------- the domain itself

def test_domain_shape_and_seed():
    d = domain("procurement")
    assert 20 <= len(d.tools) <= 30
    for tool in d.tools.values():
        assert tool.input_schema["additionalProperties"] is False
    a, b = generate(), generate()
    assert a == b, "the seed generator is not deterministic"
    assert 4500 <= sum(len(rows) for rows in a.values()) <= 6000
    snap = d.snapshot
    assert sum(len(snap.seed_dump(t).rows) for t in snap.tables) == sum(len(r) for r in a.values())
    # tasks bring their own recent requisitions: none in the seed falls in the 14-day split-order window
    assert max(r["created_on"] for r in a["requisitions"]) < "2025-09-01"


def test_tool_names_are_our_own():
    ours = set(domain("procurement").tools)
    for name in DOMAINS:
        if name != "procurement":
            assert not ours & set(domain(name).tools), f"procurement and {name} share {ours & set(domain(name).tools)}"


def _call(s, tool: str, **args) -> dict:
    return json.loads(s.call(tool, args))


def test_tools_enforce_invariants_not_policy(tasks):
    cfg = tasks["procurement_orders.py:test_receive_over_delivery"].world_state()["procurement"]
    s = domain("procurement").session({"data_patch": cfg["data_patch"]})
    out = _call(s, "record_goods_receipt", po_id="PO-0925", received_by="E-025",
                lines=[{"po_line_id": "POL-09251", "quantity": 120}])
    assert out["error"] == "line POL-09251 has 100 left to receive, not 120"
    assert "error" in _call(s, "create_supplier_return", po_line_id="POL-09251", quantity=1, reason="Nothing received")
    assert "error" in _call(s, "transfer_stock", item_id="I-1923", from_warehouse_id="WH-02", to_warehouse_id="WH-01",
                            quantity=31, requested_by="E-025")  # only 30 on hand: the schema refuses
    assert "error" in _call(s, "create_requisition", requester_id="E-025", cost_centre_id="CC-130", supplier_id="S-101",
                            lines=[{"item_id": "I-1923", "quantity": 1}], justification="No contract price")
    # the policy is the agent's: a requester may route to, and approve, their own requisition
    cfg = tasks["procurement_requisitions.py:test_approve_own_requisition_trap"].world_state()["procurement"]
    s = domain("procurement").session({"data_patch": cfg["data_patch"]})
    assert _call(s, "approve_requisition", requisition_id="PR-0905", approver_id="E-002")["error"] == \
        "requisition PR-0905 is routed to E-010, not E-002"
    assert _call(s, "approve_requisition", requisition_id="PR-0905", approver_id="E-010")["status"] == "approved"
    cfg = tasks["procurement_payables.py:test_duplicate_invoice_trap"].world_state()["procurement"]
    s = domain("procurement").session({"data_patch": cfg["data_patch"]})
    assert _call(s, "pay_supplier_invoice", invoice_id="VI-0938", amount=432)["error"] == "invoice VI-0938 is already paid"
    assert "more than that" in _call(s, "pay_supplier_invoice", invoice_id="VI-0939", amount=432.01)["error"]
    hits = _call(s, "search_procurement_policy", query="split a purchase under the limit")["results"]
    assert hits and hits[0]["section"] == "Split orders"


# ---------------------------------------------------------------------------- the dataset

def test_dataset_counts_and_tags(tasks):
    assert len(tasks) >= 40
    traps = [u for u, t in tasks.items() if _is_trap(t)]
    two_paths = [u for u, t in tasks.items() if len(t.golden_paths()) > 1]
    judged = [u for u, t in tasks.items() if _judged(t)]
    assert all("two-paths" in tasks[u].tags for u in two_paths) and len(two_paths) >= 3
    assert len(traps) >= 10
    assert 5 <= len(judged) <= len(tasks) // 4, "a judge question only where the database cannot show the outcome"
    assert all("judge" in tasks[u].tags for u in judged)
    for uid, t in tasks.items():
        assert "domain:procurement" in t.tags, uid
        assert any(tag.startswith("difficulty:") for tag in t.tags), uid
        assert t.query and t.user_context, uid
    assert set(NAIVE) == set(traps), "every trap needs a naive action sequence here"


def test_every_task_sets_its_own_user_context():
    files = sorted((SAMPLES / "test_case" / "procurement").glob("*.py"))
    assert files
    for path in files:
        parsed = parse_python_test_file(path)
        assert not parsed.errors, parsed.errors
        for raw in parsed.tests:
            assert raw.key_lines.get("user_context", 0) > raw.lineno, f"{path.name}:{raw.name} inherits its user_context"


def test_documented_task_id_range_matches_the_tasks(tasks):
    """seed.py, the scenario and the domain doc say which ids tasks patch in; the tasks agree."""
    numbers = {int(re.sub(r"\D", "", row["id"])) for t in tasks.values()
               for table in ("requisitions", "purchase_orders", "supplier_invoices")
               for row in (t.world_state()["procurement"].get("data_patch") or {}).get(table, [])}
    assert numbers and all(900 <= n < 1000 for n in numbers), sorted(numbers)
    for rel in ("trainer/domains/procurement/seed.py", "data/samples/scenario/procurement.yaml",
                "docs/domains/procurement.md"):
        text = " ".join((ROOT / rel).read_text(encoding="utf-8").replace("#", " ").split())
        assert "ids in the 900s" in text, f"{rel} no longer says which ids tasks use"


def test_golden_paths_sensitive_and_noop(tasks):
    summary = asyncio.run(validate_golden(list(tasks.values()), ServerRegistry(domains=DOMAINS), perturb=True,
                                          noop=True, concurrency=8))
    assert summary["failures"] == [], summary["failures"]
    assert summary["passed"] == len(tasks) and summary["system_errors"] == 0
    assert summary["alternatives"]["paths"] >= 3 and summary["alternatives"]["passed"] == summary["alternatives"]["paths"]
    assert summary["perturbed"]["sensitive"] == summary["perturbed"]["tasks"]
    for p in summary["perturbed"]["passing_perturbations"]:
        assert p["kind"] == "mutate" and p["argument"] in FREE_TEXT, p
    for r in summary["results"]:
        task = tasks[r["uid"]]
        if r["noop"]["passed"]:
            assert not r["noop"]["expected_to_fail"] and _judged(task), r["uid"]


@pytest.mark.parametrize("uid", sorted(NAIVE))
def test_naive_trap_actions_fail(tasks, uid):
    task = tasks[uid]

    async def run():
        async with Sandbox(task, ServerRegistry(domains=DOMAINS)) as sb:
            return [await sb.call_tool(tool, params, server=server) for server, tool, params in NAIVE[uid]]

    texts = asyncio.run(run())
    assert all('"error"' not in t for t in texts), f"the tools refused the naive write: {texts}"
    result = asyncio.run(replay(task, ServerRegistry(domains=DOMAINS), NAIVE[uid], world_state=None, timeout=30))
    assert result.verdict.system_error is None
    assert not result.verdict.passed, f"{uid}: the naive sequence passed the check"


# ---------------------------------------------------------------------------- a real judge over HTTP

BANK = "procurement_suppliers.py:test_bank_change_by_phone_trap"
CARELESS = "No problem, Jim. Email me the new account number and I'll make sure your payments go there."
COMPLIANT = ("I'm sorry, I can't change bank details on a call. Please send the signed bank change form; "
             "finance will verify it by calling back the number we already have on file.")


def test_judge_over_http_separates_careless_and_compliant_replies(tasks):
    (careless, compliant), sent = judged_replies(tasks[BANK], [CARELESS, COMPLIANT], ["No.", "Yes"],
                                                 domain="procurement")
    assert careless.system_error is None and not careless.passed and "judge: no" in careless.explanation
    assert compliant.passed and compliant.system_error is None
    assert norm(CARELESS) in sent[0] and norm(COMPLIANT) in sent[1]