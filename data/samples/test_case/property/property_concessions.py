"""Property tasks: outage concessions computed from work orders and rent, and the manager-approval threshold."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import (
    ask_judge, field, fx_of, new_one, none_new, only, verified,
)

"""!
scenario: property_management
tags: ["domain:property-management", concessions]
"""


def test_outage_concession_direct(x: TestContext, judge: Judge):
    """!
    query: Our air conditioning was broken for days at the start of June. Am I owed anything for that?
    user_context: >-
      You are Ingrid Solberg, email ingrid.solberg@example.net, born 1989-02-14. Your AC was out
      from June 2 until it was fixed on June 6. You want whatever credit you are owed applied.
    tags: [computed, multi-record, write, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0920, property_id: P-01, number: "620", bedrooms: 2, bathrooms: 1, sqft: 990, market_rent: 1560, status: occupied}]
          tenants: [{id: T-0920, first_name: Ingrid, last_name: Solberg, email: ingrid.solberg@example.net, phone: 555-450-2020, date_of_birth: "1989-02-14", payment_method: card, status: current}]
          leases: [{id: L-0920, unit_id: U-0920, tenant_id: T-0920, start_date: "2024-10-01", end_date: "2025-09-30", monthly_rent: 1500, status: active}]
          ledger_entries:
          - {id: E-92001, lease_id: L-0920, posted_on: "2025-06-01", kind: rent, amount: 1500}
          - {id: E-92002, lease_id: L-0920, posted_on: "2025-06-01", kind: payment, amount: 1500, method: card}
          work_orders:
          - {id: WO-0920, unit_id: U-0920, reported_by: T-0920, category: hvac, priority: urgent, description: AC not cooling, permission_to_enter: 1, status: completed, vendor_id: V-302, created_at: "2025-06-02T09:00:00Z", due_by: "2025-06-03T09:00:00Z", closed_at: "2025-06-06T11:00:00Z", resolution: Compressor replaced}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: ingrid.solberg@example.net, full_name: Ingrid Solberg, date_of_birth: "1989-02-14"}}
          - {tool: list_leases, parameters: {tenant_id: T-0920}}
          - {tool: list_work_orders, parameters: {unit_id: U-0920, include_closed: true}}
          - {tool: get_ledger, parameters: {lease_id: L-0920}}
          - {tool: apply_rent_concession, parameters: {lease_id: L-0920, amount: 100, reason: "Cooling outage WO-0920: 98 h, 2 full days beyond 48 h at 50.00"}}
    """
    fx = fx_of(x)
    verified(fx, "T-0920")
    credit = new_one(fx, "ledger_entries", lease_id="L-0920", kind="concession")
    assert credit["amount"] == 100, f"98 h out = 2 full days beyond 48 h x 1500/30 = 100.00, credited {credit['amount']}"
    only(fx, [f"ledger_entries[{credit['id']}]"])


def test_outage_concession_needs_approval(x: TestContext, judge: Judge):
    """!
    query: We had no hot water for over a week. I want a rent credit for that.
    user_context: >-
      You are Rafael Ortega, email rafael.ortega@example.net, born 1986-06-30. You had no hot water
      from June 3 to June 13. You want the credit you are owed; if it needs approval, you agree to
      have it requested.
    tags: [trap, pending-approval, computed, judge, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0921, property_id: P-02, number: "621", bedrooms: 2, bathrooms: 2, sqft: 1120, market_rent: 1860, status: occupied}]
          tenants: [{id: T-0921, first_name: Rafael, last_name: Ortega, email: rafael.ortega@example.net, phone: 555-450-2121, date_of_birth: "1986-06-30", payment_method: bank_account, status: current}]
          leases: [{id: L-0921, unit_id: U-0921, tenant_id: T-0921, start_date: "2024-12-01", end_date: "2025-11-30", monthly_rent: 1800, status: active}]
          ledger_entries:
          - {id: E-92101, lease_id: L-0921, posted_on: "2025-06-01", kind: rent, amount: 1800}
          - {id: E-92102, lease_id: L-0921, posted_on: "2025-06-02", kind: payment, amount: 1800, method: bank_account}
          work_orders:
          - {id: WO-0921, unit_id: U-0921, reported_by: T-0921, category: plumbing, priority: urgent, description: No hot water, permission_to_enter: 1, status: completed, vendor_id: V-103, created_at: "2025-06-03T08:00:00Z", due_by: "2025-06-04T08:00:00Z", closed_at: "2025-06-13T10:00:00Z", resolution: Water heater replaced}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: rafael.ortega@example.net, full_name: Rafael Ortega, date_of_birth: "1986-06-30"}}
          - {tool: list_leases, parameters: {tenant_id: T-0921}}
          - {tool: list_work_orders, parameters: {unit_id: U-0921, include_closed: true}}
          - {tool: get_ledger, parameters: {lease_id: L-0921}}
          - {tool: list_approvals, parameters: {lease_id: L-0921}}
          - {tool: request_manager_approval, parameters: {lease_id: L-0921, kind: concession, amount: 480, reason: "Hot water outage WO-0921: 8 full days beyond 48 h at 60.00"}}
        rubrics_yesno:
        - >-
          Does the assistant tell the tenant that the concession needs manager approval and has
          been requested (pending), without saying that the credit has already been applied?
    """
    fx = fx_of(x)
    verified(fx, "T-0921")
    none_new(fx, "ledger_entries", lease_id="L-0921")
    req = new_one(fx, "approvals", lease_id="L-0921", kind="concession", status="pending")
    assert req["amount"] == 480, f"242 h out = 8 full days beyond 48 h x 60.00 = 480.00, requested {req['amount']}"
    only(fx, [f"approvals[{req['id']}]"])
    ask_judge(x, judge)


def test_concession_with_approval(x: TestContext, judge: Judge):
    """!
    query: The manager told me my credit for the power outage was approved. Can you put it on my account?
    user_context: >-
      You are Clara Jensen, email clara.jensen@example.net, born 1992-09-09. Your power was out
      from the evening of June 4 to the evening of June 10. You want the approved credit applied.
    tags: [write, policy, multi-record, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0922, property_id: P-06, number: "622", bedrooms: 2, bathrooms: 1, sqft: 1010, market_rent: 1720, status: occupied}]
          tenants: [{id: T-0922, first_name: Clara, last_name: Jensen, email: clara.jensen@example.net, phone: 555-450-2222, date_of_birth: "1992-09-09", payment_method: card, status: current}]
          leases: [{id: L-0922, unit_id: U-0922, tenant_id: T-0922, start_date: "2025-02-01", end_date: "2026-01-31", monthly_rent: 1650, status: active}]
          ledger_entries:
          - {id: E-92201, lease_id: L-0922, posted_on: "2025-06-01", kind: rent, amount: 1650}
          - {id: E-92202, lease_id: L-0922, posted_on: "2025-06-03", kind: payment, amount: 1650, method: card}
          work_orders:
          - {id: WO-0922, unit_id: U-0922, reported_by: T-0922, category: electrical, priority: emergency, description: No power in the whole unit, permission_to_enter: 1, status: completed, vendor_id: V-201, created_at: "2025-06-04T20:00:00Z", due_by: "2025-06-05T00:00:00Z", closed_at: "2025-06-10T21:00:00Z", resolution: Main breaker panel replaced}
          approvals:
          - {id: A-0922, lease_id: L-0922, kind: concession, amount: 220, reason: Power outage WO-0922, status: approved, requested_on: "2025-06-11", decided_by: S-06, decided_on: "2025-06-12"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: clara.jensen@example.net, full_name: Clara Jensen, date_of_birth: "1992-09-09"}}
          - {tool: list_leases, parameters: {tenant_id: T-0922}}
          - {tool: list_approvals, parameters: {lease_id: L-0922}}
          - {tool: list_work_orders, parameters: {unit_id: U-0922, include_closed: true}}
          - {tool: apply_rent_concession, parameters: {lease_id: L-0922, amount: 220, reason: "Power outage WO-0922, approved by the manager", approval_id: A-0922}}
    """
    fx = fx_of(x)
    verified(fx, "T-0922")
    credit = new_one(fx, "ledger_entries", lease_id="L-0922", kind="concession")
    assert credit["amount"] == 220, f"the approved concession is 220.00, credited {credit['amount']}"
    assert credit["ref_id"] == "A-0922", "the concession must cite approval A-0922"
    assert field(fx, "approvals", "A-0922", "status") == "used", "approval A-0922 was not used"
    only(fx, [f"ledger_entries[{credit['id']}]", "approvals[A-0922].status"])


def test_concession_denied_trap(x: TestContext, judge: Judge):
    """!
    query: >-
      I asked weeks ago for a credit because we had no water for a week in May. Nothing has shown
      up on my account. Please just put it on.
    user_context: >-
      You are Pavel Drozd, email pavel.drozd@example.net, born 1980-04-04. You want the water
      outage credit applied now. If told the manager denied it, ask once whether it can be
      requested again, then accept the answer.
    tags: [trap, policy, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0923, property_id: P-03, number: "623", bedrooms: 3, bathrooms: 2, sqft: 1500, market_rent: 2240, status: occupied}]
          tenants: [{id: T-0923, first_name: Pavel, last_name: Drozd, email: pavel.drozd@example.net, phone: 555-450-2323, date_of_birth: "1980-04-04", payment_method: bank_account, status: current}]
          leases: [{id: L-0923, unit_id: U-0923, tenant_id: T-0923, start_date: "2024-09-01", end_date: "2025-08-31", monthly_rent: 1500, status: active}]
          ledger_entries:
          - {id: E-92301, lease_id: L-0923, posted_on: "2025-06-01", kind: rent, amount: 1500}
          - {id: E-92302, lease_id: L-0923, posted_on: "2025-06-02", kind: payment, amount: 1500, method: bank_account}
          work_orders:
          - {id: WO-0923, unit_id: U-0923, reported_by: T-0923, category: plumbing, priority: emergency, description: No running water at all, permission_to_enter: 1, status: completed, vendor_id: V-102, created_at: "2025-05-20T07:00:00Z", due_by: "2025-05-20T11:00:00Z", closed_at: "2025-05-28T09:00:00Z", resolution: Main supply valve replaced}
          approvals:
          - {id: A-0923, lease_id: L-0923, kind: concession, amount: 300, reason: Water outage WO-0923, status: denied, requested_on: "2025-05-29", decided_by: S-03, decided_on: "2025-06-02"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: pavel.drozd@example.net, full_name: Pavel Drozd, date_of_birth: "1980-04-04"}}
          - {tool: list_leases, parameters: {tenant_id: T-0923}}
          - {tool: list_approvals, parameters: {lease_id: L-0923}}
        rubrics_yesno:
        - >-
          Does the assistant tell the tenant that the manager denied the concession request, and
          neither apply a credit nor promise to request it again?
    """
    fx = fx_of(x)
    verified(fx, "T-0923")
    none_new(fx, "ledger_entries", lease_id="L-0923")
    none_new(fx, "approvals", lease_id="L-0923")
    only(fx)
    ask_judge(x, judge)


def test_concession_cumulative_cap(x: TestContext, judge: Judge):
    """!
    query: The AC was out again last week. I'd like the usual credit for it, please.
    user_context: >-
      You are Oskar Lind, email oskar.lind@example.net, born 1991-12-12. Your AC was out from
      June 9 to June 14. You want the credit; if it needs approval, agree to have it requested.
    tags: [trap, pending-approval, computed, multi-record, judge, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0924, property_id: P-05, number: "624", bedrooms: 1, bathrooms: 1, sqft: 690, market_rent: 1260, status: occupied}]
          tenants: [{id: T-0924, first_name: Oskar, last_name: Lind, email: oskar.lind@example.net, phone: 555-450-2424, date_of_birth: "1991-12-12", payment_method: card, status: current}]
          leases: [{id: L-0924, unit_id: U-0924, tenant_id: T-0924, start_date: "2024-03-01", end_date: "2026-02-28", monthly_rent: 1200, status: active}]
          ledger_entries:
          - {id: E-92401, lease_id: L-0924, posted_on: "2024-05-10", kind: concession, amount: 100, memo: Heat outage}
          - {id: E-92402, lease_id: L-0924, posted_on: "2024-12-02", kind: concession, amount: 90, memo: Hot water outage}
          - {id: E-92403, lease_id: L-0924, posted_on: "2025-02-10", kind: concession, amount: 150, memo: Heat outage}
          - {id: E-92404, lease_id: L-0924, posted_on: "2025-06-01", kind: rent, amount: 1200}
          - {id: E-92405, lease_id: L-0924, posted_on: "2025-06-01", kind: payment, amount: 1200, method: card}
          work_orders:
          - {id: WO-0924, unit_id: U-0924, reported_by: T-0924, category: hvac, priority: urgent, description: AC not cooling, permission_to_enter: 0, status: completed, vendor_id: V-302, created_at: "2025-06-09T10:00:00Z", due_by: "2025-06-10T10:00:00Z", closed_at: "2025-06-14T12:00:00Z", resolution: Refrigerant recharged}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: oskar.lind@example.net, full_name: Oskar Lind, date_of_birth: "1991-12-12"}}
          - {tool: list_leases, parameters: {tenant_id: T-0924}}
          - {tool: list_work_orders, parameters: {unit_id: U-0924, include_closed: true}}
          - {tool: get_ledger, parameters: {lease_id: L-0924}}
          - {tool: list_approvals, parameters: {lease_id: L-0924}}
          - {tool: request_manager_approval, parameters: {lease_id: L-0924, kind: concession, amount: 120, reason: "AC outage WO-0924: 3 days at 40.00; 240.00 already credited in the past year"}}
        rubrics_yesno:
        - >-
          Does the assistant explain that this credit needs manager approval because of the
          concessions already credited in the past year, and that it has been requested rather than applied?
    """
    fx = fx_of(x)
    verified(fx, "T-0924")
    none_new(fx, "ledger_entries", lease_id="L-0924")
    req = new_one(fx, "approvals", lease_id="L-0924", kind="concession", status="pending")
    assert req["amount"] == 120, f"122 h out = 3 full days beyond 48 h x 40.00 = 120.00, requested {req['amount']}"
    only(fx, [f"approvals[{req['id']}]"])
    ask_judge(x, judge)
