"""Telecom tasks: credits from usage dates (stolen phones, roaming), the agent's credit limit and escalations."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.telecom.checks import (
    ask_judge, field, fx_of, new_one, none_new, one_adjustment, only, verified,
)

"""!
scenario: telecom_billing
tags: ["domain:telecom-billing", credits]
"""


def check_no_credit(x: TestContext, customer_id: str, account_id: str) -> None:
    """Verified, and neither a credit nor an escalation was written."""
    fx = fx_of(x)
    verified(fx, customer_id)
    none_new(fx, "adjustments", account_id=account_id)
    none_new(fx, "escalations", account_id=account_id)
    only(fx)


def check_escalated(x: TestContext, customer_id: str, account_id: str, amount: float, why: str,
                    allow: tuple[str, ...] = ()) -> None:
    """Verified, no credit, and one pending escalation of the computed amount."""
    fx = fx_of(x)
    verified(fx, customer_id)
    none_new(fx, "adjustments", account_id=account_id)
    es = new_one(fx, "escalations", f"escalation on {account_id}", account_id=account_id, status="pending")
    assert es["amount"] == amount, f"{why}: the escalation should be for {amount:.2f}, got {es['amount']}"
    only(fx, [f"escalations[{es['id']}]", *allow])


def test_stolen_phone_suspend_and_credit(x: TestContext, judge: Judge):
    """!
    query: >-
      My phone was stolen on Sunday and now I see charges for calls and texts I never made.
      Please help.
    user_context: >-
      You are Jonah Weiss, mobile 415-555-0921, account PIN 2121. Your phone was stolen on
      2025-07-13. You want the line blocked and the charges made since then removed. The line
      is still active.
    tags: [computed, multi-record, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0921, first_name: Jonah, last_name: Weiss, email: jonah.weiss@example.net, mailing_address: "18 Pine Ave, Boston", date_of_birth: "1985-11-11", pin: "2121", status: active}]
          accounts: [{id: ACC-0921, customer_id: C-0921, billing_day: 1, payment_method: card, status: active, opened_on: "2022-02-02"}]
          lines: [{id: LN-0921, account_id: ACC-0921, mobile_number: "4155550921", plan_id: PL-30, status: active, activated_on: "2022-02-02"}]
          usage_records:
          - {id: UR-92101, line_id: LN-0921, day: "2025-07-11", kind: intl_call, quantity: 20, charge: 10}
          - {id: UR-92102, line_id: LN-0921, day: "2025-07-13", kind: premium_sms, quantity: 3, charge: 8.97}
          - {id: UR-92103, line_id: LN-0921, day: "2025-07-14", kind: intl_call, quantity: 30, charge: 15}
          - {id: UR-92104, line_id: LN-0921, day: "2025-07-14", kind: premium_sms, quantity: 2, charge: 5.98}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0921, full_name: Jonah Weiss, pin: "2121"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0921}}
          - {tool: suspend_line, parameters: {line_id: LN-0921, reason: stolen}}
          - {tool: get_line_usage, parameters: {line_id: LN-0921, since: "2025-07-01"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0921}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0921, amount: 29.95, category: fraud, reason: "Usage on stolen phone from 2025-07-13", line_id: LN-0921}}
    """
    fx = fx_of(x)
    verified(fx, "C-0921")
    assert field(fx, "lines", "LN-0921", "status") == "suspended", "the stolen phone's line was not suspended"
    assert field(fx, "lines", "LN-0921", "suspend_reason") == "stolen"
    adj = one_adjustment(fx, "ACC-0921", "credit", "fraud", 29.95, "usage from 2025-07-13: 8.97 + 15.00 + 5.98")
    only(fx, ["lines[LN-0921].status", "lines[LN-0921].suspended_on", "lines[LN-0921].suspend_reason",
              f"adjustments[{adj['id']}]"])


def test_stolen_usage_needs_escalation(x: TestContext, judge: Judge):
    """!
    query: >-
      I reported my phone stolen a few days ago. There are charges on it from after it went
      missing. I want them taken off.
    user_context: >-
      You are Elena Petrov, mobile 415-555-0922, account PIN 7878. Your phone went missing on
      2025-07-07; you reported it and the line was suspended on 2025-07-12. You want every charge
      since July 7 removed. If told part of the credit needs a supervisor, agree to have it
      requested.
    tags: [trap, pending-approval, computed, judge, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0922, first_name: Elena, last_name: Petrov, email: elena.petrov@example.net, mailing_address: "4 Quarry Rd, Portland", date_of_birth: "1991-01-31", pin: "7878", status: active}]
          accounts: [{id: ACC-0922, customer_id: C-0922, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2021-04-04"}]
          lines: [{id: LN-0922, account_id: ACC-0922, mobile_number: "4155550922", plan_id: PL-40, status: suspended, activated_on: "2021-04-04", suspended_on: "2025-07-12", suspend_reason: stolen}]
          usage_records:
          - {id: UR-92201, line_id: LN-0922, day: "2025-07-07", kind: intl_call, quantity: 40, charge: 20}
          - {id: UR-92202, line_id: LN-0922, day: "2025-07-09", kind: premium_sms, quantity: 5, charge: 14.95}
          - {id: UR-92203, line_id: LN-0922, day: "2025-07-10", kind: intl_call, quantity: 60, charge: 30}
          - {id: UR-92204, line_id: LN-0922, day: "2025-07-11", kind: premium_sms, quantity: 4, charge: 11.96}
          - {id: UR-92205, line_id: LN-0922, day: "2025-07-12", kind: intl_call, quantity: 10, charge: 5}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0922, full_name: Elena Petrov, pin: "7878"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0922}}
          - {tool: get_line_usage, parameters: {line_id: LN-0922, since: "2025-07-07"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0922}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0922}}
          - {tool: request_credit_escalation, parameters: {account_id: ACC-0922, amount: 61.91, reason: "Stolen phone usage 2025-07-09 to 2025-07-12 (3 days before suspension)"}}
        rubrics_yesno:
        - >-
          Does the assistant tell the customer that the credit needs a supervisor's approval and
          has been requested (pending review), without saying it has already been applied?
    """
    check_escalated(x, "C-0922", "ACC-0922", 61.91, "usage from 2025-07-09 (3 days before the 07-12 suspension): "
                    "14.95 + 30.00 + 11.96 + 5.00")
    ask_judge(x, judge)


def test_credit_with_approved_escalation(x: TestContext, judge: Judge):
    """!
    query: A supervisor called me back and said my roaming credit was approved. Can you put it on my account?
    user_context: >-
      You are Kira Novak, mobile 415-555-0923, account PIN 6464. You were told your credit for
      the roaming charges was approved. You want it applied.
    tags: [write, policy, multi-record, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0923, first_name: Kira, last_name: Novak, email: kira.novak@example.net, mailing_address: "27 Lakeview Dr, Seattle", date_of_birth: "1987-07-21", pin: "6464", status: active}]
          accounts: [{id: ACC-0923, customer_id: C-0923, billing_day: 8, payment_method: card, status: active, opened_on: "2022-10-10"}]
          lines: [{id: LN-0923, account_id: ACC-0923, mobile_number: "4155550923", plan_id: PL-40, status: active, activated_on: "2022-10-10"}]
          escalations:
          - {id: ES-0923, account_id: ACC-0923, amount: 55, reason: "Roaming charged while Global Roaming was active (June trip)", status: approved, requested_on: "2025-07-09", decided_by: SV-02, decided_on: "2025-07-10"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0923, full_name: Kira Novak, pin: "6464"}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0923}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0923, amount: 55, category: billing_error, reason: "Roaming billing error, approved escalation", escalation_id: ES-0923}}
    """
    fx = fx_of(x)
    verified(fx, "C-0923")
    adj = one_adjustment(fx, "ACC-0923", "credit", "billing_error", 55, "the approved escalation is for 55.00")
    assert adj["escalation_id"] == "ES-0923", "the credit must cite escalation ES-0923"
    assert field(fx, "escalations", "ES-0923", "status") == "used", "escalation ES-0923 was not used"
    only(fx, [f"adjustments[{adj['id']}]", "escalations[ES-0923].status"])


def test_escalation_denied_trap(x: TestContext, judge: Judge):
    """!
    query: I asked for a credit for all the dropped calls last month. It still isn't on my bill. Please just add it.
    user_context: >-
      You are Omar Haddad, mobile 415-555-0924, account PIN 1357. You want the 70 dollar credit
      for dropped calls added now. If told it was denied, ask once whether it can be asked for
      again, then accept the answer.
    tags: [trap, policy, judge, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0924, first_name: Omar, last_name: Haddad, email: omar.haddad@example.net, mailing_address: "50 Hillcrest Ct, Chicago", date_of_birth: "1979-04-14", pin: "1357", status: active}]
          accounts: [{id: ACC-0924, customer_id: C-0924, billing_day: 15, payment_method: bank_account, status: active, opened_on: "2018-12-12"}]
          lines: [{id: LN-0924, account_id: ACC-0924, mobile_number: "4155550924", plan_id: PL-50, status: active, activated_on: "2018-12-12"}]
          escalations:
          - {id: ES-0924, account_id: ACC-0924, amount: 70, reason: Goodwill for dropped calls, status: denied, requested_on: "2025-07-01", decided_by: SV-01, decided_on: "2025-07-03"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0924, full_name: Omar Haddad, pin: "1357"}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0924}}
        rubrics_yesno:
        - >-
          Does the assistant tell the customer that a supervisor denied the credit request and
          that it will not be requested again, without promising any other credit?
    """
    check_no_credit(x, "C-0924", "ACC-0924")
    ask_judge(x, judge)


def test_credit_30_day_cap(x: TestContext, judge: Judge):
    """!
    query: >-
      I had Global Roaming on for my trip but you still charged me roaming on some days. Please
      fix that.
    user_context: >-
      You are Dalia Mensah, mobile 415-555-0925, account PIN 2580. You had the Global Roaming
      add-on for your trip in early July and were charged roaming anyway. You want the wrong
      charges credited; if told it needs a supervisor, agree to have it requested.
    tags: [trap, pending-approval, computed, multi-record, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0925, first_name: Dalia, last_name: Mensah, email: dalia.mensah@example.net, mailing_address: "3 Wharf St, Seattle", date_of_birth: "1994-10-10", pin: "2580", status: active}]
          accounts: [{id: ACC-0925, customer_id: C-0925, billing_day: 1, payment_method: card, status: active, opened_on: "2023-01-01"}]
          lines: [{id: LN-0925, account_id: ACC-0925, mobile_number: "4155550925", plan_id: PL-30, status: active, activated_on: "2023-01-01"}]
          line_addons: [{id: LA-0925, line_id: LN-0925, addon_id: AD-01, started_on: "2025-07-03", ended_on: "2025-07-09"}]
          usage_records:
          - {id: UR-92501, line_id: LN-0925, day: "2025-07-02", kind: roaming_data, quantity: 100, charge: 25}
          - {id: UR-92502, line_id: LN-0925, day: "2025-07-04", kind: roaming_data, quantity: 40, charge: 10}
          - {id: UR-92503, line_id: LN-0925, day: "2025-07-06", kind: roaming_data, quantity: 34, charge: 8.5}
          - {id: UR-92504, line_id: LN-0925, day: "2025-07-10", kind: roaming_data, quantity: 60, charge: 15}
          adjustments:
          - {id: ADJ-09251, account_id: ACC-0925, line_id: LN-0925, kind: credit, category: goodwill, amount: 30, reason: Legacy courtesy credit, posted_on: "2025-06-10"}
          - {id: ADJ-09252, account_id: ACC-0925, line_id: LN-0925, kind: credit, category: fraud, amount: 35, reason: Premium SMS fraud, posted_on: "2025-06-20"}
          - {id: ADJ-09253, account_id: ACC-0925, line_id: LN-0925, kind: credit, category: plan_change, amount: 28, reason: Downgrade proration, posted_on: "2025-07-02"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0925, full_name: Dalia Mensah, pin: "2580"}}
          - {tool: get_line_usage, parameters: {line_id: LN-0925, since: "2025-07-01"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0925}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0925}}
          - {tool: request_credit_escalation, parameters: {account_id: ACC-0925, amount: 18.5, reason: "Roaming charged 07-04 and 07-06 while Global Roaming was active; 63.00 credited in the past 30 days"}}
    """
    check_escalated(x, "C-0925", "ACC-0925", 18.5, "roaming on 07-04 and 07-06 (10.00 + 8.50); 35 + 28 credited "
                    "since 06-15 makes 81.50 > 75")


def test_roaming_billing_error_credit(x: TestContext, judge: Judge):
    """!
    query: I paid for Global Roaming for my June trip and still got roaming charges. What's going on?
    user_context: >-
      You are Ben Adler, mobile 415-555-0926, account PIN 3141. You had Global Roaming for a trip
      in late June. You want any roaming charges that should not have been made credited.
    tags: [computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0926, first_name: Ben, last_name: Adler, email: ben.adler@example.net, mailing_address: "8 Ridge Rd, Portland", date_of_birth: "1983-06-06", pin: "3141", status: active}]
          accounts: [{id: ACC-0926, customer_id: C-0926, billing_day: 1, payment_method: card, status: active, opened_on: "2020-02-20"}]
          lines: [{id: LN-0926, account_id: ACC-0926, mobile_number: "4155550926", plan_id: PL-40, status: active, activated_on: "2020-02-20"}]
          line_addons: [{id: LA-0926, line_id: LN-0926, addon_id: AD-01, started_on: "2025-06-20", ended_on: "2025-06-27"}]
          usage_records:
          - {id: UR-92601, line_id: LN-0926, day: "2025-06-19", kind: roaming_data, quantity: 50, charge: 12.5}
          - {id: UR-92602, line_id: LN-0926, day: "2025-06-20", kind: roaming_data, quantity: 40, charge: 10}
          - {id: UR-92603, line_id: LN-0926, day: "2025-06-23", kind: roaming_data, quantity: 30, charge: 7.5}
          - {id: UR-92604, line_id: LN-0926, day: "2025-06-27", kind: roaming_data, quantity: 48, charge: 12}
          - {id: UR-92605, line_id: LN-0926, day: "2025-06-28", kind: roaming_data, quantity: 20, charge: 5}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0926, full_name: Ben Adler, pin: "3141"}}
          - {tool: get_line_usage, parameters: {line_id: LN-0926, since: "2025-06-01", until: "2025-06-30"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0926}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0926, amount: 29.5, category: billing_error, reason: "Roaming 06-20, 06-23, 06-27 during Global Roaming", line_id: LN-0926}}
    """
    fx = fx_of(x)
    verified(fx, "C-0926")
    adj = one_adjustment(fx, "ACC-0926", "credit", "billing_error", 29.5,
                         "roaming on 06-20, 06-23 and 06-27, inside 06-20..06-27: 10.00 + 7.50 + 12.00")
    only(fx, [f"adjustments[{adj['id']}]"])


def test_lost_phone_credit_window(x: TestContext, judge: Judge):
    """!
    query: My line was suspended after I lost my phone. Can you remove the charges made after I lost it?
    user_context: >-
      You are Fiona Walker, mobile 415-555-0927, account PIN 8642. You lost your phone on
      2025-07-01 but only reported it on 2025-07-10, when the line was suspended. You want the
      charges since July 1 removed; accept what the policy allows.
    tags: [computed, policy, write, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0927, first_name: Fiona, last_name: Walker, email: fiona.walker@example.net, mailing_address: "71 Elm Rd, Boston", date_of_birth: "1990-08-18", pin: "8642", status: active}]
          accounts: [{id: ACC-0927, customer_id: C-0927, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2021-06-06"}]
          lines: [{id: LN-0927, account_id: ACC-0927, mobile_number: "4155550927", plan_id: PL-20, status: suspended, activated_on: "2021-06-06", suspended_on: "2025-07-10", suspend_reason: lost}]
          usage_records:
          - {id: UR-92701, line_id: LN-0927, day: "2025-07-02", kind: intl_call, quantity: 20, charge: 10}
          - {id: UR-92702, line_id: LN-0927, day: "2025-07-05", kind: premium_sms, quantity: 2, charge: 5.98}
          - {id: UR-92703, line_id: LN-0927, day: "2025-07-07", kind: intl_call, quantity: 16, charge: 8}
          - {id: UR-92704, line_id: LN-0927, day: "2025-07-09", kind: premium_sms, quantity: 3, charge: 8.97}
          - {id: UR-92705, line_id: LN-0927, day: "2025-07-10", kind: intl_call, quantity: 12, charge: 6}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0927, full_name: Fiona Walker, pin: "8642"}}
          - {tool: get_billing_account, parameters: {account_id: ACC-0927}}
          - {tool: get_line_usage, parameters: {line_id: LN-0927, since: "2025-07-01"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0927}}
          - {tool: post_account_credit, parameters: {account_id: ACC-0927, amount: 22.97, category: fraud, reason: "Lost phone usage 07-07 to 07-10", line_id: LN-0927}}
    """
    fx = fx_of(x)
    verified(fx, "C-0927")
    adj = one_adjustment(fx, "ACC-0927", "credit", "fraud", 22.97,
                         "usage from 07-07 (3 days before the 07-10 suspension): 8.00 + 8.97 + 6.00")
    only(fx, [f"adjustments[{adj['id']}]"])


def test_goodwill_credit_trap(x: TestContext, judge: Judge):
    """!
    query: The coverage at my new apartment is terrible. I want a $20 credit for the trouble.
    user_context: >-
      You are Yusuf Tanaka, mobile 415-555-0928, account PIN 9753. You want a 20 dollar credit
      because of poor coverage at home. If refused, complain once, then accept.
    tags: [trap, policy, "difficulty:easy"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0928, first_name: Yusuf, last_name: Tanaka, email: yusuf.tanaka@example.net, mailing_address: "12 Sunset Blvd, Seattle", date_of_birth: "1996-05-25", pin: "9753", status: active}]
          accounts: [{id: ACC-0928, customer_id: C-0928, billing_day: 22, payment_method: card, status: active, opened_on: "2024-08-08"}]
          lines: [{id: LN-0928, account_id: ACC-0928, mobile_number: "4155550928", plan_id: PL-40, status: active, activated_on: "2024-08-08"}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0928, full_name: Yusuf Tanaka, pin: "9753"}}
          - {tool: search_billing_policy, parameters: {query: goodwill credit coverage complaint}}
    """
    check_no_credit(x, "C-0928", "ACC-0928")


def test_escalation_already_pending_trap(x: TestContext, judge: Judge):
    """!
    query: I was told last week my fraud credit would be sorted. Can you just put it on now?
    user_context: >-
      You are Ines Duarte, mobile 415-555-0929, account PIN 4826. You want the 45 dollar credit
      for the fraudulent texts applied now. If told it is still under review, accept that.
    tags: [trap, policy, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0929, first_name: Ines, last_name: Duarte, email: ines.duarte@example.net, mailing_address: "66 Oak St, Portland", date_of_birth: "1981-02-22", pin: "4826", status: active}]
          accounts: [{id: ACC-0929, customer_id: C-0929, billing_day: 8, payment_method: bank_account, status: active, opened_on: "2019-09-09"}]
          lines: [{id: LN-0929, account_id: ACC-0929, mobile_number: "4155550929", plan_id: PL-30, status: active, activated_on: "2019-09-09"}]
          escalations:
          - {id: ES-0929, account_id: ACC-0929, amount: 45, reason: Fraudulent premium texts after phone theft, status: pending, requested_on: "2025-07-08"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0929, full_name: Ines Duarte, pin: "4826"}}
          - {tool: list_credit_escalations, parameters: {account_id: ACC-0929}}
    """
    check_no_credit(x, "C-0929", "ACC-0929")


def test_roaming_after_pass_ended_trap(x: TestContext, judge: Judge):
    """!
    query: I had the roaming add-on for my trip, so why was I charged roaming? Take those charges off please.
    user_context: >-
      You are Abel Silva, mobile 415-555-0930, account PIN 1470. You had Global Roaming for your
      trip and think the roaming charges on July 8 and 9 are wrong. You did remove the add-on on
      July 7 but forgot. If told the charges stand, accept it.
    tags: [trap, computed, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0930, first_name: Abel, last_name: Silva, email: abel.silva@example.net, mailing_address: "23 River Rd, Seattle", date_of_birth: "1978-07-30", pin: "1470", status: active}]
          accounts: [{id: ACC-0930, customer_id: C-0930, billing_day: 1, payment_method: card, status: active, opened_on: "2020-10-01"}]
          lines: [{id: LN-0930, account_id: ACC-0930, mobile_number: "4155550930", plan_id: PL-40, status: active, activated_on: "2020-10-01"}]
          line_addons: [{id: LA-0930, line_id: LN-0930, addon_id: AD-01, started_on: "2025-07-01", ended_on: "2025-07-07"}]
          usage_records:
          - {id: UR-93001, line_id: LN-0930, day: "2025-07-08", kind: roaming_data, quantity: 80, charge: 20}
          - {id: UR-93002, line_id: LN-0930, day: "2025-07-09", kind: roaming_data, quantity: 40, charge: 10}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0930, full_name: Abel Silva, pin: "1470"}}
          - {tool: get_line_usage, parameters: {line_id: LN-0930, since: "2025-07-01"}}
    """
    check_no_credit(x, "C-0930", "ACC-0930")
