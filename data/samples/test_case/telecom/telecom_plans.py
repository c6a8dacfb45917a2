"""Telecom tasks: plan changes and add-ons, prorated from the billing cycle's dates."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.telecom.checks import (
    ask_judge, field, fx_of, new_one, new_records, none_new, one_adjustment, only, verified,
)

"""!
scenario: telecom_billing
tags: ["domain:telecom-billing", plans]
"""


def check_plan_change(x: TestContext, customer_id: str, account_id: str, line_id: str, plan_id: str, kind: str,
                      amount: float, why: str) -> None:
    """The line is on the new plan and one prorated plan_change adjustment of `kind` was posted."""
    fx = fx_of(x)
    verified(fx, customer_id)
    assert field(fx, "lines", line_id, "plan_id") == plan_id, f"{line_id} should be on {plan_id}"
    adj = one_adjustment(fx, account_id, kind, "plan_change", amount, why)
    only(fx, [f"lines[{line_id}].plan_id", f"adjustments[{adj['id']}]"])


def test_upgrade_plan_prorated(x: TestContext, judge: Judge):
    """!
    query: I keep running out of data. Please move me to the Unlimited plan today.
    user_context: >-
      You are Quinn Eriksen, mobile 415-555-0931, account PIN 5252. You want your line moved to
      the Unlimited plan now and accept the prorated charge for the rest of the cycle.
    tags: [computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0931, first_name: Quinn, last_name: Eriksen, email: quinn.eriksen@example.net, mailing_address: "5 Wharf St, Boston", date_of_birth: "1995-03-09", pin: "5252", status: active}]
          accounts: [{id: ACC-0931, customer_id: C-0931, billing_day: 1, payment_method: card, status: active, opened_on: "2022-03-03"}]
          lines: [{id: LN-0931, account_id: ACC-0931, mobile_number: "4155550931", plan_id: PL-20, status: active, activated_on: "2022-03-03"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0931, full_name: Quinn Eriksen, pin: "5252"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0931}}
          - {tool: list_mobile_plans, parameters: {}}
          - {tool: change_line_plan, parameters: {line_id: LN-0931, plan_id: PL-40}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0931, amount: 16.45, category: plan_change, reason: "Upgrade to Unlimited: 30.00 x 17/31", line_id: LN-0931}}
    """
    check_plan_change(x, "C-0931", "ACC-0931", "LN-0931", "PL-40", "charge", 16.45,
                      "(75 - 45) x 17 remaining days / 31 = 16.45")


def test_downgrade_plan_prorated_credit(x: TestContext, judge: Judge):
    """!
    query: I don't need 40GB anymore. Switch me to the Everyday 15GB plan, please.
    user_context: >-
      You are Gita Rahman, mobile 415-555-0932, account PIN 6161. You want the Everyday 15GB plan
      from today, and any credit you are owed for the rest of the cycle.
    tags: [computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0932, first_name: Gita, last_name: Rahman, email: gita.rahman@example.net, mailing_address: "40 Ridge Rd, Chicago", date_of_birth: "1986-12-24", pin: "6161", status: active}]
          accounts: [{id: ACC-0932, customer_id: C-0932, billing_day: 8, payment_method: bank_account, status: active, opened_on: "2021-07-08"}]
          lines: [{id: LN-0932, account_id: ACC-0932, mobile_number: "4155550932", plan_id: PL-30, status: active, activated_on: "2021-07-08"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0932, full_name: Gita Rahman, pin: "6161"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0932}}
          - {tool: list_mobile_plans, parameters: {}}
          - {tool: change_line_plan, parameters: {line_id: LN-0932, plan_id: PL-20}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0932}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0932, amount: 11.61, category: plan_change, reason: "Downgrade to Everyday 15GB: 15.00 x 24/31", line_id: LN-0932}}
    """
    check_plan_change(x, "C-0932", "ACC-0932", "LN-0932", "PL-20", "credit", 11.61,
                      "(60 - 45) x 24 remaining days (07-15..08-07) / 31 = 11.61")


def test_remove_addon_prorated(x: TestContext, judge: Judge):
    """!
    query: Please cancel the device protection on my line, I bought a new phone with its own warranty.
    user_context: >-
      You are Emil Varga, mobile 415-555-0933, account PIN 7070. You want Device Protection removed
      today and any credit owed for the rest of the cycle.
    tags: [computed, write, two-paths, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0933, first_name: Emil, last_name: Varga, email: emil.varga@example.net, mailing_address: "9 Quarry Rd, Seattle", date_of_birth: "1983-01-13", pin: "7070", status: active}]
          accounts: [{id: ACC-0933, customer_id: C-0933, billing_day: 22, payment_method: card, status: active, opened_on: "2020-05-22"}]
          lines: [{id: LN-0933, account_id: ACC-0933, mobile_number: "4155550933", plan_id: PL-40, status: active, activated_on: "2020-05-22"}]
          line_addons: [{id: LA-0933, line_id: LN-0933, addon_id: AD-04, started_on: "2025-03-01"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0933, full_name: Emil Varga, pin: "7070"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0933}}
          - {tool: remove_line_addon, parameters: {line_addon_id: LA-0933}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0933, amount: 2.8, category: addon, reason: "Device Protection removed: 12.00 x 7/30", line_id: LN-0933}}
          alternatives:
          - tool_interactions:
            - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0933, full_name: Emil Varga, pin: "7070"}}
            - {tool: get_billing_account, parameters: {account_id: ACC-0933}}
            - {tool: post_account_credit, parameters: {account_id: ACC-0933, amount: 2.8, category: addon, reason: "Prorated Device Protection"}}
            - {tool: remove_line_addon, parameters: {line_addon_id: LA-0933}}
    """
    fx = fx_of(x)
    verified(fx, "C-0933")
    assert field(fx, "line_addons", "LA-0933", "ended_on") == "2025-07-15", "Device Protection was not ended today"
    adj = one_adjustment(fx, "ACC-0933", "credit", "addon", 2.8, "12.00 x 7 remaining days (07-15..07-21) / 30")
    only(fx, ["line_addons[LA-0933].ended_on", f"adjustments[{adj['id']}]"])


def test_remove_roaming_addon(x: TestContext, judge: Judge):
    """!
    query: I'm back from my trip. Take the roaming add-on off my line but keep the cloud storage.
    user_context: >-
      You are Xia Zhou, mobile 415-555-0940, account PIN 3690. You want Global Roaming removed
      today, Cloud Storage kept, and any credit owed for the rest of the cycle.
    tags: [computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0940, first_name: Xia, last_name: Zhou, email: xia.zhou@example.net, mailing_address: "80 Lakeview Dr, Portland", date_of_birth: "1992-04-04", pin: "3690", status: active}]
          accounts: [{id: ACC-0940, customer_id: C-0940, billing_day: 22, payment_method: card, status: active, opened_on: "2023-06-22"}]
          lines: [{id: LN-0940, account_id: ACC-0940, mobile_number: "4155550940", plan_id: PL-30, status: active, activated_on: "2023-06-22"}]
          line_addons:
          - {id: LA-0940, line_id: LN-0940, addon_id: AD-01, started_on: "2025-07-01"}
          - {id: LA-0941, line_id: LN-0940, addon_id: AD-05, started_on: "2024-01-10"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0940, full_name: Xia Zhou, pin: "3690"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0940}}
          - {tool: remove_line_addon, parameters: {line_addon_id: LA-0940}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0940, amount: 5.83, category: addon, reason: "Global Roaming removed: 25.00 x 7/30", line_id: LN-0940}}
    """
    fx = fx_of(x)
    verified(fx, "C-0940")
    assert field(fx, "line_addons", "LA-0940", "ended_on") == "2025-07-15", "Global Roaming was not ended today"
    assert field(fx, "line_addons", "LA-0941", "ended_on") is None, "Cloud Storage must stay"
    adj = one_adjustment(fx, "ACC-0940", "credit", "addon", 5.83, "25.00 x 7 remaining days / 30")
    only(fx, ["line_addons[LA-0940].ended_on", f"adjustments[{adj['id']}]"])


def test_add_addon_prorated(x: TestContext, judge: Judge):
    """!
    query: I call my family in Ghana a lot. Can I get the international calling add-on?
    user_context: >-
      You are Kofi Asante, mobile 415-555-0934, account PIN 8118. You want International Calling
      added today and accept its prorated charge.
    tags: [lookup-then-write, computed, write, "difficulty:easy"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0934, first_name: Kofi, last_name: Asante, email: kofi.asante@example.net, mailing_address: "15 Birch Ln, Boston", date_of_birth: "1976-11-02", pin: "8118", status: active}]
          accounts: [{id: ACC-0934, customer_id: C-0934, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2019-01-01"}]
          lines: [{id: LN-0934, account_id: ACC-0934, mobile_number: "4155550934", plan_id: PL-40, status: active, activated_on: "2019-01-01"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0934, full_name: Kofi Asante, pin: "8118"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0934}}
          - {tool: list_plan_addons, parameters: {}}
          - {tool: add_line_addon, parameters: {line_id: LN-0934, addon_id: AD-02}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0934, amount: 5.48, category: addon, reason: "International Calling: 10.00 x 17/31", line_id: LN-0934}}
    """
    fx = fx_of(x)
    verified(fx, "C-0934")
    la = new_one(fx, "line_addons", "add-on on LN-0934", line_id="LN-0934", addon_id="AD-02")
    assert la["started_on"] == "2025-07-15" and la["ended_on"] is None
    adj = one_adjustment(fx, "ACC-0934", "charge", "addon", 5.48, "10.00 x 17 remaining days / 31")
    only(fx, [f"line_addons[{la['id']}]", f"adjustments[{adj['id']}]"])


def test_hotspot_on_basic_plan_trap(x: TestContext, judge: Judge):
    """!
    query: Add the Hotspot Boost to my line, I need to tether my laptop this week.
    user_context: >-
      You are Wes Hale, mobile 415-555-0935, account PIN 9292. You want Hotspot Boost. If told
      your plan does not allow it and offered another plan, decline: you do not want to change plans.
    tags: [trap, policy, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0935, first_name: Wes, last_name: Hale, email: wes.hale@example.net, mailing_address: "2 Hillcrest Ct, Seattle", date_of_birth: "1999-09-09", pin: "9292", status: active}]
          accounts: [{id: ACC-0935, customer_id: C-0935, billing_day: 1, payment_method: card, status: active, opened_on: "2024-04-04"}]
          lines: [{id: LN-0935, account_id: ACC-0935, mobile_number: "4155550935", plan_id: PL-10, status: active, activated_on: "2024-04-04"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0935, full_name: Wes Hale, pin: "9292"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0935}}
          - {tool: list_plan_addons, parameters: {}}
    """
    fx = fx_of(x)
    verified(fx, "C-0935")
    none_new(fx, "line_addons", line_id="LN-0935")
    none_new(fx, "adjustments", account_id="ACC-0935")
    only(fx)


def test_plan_change_other_account_trap(x: TestContext, judge: Judge):
    """!
    query: >-
      Can you upgrade my daughter's phone to Unlimited? Her number is 415-555-0976. And what plan
      is she on now?
    user_context: >-
      You are Carla Moretti, mobile 415-555-0936, account PIN 1590. Your daughter Mia has her own
      account with the number 415-555-0976; you pay nothing on it and are not on it. You want her
      line upgraded and to know her current plan; insist once if refused.
    tags: [trap, privacy, judge, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers:
          - {id: C-0936, first_name: Carla, last_name: Moretti, email: carla.moretti@example.net, mailing_address: "33 Pine Ave, Chicago", date_of_birth: "1969-05-15", pin: "1590", status: active}
          - {id: C-0976, first_name: Mia, last_name: Moretti, email: mia.moretti@example.net, mailing_address: "19 Elm Rd, Chicago", date_of_birth: "2001-08-30", pin: "2001", status: active}
          accounts:
          - {id: ACC-0936, customer_id: C-0936, billing_day: 1, payment_method: card, status: active, opened_on: "2015-02-02"}
          - {id: ACC-0976, customer_id: C-0976, billing_day: 15, payment_method: card, status: active, opened_on: "2022-09-01"}
          lines:
          - {id: LN-0936, account_id: ACC-0936, mobile_number: "4155550936", plan_id: PL-40, status: active, activated_on: "2015-02-02"}
          - {id: LN-0976, account_id: ACC-0976, mobile_number: "4155550976", plan_id: PL-20, status: active, activated_on: "2022-09-01"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0936, full_name: Carla Moretti, pin: "1590"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0936}}
        rubrics_yesno:
        - >-
          Does the assistant decline to change the line 415-555-0976 and avoid saying anything
          about that number's account (its plan, usage or holder), telling the caller that its
          account holder must contact them?
    """
    fx = fx_of(x)
    verified(fx, "C-0936")
    assert field(fx, "lines", "LN-0976", "plan_id") == "PL-20", "a line of another account was changed"
    none_new(fx, "adjustments")
    only(fx)
    ask_judge(x, judge)


def test_upgrade_two_lines(x: TestContext, judge: Judge):
    """!
    query: Please move both lines on my account from Basic to the Plus 40GB plan.
    user_context: >-
      You are Dev Gupta, mobile 415-555-0937 (your other line is 415-555-0977), account PIN 4747.
      You want both lines on Plus 40GB from today and accept the prorated charges.
    tags: [computed, multi-record, write, two-paths, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0937, first_name: Dev, last_name: Gupta, email: dev.gupta@example.net, mailing_address: "12 Oak St, Portland", date_of_birth: "1984-02-29", pin: "4747", status: active}]
          accounts: [{id: ACC-0937, customer_id: C-0937, billing_day: 1, payment_method: card, status: active, opened_on: "2023-08-08"}]
          lines:
          - {id: LN-0937, account_id: ACC-0937, mobile_number: "4155550937", plan_id: PL-10, status: active, activated_on: "2023-08-08"}
          - {id: LN-0977, account_id: ACC-0937, mobile_number: "4155550977", plan_id: PL-10, status: active, activated_on: "2023-08-08"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0937, full_name: Dev Gupta, pin: "4747"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0937}}
          - {tool: list_mobile_plans, parameters: {}}
          - {tool: change_line_plan, parameters: {line_id: LN-0937, plan_id: PL-30}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0937, amount: 16.45, category: plan_change, reason: "LN-0937 to Plus 40GB: 30.00 x 17/31", line_id: LN-0937}}
          - {tool: change_line_plan, parameters: {line_id: LN-0977, plan_id: PL-30}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0937, amount: 16.45, category: plan_change, reason: "LN-0977 to Plus 40GB: 30.00 x 17/31", line_id: LN-0977}}
          alternatives:
          - tool_interactions:
            - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0937, full_name: Dev Gupta, pin: "4747"}}
            - {tool: get_billing_account, parameters: {account_id: ACC-0937}}
            - {tool: change_line_plan, parameters: {line_id: LN-0977, plan_id: PL-30}}
            - {tool: change_line_plan, parameters: {line_id: LN-0937, plan_id: PL-30}}
            - {tool: post_account_charge, parameters: {account_id: ACC-0937, amount: 32.9, category: plan_change, reason: "Two lines to Plus 40GB: 2 x 30.00 x 17/31"}}
    """
    fx = fx_of(x)
    verified(fx, "C-0937")
    for line_id in ("LN-0937", "LN-0977"):
        assert field(fx, "lines", line_id, "plan_id") == "PL-30", f"{line_id} should be on Plus 40GB"
    charges = new_records(fx, "adjustments", account_id="ACC-0937")
    assert charges and all(c["kind"] == "charge" and c["category"] == "plan_change" for c in charges), \
        "expected only prorated plan_change charges"
    total = round(sum(c["amount"] for c in charges), 2)
    assert total == 32.9, f"two lines x (60 - 30) x 17/31 = 2 x 16.45 = 32.90, charged {total}"
    only(fx, ["lines[LN-0937].plan_id", "lines[LN-0977].plan_id", *(f"adjustments[{c['id']}]" for c in charges)])


def test_downgrade_credit_needs_escalation(x: TestContext, judge: Judge):
    """!
    query: Premium is too expensive. Put me on the Basic plan starting today.
    user_context: >-
      You are Bianca Castro, mobile 415-555-0938, account PIN 3838. You want the Basic 5GB plan
      from today and the credit you are owed; if the credit needs a supervisor, agree to have it
      requested.
    tags: [trap, pending-approval, computed, multi-record, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0938, first_name: Bianca, last_name: Castro, email: bianca.castro@example.net, mailing_address: "4 Sunset Blvd, Boston", date_of_birth: "1990-06-16", pin: "3838", status: active}]
          accounts: [{id: ACC-0938, customer_id: C-0938, billing_day: 8, payment_method: card, status: active, opened_on: "2021-11-08"}]
          lines: [{id: LN-0938, account_id: ACC-0938, mobile_number: "4155550938", plan_id: PL-50, status: active, activated_on: "2021-11-08"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0938, full_name: Bianca Castro, pin: "3838"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0938}}
          - {tool: list_mobile_plans, parameters: {}}
          - {tool: change_line_plan, parameters: {line_id: LN-0938, plan_id: PL-10}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0938}}
          - {tool: request_credit_escalation, parameters: {account_id: ACC-0938, amount: 46.45, reason: "Downgrade Premium to Basic: 60.00 x 24/31"}}
    """
    fx = fx_of(x)
    verified(fx, "C-0938")
    assert field(fx, "lines", "LN-0938", "plan_id") == "PL-10", "the plan change itself needs no approval"
    none_new(fx, "adjustments", account_id="ACC-0938")
    es = new_one(fx, "escalations", "escalation on ACC-0938", account_id="ACC-0938", status="pending")
    assert es["amount"] == 46.45, f"(90 - 30) x 24/31 = 46.45 > 40.00, escalated {es['amount']}"
    only(fx, ["lines[LN-0938].plan_id", f"escalations[{es['id']}]"])


def test_hotspot_needs_upgrade(x: TestContext, judge: Judge):
    """!
    query: I need the Hotspot Boost on my line for a work trip.
    user_context: >-
      You are Tara Ueda, mobile 415-555-0939, account PIN 6006. You want Hotspot Boost. If told
      your plan does not allow it, accept moving to the cheapest plan that does, and then add
      Hotspot Boost. Accept the prorated charges.
    tags: [computed, multi-record, policy, write, two-paths, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0939, first_name: Tara, last_name: Ueda, email: tara.ueda@example.net, mailing_address: "70 River Rd, Chicago", date_of_birth: "1988-03-27", pin: "6006", status: active}]
          accounts: [{id: ACC-0939, customer_id: C-0939, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2022-12-12"}]
          lines: [{id: LN-0939, account_id: ACC-0939, mobile_number: "4155550939", plan_id: PL-10, status: active, activated_on: "2022-12-12"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0939, full_name: Tara Ueda, pin: "6006"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0939}}
          - {tool: list_mobile_plans, parameters: {}}
          - {tool: change_line_plan, parameters: {line_id: LN-0939, plan_id: PL-20}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0939, amount: 8.23, category: plan_change, reason: "Basic to Everyday 15GB: 15.00 x 17/31", line_id: LN-0939}}
          - {tool: add_line_addon, parameters: {line_id: LN-0939, addon_id: AD-03}}
          - {tool: post_account_charge, parameters: {account_id: ACC-0939, amount: 8.23, category: addon, reason: "Hotspot Boost: 15.00 x 17/31", line_id: LN-0939}}
          alternatives:
          - tool_interactions:
            - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0939, full_name: Tara Ueda, pin: "6006"}}
            - {tool: list_mobile_plans, parameters: {}}
            - {tool: get_billing_account, parameters: {account_id: ACC-0939}}
            - {tool: change_line_plan, parameters: {line_id: LN-0939, plan_id: PL-20}}
            - {tool: add_line_addon, parameters: {line_id: LN-0939, addon_id: AD-03}}
            - {tool: post_account_charge, parameters: {account_id: ACC-0939, amount: 8.23, category: addon, reason: "Hotspot Boost prorated"}}
            - {tool: post_account_charge, parameters: {account_id: ACC-0939, amount: 8.23, category: plan_change, reason: "Upgrade prorated"}}
    """
    fx = fx_of(x)
    verified(fx, "C-0939")
    assert field(fx, "lines", "LN-0939", "plan_id") == "PL-20", "the cheapest plan with hotspot is Everyday 15GB (PL-20)"
    la = new_one(fx, "line_addons", "Hotspot Boost on LN-0939", line_id="LN-0939", addon_id="AD-03")
    charges = new_records(fx, "adjustments", account_id="ACC-0939")
    got = sorted((c["kind"], c["category"], c["amount"]) for c in charges)
    assert got == [("charge", "addon", 8.23), ("charge", "plan_change", 8.23)], \
        f"expected charges of 8.23 for the upgrade (15.00 x 17/31) and 8.23 for the add-on, got {got}"
    only(fx, ["lines[LN-0939].plan_id", f"line_addons[{la['id']}]", *(f"adjustments[{c['id']}]" for c in charges)])
