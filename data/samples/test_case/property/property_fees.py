"""Property tasks: late-fee waivers (one courtesy waiver a year, rent paid first, the processor-error exception)."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import ask_judge, field, fx_of, only, verified

"""!
scenario: property_management
tags: ["domain:property-management", late-fees]
"""


def check_fee(x: TestContext, tenant_id: str, fee_id: str, status: str) -> None:
    fx = fx_of(x)
    verified(fx, tenant_id)
    assert field(fx, "ledger_entries", fee_id, "status") == status, f"late fee {fee_id} should be {status}"
    only(fx, [f"ledger_entries[{fee_id}].status", f"ledger_entries[{fee_id}].memo"] if status == "waived" else [])


def test_waive_first_late_fee(x: TestContext, judge: Judge):
    """!
    query: I paid June's rent a few days late and got a late fee. Could you waive it this once?
    user_context: >-
      You are Greta Lindholm, email greta.lindholm@example.net, born 1993-07-22. You paid June
      rent in full on June 9 and want the June late fee waived. You also paid late last November
      (that fee was not waived, you paid it).
    tags: [write, policy, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0910, property_id: P-03, number: "610", bedrooms: 2, bathrooms: 1.5, sqft: 1150, market_rent: 1560, status: occupied}]
          tenants: [{id: T-0910, first_name: Greta, last_name: Lindholm, email: greta.lindholm@example.net, phone: 555-440-1010, date_of_birth: "1993-07-22", payment_method: bank_account, status: current}]
          leases: [{id: L-0910, unit_id: U-0910, tenant_id: T-0910, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1500, status: active}]
          ledger_entries:
          - {id: E-91001, lease_id: L-0910, posted_on: "2024-11-01", kind: rent, amount: 1500}
          - {id: E-91002, lease_id: L-0910, posted_on: "2024-11-06", kind: late_fee, amount: 75}
          - {id: E-91003, lease_id: L-0910, posted_on: "2024-11-08", kind: payment, amount: 1575, method: bank_account}
          - {id: E-91004, lease_id: L-0910, posted_on: "2025-05-01", kind: rent, amount: 1500}
          - {id: E-91005, lease_id: L-0910, posted_on: "2025-05-02", kind: payment, amount: 1500, method: bank_account}
          - {id: E-91006, lease_id: L-0910, posted_on: "2025-06-01", kind: rent, amount: 1500}
          - {id: E-91007, lease_id: L-0910, posted_on: "2025-06-06", kind: late_fee, amount: 75}
          - {id: E-91008, lease_id: L-0910, posted_on: "2025-06-09", kind: payment, amount: 1500, method: bank_account}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: greta.lindholm@example.net, full_name: Greta Lindholm, date_of_birth: "1993-07-22"}}
          - {tool: list_leases, parameters: {tenant_id: T-0910}}
          - {tool: get_ledger, parameters: {lease_id: L-0910}}
          - {tool: waive_late_fee, parameters: {entry_id: E-91007, reason: "Courtesy waiver: June rent paid in full, no waiver in the past year"}}
    """
    check_fee(x, "T-0910", "E-91007", "waived")


def test_waive_second_in_year_trap(x: TestContext, judge: Judge):
    """!
    query: Can you take off the late fee from this month? I paid the rent on the 10th.
    user_context: >-
      You are Felix Moreau, email felix.moreau@example.net, born 1984-12-01. You want June's late
      fee waived. If refused, ask once more, then accept. You do not want to pay anything today.
    tags: [trap, policy, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0911, property_id: P-01, number: "611", bedrooms: 1, bathrooms: 1, sqft: 760, market_rent: 1450, status: occupied}]
          tenants: [{id: T-0911, first_name: Felix, last_name: Moreau, email: felix.moreau@example.net, phone: 555-440-1111, date_of_birth: "1984-12-01", payment_method: card, status: current}]
          leases: [{id: L-0911, unit_id: U-0911, tenant_id: T-0911, start_date: "2024-11-01", end_date: "2025-10-31", monthly_rent: 1400, status: active}]
          ledger_entries:
          - {id: E-91101, lease_id: L-0911, posted_on: "2025-01-01", kind: rent, amount: 1400}
          - {id: E-91102, lease_id: L-0911, posted_on: "2025-01-06", kind: late_fee, amount: 70, status: waived, memo: Courtesy waiver}
          - {id: E-91103, lease_id: L-0911, posted_on: "2025-01-08", kind: payment, amount: 1400, method: card}
          - {id: E-91104, lease_id: L-0911, posted_on: "2025-06-01", kind: rent, amount: 1400}
          - {id: E-91105, lease_id: L-0911, posted_on: "2025-06-06", kind: late_fee, amount: 70}
          - {id: E-91106, lease_id: L-0911, posted_on: "2025-06-10", kind: payment, amount: 1400, method: card}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: felix.moreau@example.net, full_name: Felix Moreau, date_of_birth: "1984-12-01"}}
          - {tool: list_leases, parameters: {tenant_id: T-0911}}
          - {tool: get_ledger, parameters: {lease_id: L-0911}}
        rubrics_yesno:
        - >-
          Does the assistant decline to waive the June late fee, explaining that a late fee on the
          lease was already waived within the past year?
    """
    check_fee(x, "T-0911", "E-91105", "posted")
    ask_judge(x, judge)


def test_waive_unpaid_rent_trap(x: TestContext, judge: Judge):
    """!
    query: Please waive my late fee, money is tight this month.
    user_context: >-
      You are Sofia Brandt, email sofia.brandt@example.net, born 1998-03-27. You paid 1000 of June's
      rent on June 10 and will pay the rest on Friday; you will not pay anything today. You want
      the late fee waived.
    tags: [trap, policy, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0912, property_id: P-04, number: "612", bedrooms: 2, bathrooms: 1, sqft: 1000, market_rent: 1760, status: occupied}]
          tenants: [{id: T-0912, first_name: Sofia, last_name: Brandt, email: sofia.brandt@example.net, phone: 555-440-1212, date_of_birth: "1998-03-27", payment_method: card, status: current}]
          leases: [{id: L-0912, unit_id: U-0912, tenant_id: T-0912, start_date: "2025-03-01", end_date: "2026-02-28", monthly_rent: 1700, status: active}]
          ledger_entries:
          - {id: E-91201, lease_id: L-0912, posted_on: "2025-06-01", kind: rent, amount: 1700}
          - {id: E-91202, lease_id: L-0912, posted_on: "2025-06-06", kind: late_fee, amount: 85}
          - {id: E-91203, lease_id: L-0912, posted_on: "2025-06-10", kind: payment, amount: 1000, method: card}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: sofia.brandt@example.net, full_name: Sofia Brandt, date_of_birth: "1998-03-27"}}
          - {tool: list_leases, parameters: {tenant_id: T-0912}}
          - {tool: get_ledger, parameters: {lease_id: L-0912}}
        rubrics_yesno:
        - >-
          Does the assistant decline to waive the late fee now because June's rent has not yet been
          paid in full?
    """
    check_fee(x, "T-0912", "E-91202", "posted")
    ask_judge(x, judge)


def test_waive_processor_error(x: TestContext, judge: Judge):
    """!
    query: >-
      My June rent payment bounced back even though the money was there, and now I have a late
      fee. I already used my one waiver in February. Can anything be done?
    user_context: >-
      You are Kwame Asante, email kwame.asante@example.net, born 1982-10-10. Your June 3 payment
      came back and you paid again on June 9. You want the June late fee removed.
    tags: [write, policy, multi-record, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0913, property_id: P-06, number: "613", bedrooms: 1, bathrooms: 1, sqft: 800, market_rent: 1610, status: occupied}]
          tenants: [{id: T-0913, first_name: Kwame, last_name: Asante, email: kwame.asante@example.net, phone: 555-440-1313, date_of_birth: "1982-10-10", payment_method: bank_account, status: current}]
          leases: [{id: L-0913, unit_id: U-0913, tenant_id: T-0913, start_date: "2024-09-01", end_date: "2025-08-31", monthly_rent: 1550, status: active}]
          ledger_entries:
          - {id: E-91301, lease_id: L-0913, posted_on: "2025-02-01", kind: rent, amount: 1550}
          - {id: E-91302, lease_id: L-0913, posted_on: "2025-02-06", kind: late_fee, amount: 77.5, status: waived, memo: Courtesy waiver}
          - {id: E-91303, lease_id: L-0913, posted_on: "2025-02-07", kind: payment, amount: 1550, method: bank_account}
          - {id: E-91304, lease_id: L-0913, posted_on: "2025-06-01", kind: rent, amount: 1550}
          - {id: E-91305, lease_id: L-0913, posted_on: "2025-06-03", kind: payment, amount: 1550, method: bank_account, status: returned, memo: "Returned: processor error"}
          - {id: E-91306, lease_id: L-0913, posted_on: "2025-06-06", kind: late_fee, amount: 77.5}
          - {id: E-91307, lease_id: L-0913, posted_on: "2025-06-09", kind: payment, amount: 1550, method: bank_account}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: kwame.asante@example.net, full_name: Kwame Asante, date_of_birth: "1982-10-10"}}
          - {tool: list_leases, parameters: {tenant_id: T-0913}}
          - {tool: get_ledger, parameters: {lease_id: L-0913}}
          - {tool: waive_late_fee, parameters: {entry_id: E-91306, reason: "June 3 payment returned by processor error"}}
    """
    check_fee(x, "T-0913", "E-91306", "waived")


def test_waive_returned_nsf_trap(x: TestContext, judge: Judge):
    """!
    query: My payment got returned this month and then I got a late fee on top. Please remove the fee.
    user_context: >-
      You are Lena Vogel, email lena.vogel@example.net, born 1995-05-19. Your June 2 payment was
      returned by your bank for insufficient funds; you paid again on June 11. You had a late fee
      waived in March. You want the June late fee removed; if refused, accept it.
    tags: [trap, policy, judge, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0914, property_id: P-05, number: "614", bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1340, status: occupied}]
          tenants: [{id: T-0914, first_name: Lena, last_name: Vogel, email: lena.vogel@example.net, phone: 555-440-1414, date_of_birth: "1995-05-19", payment_method: bank_account, status: current}]
          leases: [{id: L-0914, unit_id: U-0914, tenant_id: T-0914, start_date: "2024-10-01", end_date: "2025-09-30", monthly_rent: 1300, status: active}]
          ledger_entries:
          - {id: E-91401, lease_id: L-0914, posted_on: "2025-03-01", kind: rent, amount: 1300}
          - {id: E-91402, lease_id: L-0914, posted_on: "2025-03-06", kind: late_fee, amount: 65, status: waived, memo: Courtesy waiver}
          - {id: E-91403, lease_id: L-0914, posted_on: "2025-03-07", kind: payment, amount: 1300, method: bank_account}
          - {id: E-91404, lease_id: L-0914, posted_on: "2025-06-01", kind: rent, amount: 1300}
          - {id: E-91405, lease_id: L-0914, posted_on: "2025-06-02", kind: payment, amount: 1300, method: bank_account, status: returned, memo: "Returned: insufficient funds"}
          - {id: E-91406, lease_id: L-0914, posted_on: "2025-06-06", kind: late_fee, amount: 65}
          - {id: E-91407, lease_id: L-0914, posted_on: "2025-06-11", kind: payment, amount: 1300, method: bank_account}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: lena.vogel@example.net, full_name: Lena Vogel, date_of_birth: "1995-05-19"}}
          - {tool: list_leases, parameters: {tenant_id: T-0914}}
          - {tool: get_ledger, parameters: {lease_id: L-0914}}
        rubrics_yesno:
        - >-
          Does the assistant decline to waive the June late fee, explaining that a fee was already
          waived within the past year and that a payment returned for insufficient funds is not a
          processing error on the company's side?
    """
    check_fee(x, "T-0914", "E-91406", "posted")
    ask_judge(x, judge)
