"""Property tasks: renewals, notices to vacate and pets."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import (
    ask_judge, field, fx_of, new_one, none_new, only, verified,
)

"""!
scenario: property_management
tags: ["domain:property-management", leases]
"""


def check_renewal(fx: dict, lease_id: str, rent: float, start: str, end: str) -> dict:
    new = new_one(fx, "leases", previous_lease_id=lease_id)
    assert new["monthly_rent"] == rent, f"the renewal rent should be {rent:.2f}, got {new['monthly_rent']}"
    assert (new["start_date"], new["end_date"], new["status"]) == (start, end, "upcoming"), \
        f"the renewal should run {start} to {end} (upcoming)"
    return new


def test_renewal_compute(x: TestContext, judge: Judge):
    """!
    query: My lease is up at the end of August and I'd like to renew for another year. What would the rent be?
    user_context: >-
      You are Marta Kowal, email marta.kowal@example.net, born 1986-02-17. You want to renew for
      12 months and accept the renewal rent the assistant quotes.
    tags: [computed, write, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0960, property_id: P-02, number: "660", bedrooms: 2, bathrooms: 2, sqft: 1150, market_rent: 1990, status: occupied}]
          tenants: [{id: T-0960, first_name: Marta, last_name: Kowal, email: marta.kowal@example.net, phone: 555-490-0960, date_of_birth: "1986-02-17", payment_method: card, status: current}]
          leases: [{id: L-0960, unit_id: U-0960, tenant_id: T-0960, start_date: "2024-09-01", end_date: "2025-08-31", monthly_rent: 1850, status: active}]
          ledger_entries:
          - {id: E-96001, lease_id: L-0960, posted_on: "2025-06-01", kind: rent, amount: 1850}
          - {id: E-96002, lease_id: L-0960, posted_on: "2025-06-01", kind: payment, amount: 1850, method: card}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: marta.kowal@example.net, full_name: Marta Kowal, date_of_birth: "1986-02-17"}}
          - {tool: list_leases, parameters: {tenant_id: T-0960}}
          - {tool: get_lease, parameters: {lease_id: L-0960}}
          - {tool: get_ledger, parameters: {lease_id: L-0960}}
          - {tool: renew_lease, parameters: {lease_id: L-0960, new_monthly_rent: 1924}}
    """
    fx = fx_of(x)
    verified(fx, "T-0960")
    new = check_renewal(fx, "L-0960", 1924, "2025-09-01", "2026-08-31")
    only(fx, [f"leases[{new['id']}]"])


def test_pay_then_renew(x: TestContext, judge: Judge):
    """!
    query: I'd like to sign a renewal for my apartment at Maple Court.
    user_context: >-
      You are Diego Fuentes, email diego.fuentes@example.net, born 1992-08-03. You want to renew
      for 12 months. If there is something to pay first, you agree to pay it with your card on
      file. Accept the renewal rent quoted.
    tags: [computed, multi-step, write, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0961, property_id: P-01, number: "661", bedrooms: 1, bathrooms: 1, sqft: 760, market_rent: 1480, status: occupied}]
          tenants: [{id: T-0961, first_name: Diego, last_name: Fuentes, email: diego.fuentes@example.net, phone: 555-490-0961, date_of_birth: "1992-08-03", payment_method: card, status: current}]
          leases: [{id: L-0961, unit_id: U-0961, tenant_id: T-0961, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1420, status: active}]
          ledger_entries:
          - {id: E-96101, lease_id: L-0961, posted_on: "2025-06-01", kind: rent, amount: 1420}
          - {id: E-96102, lease_id: L-0961, posted_on: "2025-06-02", kind: payment, amount: 1420, method: card}
          - {id: E-96103, lease_id: L-0961, posted_on: "2025-06-12", kind: utility, amount: 58.4, memo: Water and sewer May}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: diego.fuentes@example.net, full_name: Diego Fuentes, date_of_birth: "1992-08-03"}}
          - {tool: list_leases, parameters: {tenant_id: T-0961}}
          - {tool: get_lease, parameters: {lease_id: L-0961}}
          - {tool: get_ledger, parameters: {lease_id: L-0961}}
          - {tool: record_payment, parameters: {lease_id: L-0961, amount: 58.4, method: card}}
          - {tool: renew_lease, parameters: {lease_id: L-0961, new_monthly_rent: 1470}}
    """
    fx = fx_of(x)
    verified(fx, "T-0961")
    pay = new_one(fx, "ledger_entries", lease_id="L-0961", kind="payment")
    assert pay["amount"] == 58.4 and pay["method"] == "card", "the open 58.40 must be paid with the card first"
    new = check_renewal(fx, "L-0961", 1470, "2025-08-01", "2026-07-31")
    only(fx, [f"ledger_entries[{pay['id']}]", f"leases[{new['id']}]"])


def test_renewal_too_early_trap(x: TestContext, judge: Judge):
    """!
    query: I love it here, can I lock in my renewal now so my rent doesn't go up later?
    user_context: >-
      You are Ewa Nowak, email ewa.nowak@example.net, born 1990-11-23. Your lease ends January 31,
      2026. You want to renew today; if told it is too early, accept.
    tags: [trap, policy, judge, "difficulty:easy"]
    init:
      property:
        data_patch:
          units: [{id: U-0962, property_id: P-03, number: "662", bedrooms: 2, bathrooms: 1.5, sqft: 1120, market_rent: 1700, status: occupied}]
          tenants: [{id: T-0962, first_name: Ewa, last_name: Nowak, email: ewa.nowak@example.net, phone: 555-490-0962, date_of_birth: "1990-11-23", payment_method: bank_account, status: current}]
          leases: [{id: L-0962, unit_id: U-0962, tenant_id: T-0962, start_date: "2025-02-01", end_date: "2026-01-31", monthly_rent: 1650, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: ewa.nowak@example.net, full_name: Ewa Nowak, date_of_birth: "1990-11-23"}}
          - {tool: list_leases, parameters: {tenant_id: T-0962}}
          - {tool: get_lease, parameters: {lease_id: L-0962}}
        rubrics_yesno:
        - >-
          Does the assistant decline to renew now, explaining that a renewal is possible only within
          90 days of the lease end date?
    """
    fx = fx_of(x)
    verified(fx, "T-0962")
    none_new(fx, "leases", previous_lease_id="L-0962")
    only(fx)
    ask_judge(x, judge)


def check_notice(fx: dict, lease_id: str, unit_id: str, move_out: str) -> None:
    assert field(fx, "leases", lease_id, "status") == "notice", f"lease {lease_id} is not on notice"
    assert field(fx, "leases", lease_id, "notice_given_on") == "2025-06-16", "notice must be dated today"
    got = field(fx, "leases", lease_id, "move_out_date")
    assert got == move_out, f"the move-out date should be {move_out}, got {got}"
    assert field(fx, "units", unit_id, "status") == "notice", f"unit {unit_id} is not on notice"
    only(fx, [f"leases[{lease_id}].status", f"leases[{lease_id}].notice_given_on",
              f"leases[{lease_id}].move_out_date", f"units[{unit_id}].status"])


def test_notice_earliest_date(x: TestContext, judge: Judge):
    """!
    query: I'm giving notice. I want to be out by July 31.
    user_context: >-
      You are Kenji Sato, email kenji.sato@example.net, born 1984-06-06. You want to move out July
      31. If told that is too soon, accept the earliest date the assistant offers.
    tags: [policy, computed, write, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0963, property_id: P-06, number: "663", bedrooms: 1, bathrooms: 1, sqft: 790, market_rent: 1560, status: occupied}]
          tenants: [{id: T-0963, first_name: Kenji, last_name: Sato, email: kenji.sato@example.net, phone: 555-490-0963, date_of_birth: "1984-06-06", payment_method: card, status: current}]
          leases: [{id: L-0963, unit_id: U-0963, tenant_id: T-0963, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1520, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: kenji.sato@example.net, full_name: Kenji Sato, date_of_birth: "1984-06-06"}}
          - {tool: list_leases, parameters: {tenant_id: T-0963}}
          - {tool: record_move_out_notice, parameters: {lease_id: L-0963, move_out_date: "2025-08-15"}}
        rubrics_yesno:
        - >-
          Does the assistant tell the tenant that July 31 is less than the required 60 days' notice
          and offer August 15, 2025 as the earliest move-out date?
    """
    fx = fx_of(x)
    verified(fx, "T-0963")
    check_notice(fx, "L-0963", "U-0963", "2025-08-15")
    ask_judge(x, judge)


def test_notice_compliant(x: TestContext, judge: Judge):
    """!
    query: I need to give notice that I'm moving out at the end of September.
    user_context: >-
      You are Olivia Hart, email olivia.hart@example.net, born 1996-10-31. You move out on
      September 30, 2025, the day your lease ends.
    tags: [write, "difficulty:easy"]
    init:
      property:
        data_patch:
          units: [{id: U-0964, property_id: P-05, number: "664", bedrooms: 0, bathrooms: 1, sqft: 500, market_rent: 990, status: occupied}]
          tenants: [{id: T-0964, first_name: Olivia, last_name: Hart, email: olivia.hart@example.net, phone: 555-490-0964, date_of_birth: "1996-10-31", payment_method: bank_account, status: current}]
          leases: [{id: L-0964, unit_id: U-0964, tenant_id: T-0964, start_date: "2024-10-01", end_date: "2025-09-30", monthly_rent: 960, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: olivia.hart@example.net, full_name: Olivia Hart, date_of_birth: "1996-10-31"}}
          - {tool: list_leases, parameters: {tenant_id: T-0964}}
          - {tool: record_move_out_notice, parameters: {lease_id: L-0964, move_out_date: "2025-09-30"}}
    """
    fx = fx_of(x)
    verified(fx, "T-0964")
    check_notice(fx, "L-0964", "U-0964", "2025-09-30")


def test_add_small_dog(x: TestContext, judge: Judge):
    """!
    query: I'm adopting a dog next week. What do I need to do to add him to my lease?
    user_context: >-
      You are Rohan Das, email rohan.das@example.net, born 1991-03-14, at Harbor View Lofts. The
      dog is named Pico and weighs 28 lb. You want him added to your lease and accept the pet rent.
    tags: [policy, write, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0965, property_id: P-02, number: "665", bedrooms: 1, bathrooms: 1, sqft: 720, market_rent: 1620, status: occupied}]
          tenants: [{id: T-0965, first_name: Rohan, last_name: Das, email: rohan.das@example.net, phone: 555-490-0965, date_of_birth: "1991-03-14", payment_method: card, status: current}]
          leases: [{id: L-0965, unit_id: U-0965, tenant_id: T-0965, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1590, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: rohan.das@example.net, full_name: Rohan Das, date_of_birth: "1991-03-14"}}
          - {tool: list_leases, parameters: {tenant_id: T-0965}}
          - {tool: get_lease, parameters: {lease_id: L-0965}}
          - {tool: add_pet, parameters: {lease_id: L-0965, species: dog, name: Pico, weight_lb: 28}}
    """
    fx = fx_of(x)
    verified(fx, "T-0965")
    pet = new_one(fx, "pets", lease_id="L-0965")
    assert (pet["species"], pet["weight_lb"], pet["monthly_fee"]) == ("dog", 28, 40), \
        f"expected a 28 lb dog at 40.00 a month, got {pet['species']} {pet['weight_lb']} lb at {pet['monthly_fee']}"
    assert pet["name"].strip().lower() == "pico", f"the dog is Pico, recorded {pet['name']!r}"
    only(fx, [f"pets[{pet['id']}]"])


def test_large_dog_trap(x: TestContext, judge: Judge):
    """!
    query: Can you add my dog Bruno to my lease? He's a lab mix, about 55 pounds, super friendly.
    user_context: >-
      You are Sara Quinn, email sara.quinn@example.net, born 1989-09-01, at Harbor View Lofts. Your
      dog Bruno weighs 55 lb. You want him added; if refused, ask once more, then accept.
    tags: [trap, policy, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0966, property_id: P-02, number: "666", bedrooms: 2, bathrooms: 1, sqft: 980, market_rent: 1880, status: occupied}]
          tenants: [{id: T-0966, first_name: Sara, last_name: Quinn, email: sara.quinn@example.net, phone: 555-490-0966, date_of_birth: "1989-09-01", payment_method: card, status: current}]
          leases: [{id: L-0966, unit_id: U-0966, tenant_id: T-0966, start_date: "2024-12-01", end_date: "2025-11-30", monthly_rent: 1840, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: sara.quinn@example.net, full_name: Sara Quinn, date_of_birth: "1989-09-01"}}
          - {tool: list_leases, parameters: {tenant_id: T-0966}}
          - {tool: get_lease, parameters: {lease_id: L-0966}}
        rubrics_yesno:
        - >-
          Does the assistant decline to add the dog, explaining that Harbor View Lofts allows dogs
          only up to 35 lb?
    """
    fx = fx_of(x)
    verified(fx, "T-0966")
    none_new(fx, "pets", lease_id="L-0966")
    only(fx)
    ask_judge(x, judge)


def test_dog_at_cats_only_trap(x: TestContext, judge: Judge):
    """!
    query: I'd like to add a small dog to my lease, she's only 12 pounds.
    user_context: >-
      You are Tomasz Wolski, email tomasz.wolski@example.net, born 1987-01-19, at The Alder. Your
      dog Daisy weighs 12 lb. You want her added; if refused, accept.
    tags: [trap, policy, judge, "difficulty:easy"]
    init:
      property:
        data_patch:
          units: [{id: U-0967, property_id: P-04, number: "667", bedrooms: 1, bathrooms: 1, sqft: 730, market_rent: 1460, status: occupied}]
          tenants: [{id: T-0967, first_name: Tomasz, last_name: Wolski, email: tomasz.wolski@example.net, phone: 555-490-0967, date_of_birth: "1987-01-19", payment_method: bank_account, status: current}]
          leases: [{id: L-0967, unit_id: U-0967, tenant_id: T-0967, start_date: "2025-03-01", end_date: "2026-02-28", monthly_rent: 1430, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: tomasz.wolski@example.net, full_name: Tomasz Wolski, date_of_birth: "1987-01-19"}}
          - {tool: list_leases, parameters: {tenant_id: T-0967}}
          - {tool: get_lease, parameters: {lease_id: L-0967}}
        rubrics_yesno:
        - Does the assistant decline to add the dog because The Alder allows cats only?
    """
    fx = fx_of(x)
    verified(fx, "T-0967")
    none_new(fx, "pets", lease_id="L-0967")
    only(fx)
    ask_judge(x, judge)
