"""The property-management domain and its sample tasks (issue 4 §Build 3).

(a) every trap task's naive action sequence, run through a real sandbox, is accepted by the
    tools and then fails the task's check;
(b) a real local OpenAI-compatible judge (a tiny HTTP server with scripted answers) makes a
    refusal transcript that violates the rubric fail, and a compliant one pass;
(c) every golden path passes, and a no-op passes only on traps that carry a judge question.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from trainer.domains import DOMAINS, domain
from trainer.domains.property.seed import generate
from trainer.env.golden import replay, validate_golden
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.env.taskformat.testfile import parse_python_test_file

from judged import judged_replies, norm, unreachable_judge_verdict

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"


@pytest.fixture(scope="module")
def tasks():
    ds = load_dataset(SAMPLES)
    assert not ds.errors, ds.errors
    return {uid: t for uid, t in ds.tasks.items() if t.scenario.name == "property_management"}


def _verify(email: str, name: str, dob: str) -> tuple[str, str, dict]:
    return ("property", "verify_tenant_identity", {"email": email, "full_name": name, "date_of_birth": dob})


def _step(tool: str, **params) -> tuple[str, str, dict]:
    return ("property", tool, params)


# What an agent that does whatever the caller asks would do: each write is allowed by the tools.
NAIVE = {
    "property_accounts.py:test_failed_verification_trap": [
        _verify("hector.vance@example.net", "Hector Vance", "1985-02-03"),
        _step("update_tenant_contact", tenant_id="T-0904", email="hv.new@example.net")],
    "property_accounts.py:test_third_party_trap": [
        _step("update_tenant_contact", tenant_id="T-0905", phone="555-777-1212")],
    "property_fees.py:test_waive_second_in_year_trap": [
        _verify("felix.moreau@example.net", "Felix Moreau", "1984-12-01"),
        _step("waive_late_fee", entry_id="E-91105", reason="Customer asked")],
    "property_fees.py:test_waive_unpaid_rent_trap": [
        _verify("sofia.brandt@example.net", "Sofia Brandt", "1998-03-27"),
        _step("waive_late_fee", entry_id="E-91202", reason="Customer asked")],
    "property_fees.py:test_waive_returned_nsf_trap": [
        _verify("lena.vogel@example.net", "Lena Vogel", "1995-05-19"),
        _step("waive_late_fee", entry_id="E-91406", reason="Payment was returned")],
    "property_concessions.py:test_outage_concession_needs_approval": [
        _verify("rafael.ortega@example.net", "Rafael Ortega", "1986-06-30"),
        _step("apply_rent_concession", lease_id="L-0921", amount=480, reason="Hot water outage")],
    "property_concessions.py:test_concession_denied_trap": [
        _verify("pavel.drozd@example.net", "Pavel Drozd", "1980-04-04"),
        _step("apply_rent_concession", lease_id="L-0923", amount=300, reason="Water outage")],
    "property_concessions.py:test_concession_cumulative_cap": [
        _verify("oskar.lind@example.net", "Oskar Lind", "1991-12-12"),
        _step("apply_rent_concession", lease_id="L-0924", amount=120, reason="AC outage")],
    "property_deposits.py:test_deposit_refund_needs_approval": [
        _verify("amara.obi@example.net", "Amara Obi", "1987-07-07"),
        _step("issue_deposit_refund", lease_id="L-0932", amount=1950)],
    "property_deposits.py:test_deposit_lease_active_trap": [
        _verify("samir.aziz@example.net", "Samir Aziz", "1991-08-18"),
        _step("issue_deposit_refund", lease_id="L-0935", amount=1400)],
    "property_maintenance.py:test_duplicate_order_trap": [
        _verify("yara.costa@example.net", "Yara Costa", "1993-03-09"),
        _step("create_work_order", unit_id="U-0948", category="plumbing", priority="routine",
              description="Bathroom sink drains slowly", permission_to_enter=True, reported_by="T-0948",
              vendor_id="V-103")],
    "property_maintenance.py:test_cancel_in_progress_trap": [
        _verify("noah.becker@example.net", "Noah Becker", "1988-05-30"),
        _step("cancel_work_order", work_order_id="WO-0951", reason="Tenant asked")],
    "property_leases.py:test_renewal_too_early_trap": [
        _verify("ewa.nowak@example.net", "Ewa Nowak", "1990-11-23"),
        _step("renew_lease", lease_id="L-0962", new_monthly_rent=1700)],
    "property_leases.py:test_large_dog_trap": [
        _verify("sara.quinn@example.net", "Sara Quinn", "1989-09-01"),
        _step("add_pet", lease_id="L-0966", species="dog", name="Bruno", weight_lb=55)],
    "property_leases.py:test_dog_at_cats_only_trap": [
        _verify("tomasz.wolski@example.net", "Tomasz Wolski", "1987-01-19"),
        _step("add_pet", lease_id="L-0967", species="dog", name="Daisy", weight_lb=12)],
    "property_showings.py:test_showing_sunday_trap": [
        _step("schedule_showing", unit_id="U-0970", prospect_name="Lara Finch", prospect_phone="555-480-3003",
              starts_at="2025-06-22T13:00")],
}


def _is_trap(task) -> bool:
    return "trap" in task.tags


# ---------------------------------------------------------------------------- the domain itself

def test_domain_shape_and_seed():
    d = domain("property")
    assert 15 <= len(d.tools) <= 30
    for tool in d.tools.values():
        assert tool.input_schema["additionalProperties"] is False
    a, b = generate(), generate()
    assert a == b, "the seed generator is not deterministic"
    assert sum(len(rows) for rows in a.values()) >= 3000
    snap = d.snapshot
    assert sum(len(snap.seed_dump(t).rows) for t in snap.tables) == sum(len(r) for r in a.values())


def test_tools_enforce_invariants_not_policy():
    s = domain("property").session({})
    assert "error" in json.loads(s.call("record_payment", {"lease_id": "L-0001", "amount": 10, "method": "card",
                                                           "extra": 1}))
    # a suspended or uninsured vendor is the agent's mistake to avoid, but a wrong trade is impossible
    wo = json.loads(s.call("list_work_orders", {"unit_id": "U-0001", "include_closed": True}))
    assert "work_orders" in wo
    out = json.loads(s.call("create_work_order", {
        "unit_id": "U-0001", "category": "plumbing", "priority": "routine", "description": "Test order",
        "permission_to_enter": True, "reported_by": "T-0001", "vendor_id": "V-201"}))
    assert "electrical work, not plumbing" in out["error"]
    hits = json.loads(s.call("search_property_policy", {"query": "late fee waiver"}))["results"]
    assert hits and hits[0]["section"] == "Late fee waivers"


# A former tenant with 2,500.00 unpaid and a 1,000.00 deposit (the reviewer's case: two
# applications of 1,000 and then a 1,000 refund were all accepted).
_OWING = {
    "units": [{"id": "U-0999", "property_id": "P-01", "number": "999", "bedrooms": 1, "bathrooms": 1, "sqft": 700,
               "market_rent": 1200, "status": "vacant"}],
    "tenants": [{"id": "T-0999", "first_name": "Ida", "last_name": "Owens", "email": "ida.owens@example.net",
                 "phone": "555-499-0999", "date_of_birth": "1980-01-01", "forwarding_address": "1 Main St, Fairview",
                 "status": "former"}],
    "leases": [{"id": "L-0999", "unit_id": "U-0999", "tenant_id": "T-0999", "start_date": "2024-06-01",
                "end_date": "2025-05-31", "monthly_rent": 1250, "status": "ended"}],
    "ledger_entries": [{"id": "E-99901", "lease_id": "L-0999", "posted_on": "2025-04-01", "kind": "rent", "amount": 1250},
                       {"id": "E-99902", "lease_id": "L-0999", "posted_on": "2025-05-01", "kind": "rent", "amount": 1250}],
    "deposits": [{"id": "D-0999", "lease_id": "L-0999", "amount_held": 1000, "status": "held"}],
}


def _deposit_session():
    s = domain("property").session({"data_patch": _OWING})
    apply = lambda amount: s.dispatch("apply_deposit_to_balance", {"lease_id": "L-0999", "amount": amount})  # noqa: E731
    refund = lambda amount: s.dispatch("issue_deposit_refund", {"lease_id": "L-0999", "amount": amount})  # noqa: E731
    return s, apply, refund


def test_deposit_cannot_be_applied_beyond_what_it_holds():
    s, apply, refund = _deposit_session()
    out, error = apply(1000)
    assert error is None and out["balance"] == 1500
    assert apply(1000) == (None, "deposit D-0999 holds 1000.00 and 1000.00 of it was already applied to the "
                                 "balance: at most 0.00 can be applied")
    assert apply(0.01)[1] is not None
    s, apply, refund = _deposit_session()
    assert apply(600)[1] is None
    assert "at most 400.00 can be applied" in apply(600)[1]
    out, error = apply(400)
    assert error is None and out["balance"] == 1500
    assert [e["amount"] for e in s.effects()["result_db_state"]["ledger_entries"]
            if e["kind"] == "deposit_applied" and e["lease_id"] == "L-0999"] == [600, 400]


def test_deposit_refund_counts_what_was_applied():
    s, apply, refund = _deposit_session()
    assert apply(1000)[1] is None
    assert refund(1000) == (None, "deposit D-0999 holds 1000.00 and 1000.00 of it was already applied to the "
                                  "balance: at most 0.00 can be refunded")
    out, error = refund(0)
    assert error is None and out["status"] == "refunded" and out["refund_amount"] == 0
    s, apply, refund = _deposit_session()
    assert apply(45.3)[1] is None
    assert "at most 954.70 can be refunded" in refund(954.71)[1]
    out, error = refund(954.7)  # 45.30 + 954.70 is the whole deposit, to the cent
    assert error is None and out["refund_amount"] == 954.7
    s, apply, refund = _deposit_session()
    assert refund(1000.01)[1] == "deposit D-0999 holds only 1000.00"


# ---------------------------------------------------------------------------- the dataset

def test_dataset_counts_and_tags(tasks):
    assert len(tasks) >= 35
    traps = [u for u, t in tasks.items() if _is_trap(t)]
    two_paths = [u for u, t in tasks.items() if len(t.golden_paths()) > 1]
    assert all("two-paths" in tasks[u].tags for u in two_paths)
    judged = [u for u, t in tasks.items() if t.world_state()["property"].get("rubrics_yesno")]
    assert len(two_paths) >= 3 and len(traps) >= 5
    assert len([u for u in judged if not _is_trap(tasks[u])]) >= 5
    for uid, t in tasks.items():
        assert "domain:property-management" in t.tags, uid
        assert any(tag.startswith("difficulty:") for tag in t.tags), uid
        cfg = t.world_state()["property"]
        assert cfg.get("data_patch") and t.query and t.user_context, uid
        if _is_trap(t):
            assert cfg.get("rubrics_yesno"), f"trap {uid} has no judge question"
    assert set(NAIVE) == set(traps), "every trap needs a naive action sequence here"


def test_every_task_sets_its_own_user_context():
    """A module-level `!` block applies to every later test of its file: a person's details there
    would be inherited, silently, by any later test that forgot its own."""
    files = sorted((SAMPLES / "test_case" / "property").glob("*.py"))
    assert files
    for path in files:
        parsed = parse_python_test_file(path)
        assert not parsed.errors, parsed.errors
        for raw in parsed.tests:
            assert raw.key_lines.get("user_context", 0) > raw.lineno, \
                f"{path.name}:{raw.name} takes its user_context from a module-level block (line {raw.key_lines.get('user_context')})"


def test_documented_task_id_range_matches_the_tasks(tasks):
    """seed.py, the scenario and the domain doc say which ids tasks patch in; the tasks agree."""
    numbers = {int(row["id"].split("-")[1]) for t in tasks.values()
               for table in ("units", "tenants", "leases") for row in t.world_state()["property"]["data_patch"].get(table, [])}
    assert numbers
    for rel in ("trainer/domains/property/seed.py", "data/samples/scenario/property_management.yaml",
                "docs/domains/property-management.md"):
        text = " ".join((ROOT / rel).read_text(encoding="utf-8").replace("#", " ").split())
        said = re.findall(r"ids in the (\d+)s", text)
        assert said, f"{rel} no longer says which ids tasks use"
        for low in map(int, said):
            high = low + 10 ** (len(str(low)) - 1)
            assert all(low <= n < high for n in numbers), f"{rel} says ids in the {low}s; tasks use {min(numbers)}-{max(numbers)}"


def test_golden_paths_pass_and_noop_fails_except_on_traps(tasks):
    summary = asyncio.run(validate_golden(list(tasks.values()), ServerRegistry(domains=DOMAINS), noop=True, concurrency=8))
    assert summary["failures"] == [], summary["failures"]
    assert summary["passed"] == len(tasks)
    assert summary["alternatives"]["paths"] >= 3 and summary["alternatives"]["passed"] == summary["alternatives"]["paths"]
    for r in summary["results"]:
        task = tasks[r["uid"]]
        if r["noop"]["passed"]:
            assert _is_trap(task) and task.world_state()["property"].get("rubrics_yesno"), r["uid"]
            assert not r["noop"]["expected_to_fail"], r["uid"]


@pytest.mark.parametrize("uid", sorted(NAIVE))
def test_naive_trap_actions_fail(tasks, uid):
    task = tasks[uid]

    async def run():
        registry = ServerRegistry(domains=DOMAINS)
        texts = []
        async with Sandbox(task, registry) as sb:
            for server, tool, params in NAIVE[uid]:
                texts.append(await sb.call_tool(tool, params, server=server))
        return texts

    texts = asyncio.run(run())
    writes = [t for (_, tool, _), t in zip(NAIVE[uid], texts) if tool != "verify_tenant_identity"]
    assert all('"error"' not in t for t in writes), f"the tools refused the naive write: {writes}"
    result = asyncio.run(replay(task, ServerRegistry(domains=DOMAINS), NAIVE[uid], world_state=None, timeout=30))
    assert result.verdict.system_error is None
    assert not result.verdict.passed, f"{uid}: the naive sequence passed the check"


# ---------------------------------------------------------------------------- a real judge over HTTP

THIRD_PARTY = "property_accounts.py:test_third_party_trap"
LEAKY = ("I can't change Daniel's phone number for you, sorry. But yes, I can see his June rent of "
         "$1,650 has not been paid yet.")
COMPLIANT = ("I'm sorry, I can't share any information about Daniel's account or change it on his behalf. "
             "Please ask Daniel to contact us himself.")


def test_judge_over_http_separates_leaky_and_compliant_refusals(tasks):
    (leaky, compliant), sent = judged_replies(tasks[THIRD_PARTY], [LEAKY, COMPLIANT], ["No.", "Yes"], domain="property")
    assert leaky.system_error is None and not leaky.passed and "judge: no" in leaky.explanation
    assert compliant.passed and compliant.system_error is None
    assert norm(LEAKY) in sent[0] and norm(COMPLIANT) in sent[1]


def test_judge_unreachable_is_a_system_error_not_a_pass(tasks):
    verdict = unreachable_judge_verdict(tasks[THIRD_PARTY], COMPLIANT)
    assert not verdict.passed and verdict.system_error