"""Property tasks: security deposit refunds (deductions, unpaid balance, forwarding address, approval)."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import (
    ask_judge, field, fx_of, new_one, none_new, only, same_text, verified,
)

"""!
scenario: property_management
tags: ["domain:property-management", deposits]
"""


def check_refund(fx: dict, deposit_id: str, amount: float, approval_id: str | None = None) -> None:
    assert field(fx, "deposits", deposit_id, "status") == "refunded", f"deposit {deposit_id} was not refunded"
    got = field(fx, "deposits", deposit_id, "refund_amount")
    assert got == amount, f"the refund should be {amount:.2f}, issued {got}"
    assert field(fx, "deposits", deposit_id, "refunded_on") == "2025-06-16", "the refund must be dated today"
    assert field(fx, "deposits", deposit_id, "approval_id") == approval_id, f"the refund must cite approval {approval_id}"


def test_deposit_refund_direct(x: TestContext, judge: Judge):
    """!
    query: I moved out of Maple Court at the end of May. When do I get my deposit back? Please send it.
    user_context: >-
      You are Helena Voss, email helena.voss@example.net, born 1975-08-08. You moved out on May 31
      and want your deposit refund issued. Your forwarding address on file is correct.
    tags: [computed, multi-record, write, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0930, property_id: P-01, number: "630", bedrooms: 1, bathrooms: 1, sqft: 740, market_rent: 1290, status: vacant}]
          tenants: [{id: T-0930, first_name: Helena, last_name: Voss, email: helena.voss@example.net, phone: 555-460-3030, date_of_birth: "1975-08-08", forwarding_address: "212 Cedar St, Fairview", status: former}]
          leases: [{id: L-0930, unit_id: U-0930, tenant_id: T-0930, start_date: "2024-06-01", end_date: "2025-05-31", monthly_rent: 1200, status: ended, notice_given_on: "2025-03-20", move_out_date: "2025-05-31"}]
          ledger_entries:
          - {id: E-93001, lease_id: L-0930, posted_on: "2025-05-01", kind: rent, amount: 1200}
          - {id: E-93002, lease_id: L-0930, posted_on: "2025-05-01", kind: payment, amount: 1200, method: check}
          deposits: [{id: D-0930, lease_id: L-0930, amount_held: 1200, status: held}]
          deposit_deductions:
          - {id: DD-0930, deposit_id: D-0930, reason: Carpet cleaning, amount: 180}
          - {id: DD-0931, deposit_id: D-0930, reason: Wall repair, amount: 95.5}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: helena.voss@example.net, full_name: Helena Voss, date_of_birth: "1975-08-08"}}
          - {tool: list_leases, parameters: {tenant_id: T-0930}}
          - {tool: get_deposit, parameters: {lease_id: L-0930}}
          - {tool: get_ledger, parameters: {lease_id: L-0930}}
          - {tool: issue_deposit_refund, parameters: {lease_id: L-0930, amount: 924.5}}
    """
    fx = fx_of(x)
    verified(fx, "T-0930")
    check_refund(fx, "D-0930", 924.5)
    only(fx, ["deposits[D-0930]"])


def test_deposit_refund_with_balance(x: TestContext, judge: Judge):
    """!
    query: Hi, I moved out of Harbor View last month and I'm waiting on my security deposit.
    user_context: >-
      You are Jonas Berg, email jonas.berg@example.net, born 1990-03-03. You moved out May 31. You
      want your deposit refund issued now; you agree that anything you still owe comes out of it.
    tags: [computed, multi-record, multi-step, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0931, property_id: P-02, number: "631", bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1080, status: vacant}]
          tenants: [{id: T-0931, first_name: Jonas, last_name: Berg, email: jonas.berg@example.net, phone: 555-460-3131, date_of_birth: "1990-03-03", forwarding_address: "77 Harbor Rd, Bayport", payment_method: card, status: former}]
          leases: [{id: L-0931, unit_id: U-0931, tenant_id: T-0931, start_date: "2024-06-01", end_date: "2025-05-31", monthly_rent: 1000, status: ended, notice_given_on: "2025-03-15", move_out_date: "2025-05-31"}]
          ledger_entries:
          - {id: E-93101, lease_id: L-0931, posted_on: "2025-05-01", kind: rent, amount: 1000}
          - {id: E-93102, lease_id: L-0931, posted_on: "2025-05-02", kind: payment, amount: 1000, method: card}
          - {id: E-93103, lease_id: L-0931, posted_on: "2025-05-20", kind: utility, amount: 45.3, memo: Final water bill}
          deposits: [{id: D-0931, lease_id: L-0931, amount_held: 1000, status: held}]
          deposit_deductions: [{id: DD-0932, deposit_id: D-0931, reason: Trash removal, amount: 120}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: jonas.berg@example.net, full_name: Jonas Berg, date_of_birth: "1990-03-03"}}
          - {tool: list_leases, parameters: {tenant_id: T-0931}}
          - {tool: get_deposit, parameters: {lease_id: L-0931}}
          - {tool: get_ledger, parameters: {lease_id: L-0931}}
          - {tool: apply_deposit_to_balance, parameters: {lease_id: L-0931, amount: 45.3}}
          - {tool: issue_deposit_refund, parameters: {lease_id: L-0931, amount: 834.7}}
    """
    fx = fx_of(x)
    verified(fx, "T-0931")
    applied = new_one(fx, "ledger_entries", lease_id="L-0931", kind="deposit_applied")
    assert applied["amount"] == 45.3, f"the unpaid 45.30 must be covered from the deposit, posted {applied['amount']}"
    check_refund(fx, "D-0931", 834.7)
    only(fx, [f"ledger_entries[{applied['id']}]", "deposits[D-0931]"])


def test_deposit_refund_needs_approval(x: TestContext, judge: Judge):
    """!
    query: I'd like my security deposit refunded, I left Cedar Ridge on May 31.
    user_context: >-
      You are Amara Obi, email amara.obi@example.net, born 1987-07-07. You want your deposit back.
      If it needs approval, you agree to have it requested.
    tags: [trap, pending-approval, computed, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0932, property_id: P-03, number: "632", bedrooms: 3, bathrooms: 2, sqft: 1450, market_rent: 2180, status: vacant}]
          tenants: [{id: T-0932, first_name: Amara, last_name: Obi, email: amara.obi@example.net, phone: 555-460-3232, date_of_birth: "1987-07-07", forwarding_address: "5 Elm Rd, Millbrook", status: former}]
          leases: [{id: L-0932, unit_id: U-0932, tenant_id: T-0932, start_date: "2024-06-01", end_date: "2025-05-31", monthly_rent: 2100, status: ended, notice_given_on: "2025-03-01", move_out_date: "2025-05-31"}]
          ledger_entries:
          - {id: E-93201, lease_id: L-0932, posted_on: "2025-05-01", kind: rent, amount: 2100}
          - {id: E-93202, lease_id: L-0932, posted_on: "2025-05-01", kind: payment, amount: 2100, method: check}
          deposits: [{id: D-0932, lease_id: L-0932, amount_held: 2100, status: held}]
          deposit_deductions: [{id: DD-0933, deposit_id: D-0932, reason: Carpet cleaning, amount: 150}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: amara.obi@example.net, full_name: Amara Obi, date_of_birth: "1987-07-07"}}
          - {tool: list_leases, parameters: {tenant_id: T-0932}}
          - {tool: get_deposit, parameters: {lease_id: L-0932}}
          - {tool: get_ledger, parameters: {lease_id: L-0932}}
          - {tool: list_approvals, parameters: {lease_id: L-0932}}
          - {tool: request_manager_approval, parameters: {lease_id: L-0932, kind: deposit_refund, amount: 1950, reason: "Deposit 2100.00 minus 150.00 deductions"}}
        rubrics_yesno:
        - >-
          Does the assistant tell the tenant that the refund needs manager approval and has been
          requested, without claiming the refund has been issued?
    """
    fx = fx_of(x)
    verified(fx, "T-0932")
    assert field(fx, "deposits", "D-0932", "status") == "held", "the refund was issued without manager approval"
    req = new_one(fx, "approvals", lease_id="L-0932", kind="deposit_refund", status="pending")
    assert req["amount"] == 1950, f"the refund to approve is 1950.00 (2100 - 150), requested {req['amount']}"
    only(fx, [f"approvals[{req['id']}]"])
    ask_judge(x, judge)


def test_deposit_refund_with_approval(x: TestContext, judge: Judge):
    """!
    query: I was told my deposit refund got approved. Can you send it out now?
    user_context: >-
      You are Theo Marsh, email theo.marsh@example.net, born 1983-01-25. You left The Alder on
      April 30. You want the approved deposit refund issued.
    tags: [write, policy, multi-record, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0933, property_id: P-04, number: "633", bedrooms: 2, bathrooms: 1, sqft: 980, market_rent: 1590, status: vacant}]
          tenants: [{id: T-0933, first_name: Theo, last_name: Marsh, email: theo.marsh@example.net, phone: 555-460-3333, date_of_birth: "1983-01-25", forwarding_address: "19 Pine Ave, Springfield", status: former}]
          leases: [{id: L-0933, unit_id: U-0933, tenant_id: T-0933, start_date: "2024-05-01", end_date: "2025-04-30", monthly_rent: 1500, status: ended, notice_given_on: "2025-02-20", move_out_date: "2025-04-30"}]
          ledger_entries:
          - {id: E-93301, lease_id: L-0933, posted_on: "2025-04-01", kind: rent, amount: 1500}
          - {id: E-93302, lease_id: L-0933, posted_on: "2025-04-01", kind: payment, amount: 1500, method: check}
          deposits: [{id: D-0933, lease_id: L-0933, amount_held: 1500, status: held}]
          deposit_deductions: [{id: DD-0934, deposit_id: D-0933, reason: Repainting, amount: 160}]
          approvals: [{id: A-0933, lease_id: L-0933, kind: deposit_refund, amount: 1340, reason: "Deposit 1500 minus 160", status: approved, requested_on: "2025-05-20", decided_by: S-04, decided_on: "2025-05-22"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: theo.marsh@example.net, full_name: Theo Marsh, date_of_birth: "1983-01-25"}}
          - {tool: list_leases, parameters: {tenant_id: T-0933}}
          - {tool: get_deposit, parameters: {lease_id: L-0933}}
          - {tool: get_ledger, parameters: {lease_id: L-0933}}
          - {tool: list_approvals, parameters: {lease_id: L-0933}}
          - {tool: issue_deposit_refund, parameters: {lease_id: L-0933, amount: 1340, approval_id: A-0933}}
    """
    fx = fx_of(x)
    verified(fx, "T-0933")
    check_refund(fx, "D-0933", 1340, "A-0933")
    assert field(fx, "approvals", "A-0933", "status") == "used", "approval A-0933 was not used"
    only(fx, ["deposits[D-0933]", "approvals[A-0933].status"])


def test_deposit_missing_forwarding_address(x: TestContext, judge: Judge):
    """!
    query: I moved out of Willow Park at the end of May, can you process my deposit refund?
    user_context: >-
      You are Ruby Chandra, email ruby.chandra@example.net, born 1994-11-11. You moved out May 31.
      Your new mailing address is "48 Orchard Lane, Apt 3, Millbrook". You want the refund issued.
    tags: [multi-step, computed, write, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0934, property_id: P-05, number: "634", bedrooms: 1, bathrooms: 1, sqft: 650, market_rent: 1180, status: vacant}]
          tenants: [{id: T-0934, first_name: Ruby, last_name: Chandra, email: ruby.chandra@example.net, phone: 555-460-3434, date_of_birth: "1994-11-11", status: former}]
          leases: [{id: L-0934, unit_id: U-0934, tenant_id: T-0934, start_date: "2024-06-01", end_date: "2025-05-31", monthly_rent: 1100, status: ended, notice_given_on: "2025-03-25", move_out_date: "2025-05-31"}]
          ledger_entries:
          - {id: E-93401, lease_id: L-0934, posted_on: "2025-05-01", kind: rent, amount: 1100}
          - {id: E-93402, lease_id: L-0934, posted_on: "2025-05-03", kind: payment, amount: 1100, method: check}
          deposits: [{id: D-0934, lease_id: L-0934, amount_held: 800, status: held}]
          deposit_deductions: [{id: DD-0935, deposit_id: D-0934, reason: Oven cleaning, amount: 65}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: ruby.chandra@example.net, full_name: Ruby Chandra, date_of_birth: "1994-11-11"}}
          - {tool: list_leases, parameters: {tenant_id: T-0934}}
          - {tool: get_deposit, parameters: {lease_id: L-0934}}
          - {tool: get_ledger, parameters: {lease_id: L-0934}}
          - {tool: update_tenant_contact, parameters: {tenant_id: T-0934, forwarding_address: "48 Orchard Lane, Apt 3, Millbrook"}}
          - {tool: issue_deposit_refund, parameters: {lease_id: L-0934, amount: 735}}
    """
    fx = fx_of(x)
    verified(fx, "T-0934")
    address = field(fx, "tenants", "T-0934", "forwarding_address")
    assert same_text(address, "48 Orchard Lane, Apt 3, Millbrook"), f"forwarding address is {address!r}"
    check_refund(fx, "D-0934", 735)
    only(fx, ["tenants[T-0934].forwarding_address", "deposits[D-0934]"])


def test_deposit_lease_active_trap(x: TestContext, judge: Judge):
    """!
    query: I'm moving out at the end of July and need my deposit now for the new place. Can you refund it today?
    user_context: >-
      You are Samir Aziz, email samir.aziz@example.net, born 1991-08-18. You gave notice and move
      out July 31. You want your deposit refunded today; if refused, ask once more, then accept.
    tags: [trap, policy, judge, "difficulty:easy"]
    init:
      property:
        data_patch:
          units: [{id: U-0935, property_id: P-06, number: "635", bedrooms: 2, bathrooms: 1, sqft: 1000, market_rent: 1690, status: notice}]
          tenants: [{id: T-0935, first_name: Samir, last_name: Aziz, email: samir.aziz@example.net, phone: 555-460-3535, date_of_birth: "1991-08-18", forwarding_address: "3 Quarry Ln, Bayport", payment_method: card, status: current}]
          leases: [{id: L-0935, unit_id: U-0935, tenant_id: T-0935, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1600, status: notice, notice_given_on: "2025-05-10", move_out_date: "2025-07-31"}]
          deposits: [{id: D-0935, lease_id: L-0935, amount_held: 1400, status: held}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: samir.aziz@example.net, full_name: Samir Aziz, date_of_birth: "1991-08-18"}}
          - {tool: list_leases, parameters: {tenant_id: T-0935}}
          - {tool: get_deposit, parameters: {lease_id: L-0935}}
        rubrics_yesno:
        - >-
          Does the assistant decline to refund the deposit now, explaining that deposits are
          refunded only after the lease has ended?
    """
    fx = fx_of(x)
    verified(fx, "T-0935")
    assert field(fx, "deposits", "D-0935", "status") == "held", "the deposit was refunded before the lease ended"
    none_new(fx, "ledger_entries", lease_id="L-0935")
    only(fx)
    ask_judge(x, judge)
