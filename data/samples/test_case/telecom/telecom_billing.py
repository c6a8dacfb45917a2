"""Telecom tasks: balances, payments and payment arrangements."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.telecom.checks import ask_judge, fx_of, new_one, none_new, only, verified

"""!
scenario: telecom_billing
tags: ["domain:telecom-billing", billing]
"""


def check_payment(x: TestContext, customer_id: str, account_id: str, amount: float, method: str, why: str) -> None:
    fx = fx_of(x)
    verified(fx, customer_id)
    pay = new_one(fx, "payments", f"payment on {account_id}", account_id=account_id)
    assert pay["amount"] == amount, f"{why}, paid {pay['amount']}"
    assert pay["method"] == method, f"the payment must use the {method} on file"
    only(fx, [f"payments[{pay['id']}]"])


def check_arrangement(x: TestContext, customer_id: str, account_id: str, total: float, installments: int,
                      first_due_on: str) -> None:
    fx = fx_of(x)
    verified(fx, customer_id)
    pa = new_one(fx, "payment_arrangements", f"arrangement on {account_id}", account_id=account_id)
    assert pa["total_amount"] == total, f"the arranged total must be the past-due amount {total:.2f}, got {pa['total_amount']}"
    assert pa["installments"] == installments, f"expected {installments} installments, got {pa['installments']}"
    assert pa["first_due_on"] == first_due_on, f"the first installment should be due {first_due_on}, got {pa['first_due_on']}"
    assert pa["status"] == "active"
    none_new(fx, "payments", account_id=account_id)
    only(fx, [f"payment_arrangements[{pa['id']}]"])


def test_pay_balance_with_adjustments(x: TestContext, judge: Judge):
    """!
    query: What's my balance right now? I want to pay all of it.
    user_context: >-
      You are Ahmed Karim, mobile 415-555-0911, account PIN 8012. Pay the whole current balance
      with the card on file; accept the amount the assistant states.
    tags: [lookup-then-write, computed, "difficulty:easy"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0911, first_name: Ahmed, last_name: Karim, email: ahmed.karim@example.net, mailing_address: "40 Pine Ave, Seattle", date_of_birth: "1982-05-05", pin: "8012", status: active}]
          accounts: [{id: ACC-0911, customer_id: C-0911, billing_day: 1, payment_method: card, status: active, opened_on: "2022-06-01"}]
          lines: [{id: LN-0911, account_id: ACC-0911, mobile_number: "4155550911", plan_id: PL-40, status: active, activated_on: "2022-06-01"}]
          bills:
          - {id: B-91101, account_id: ACC-0911, period_start: "2025-05-01", period_end: "2025-05-31", issued_on: "2025-06-01", due_on: "2025-06-22", plan_charges: 75, addon_charges: 25, usage_charges: 0, amount: 100}
          - {id: B-91102, account_id: ACC-0911, period_start: "2025-06-01", period_end: "2025-06-30", issued_on: "2025-07-01", due_on: "2025-07-22", plan_charges: 75, addon_charges: 25, usage_charges: 20, amount: 120}
          payments: [{id: PAY-91101, account_id: ACC-0911, paid_on: "2025-06-12", amount: 100, method: card, status: posted}]
          adjustments:
          - {id: ADJ-0911, account_id: ACC-0911, line_id: LN-0911, kind: charge, category: addon, amount: 9.68, reason: Hotspot Boost prorated, posted_on: "2025-07-10"}
          - {id: ADJ-0912, account_id: ACC-0911, line_id: LN-0911, kind: credit, category: billing_error, amount: 4.5, reason: Roaming during Global Roaming, posted_on: "2025-07-11"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0911, full_name: Ahmed Karim, pin: "8012"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0911}}
          - {tool: take_bill_payment, parameters: {account_id: ACC-0911, amount: 125.18, method: card}}
    """
    check_payment(x, "C-0911", "ACC-0911", 125.18, "card", "the balance is 125.18 (120 open + 9.68 charge - 4.50 credit)")


def test_overpayment_capped(x: TestContext, judge: Judge):
    """!
    query: I'd like to pay $100 today so I'm covered for next month too.
    user_context: >-
      You are Chloe Martin, mobile 415-555-0912, account PIN 3030. You want to pay 100 dollars
      from the bank account on file. If told you cannot pay more than you owe, pay exactly what
      you owe instead.
    tags: [policy, computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0912, first_name: Chloe, last_name: Martin, email: chloe.martin@example.net, mailing_address: "2 Elm Rd, Portland", date_of_birth: "1997-02-17", pin: "3030", status: active}]
          accounts: [{id: ACC-0912, customer_id: C-0912, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2024-01-15"}]
          lines: [{id: LN-0912, account_id: ACC-0912, mobile_number: "4155550912", plan_id: PL-20, status: active, activated_on: "2024-01-15"}]
          bills:
          - {id: B-91201, account_id: ACC-0912, period_start: "2025-06-01", period_end: "2025-06-30", issued_on: "2025-07-01", due_on: "2025-07-22", plan_charges: 45, addon_charges: 5, usage_charges: 11.25, amount: 61.25}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0912, full_name: Chloe Martin, pin: "3030"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0912}}
          - {tool: take_bill_payment, parameters: {account_id: ACC-0912, amount: 61.25, method: bank_account}}
    """
    check_payment(x, "C-0912", "ACC-0912", 61.25, "bank_account", "payments never exceed the balance of 61.25")


def test_arrangement_three_installments(x: TestContext, judge: Judge):
    """!
    query: I'm behind on my phone bill. Can I split what's overdue into three payments?
    user_context: >-
      You are Marco Ruiz, mobile 415-555-0913, account PIN 5151. You want the overdue amount
      split into three monthly installments, the first on 2025-07-25. You do not know the amount.
    tags: [computed, write, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0913, first_name: Marco, last_name: Ruiz, email: marco.ruiz@example.net, mailing_address: "77 River Rd, Chicago", date_of_birth: "1980-08-08", pin: "5151", status: active}]
          accounts: [{id: ACC-0913, customer_id: C-0913, billing_day: 1, payment_method: card, status: active, opened_on: "2021-09-01"}]
          lines: [{id: LN-0913, account_id: ACC-0913, mobile_number: "4155550913", plan_id: PL-30, status: active, activated_on: "2021-09-01"}]
          bills:
          - {id: B-91301, account_id: ACC-0913, period_start: "2025-04-01", period_end: "2025-04-30", issued_on: "2025-05-01", due_on: "2025-05-22", plan_charges: 60, addon_charges: 25, usage_charges: 25, amount: 110}
          - {id: B-91302, account_id: ACC-0913, period_start: "2025-05-01", period_end: "2025-05-31", issued_on: "2025-06-01", due_on: "2025-06-22", plan_charges: 60, addon_charges: 25, usage_charges: 20, amount: 105}
          - {id: B-91303, account_id: ACC-0913, period_start: "2025-06-01", period_end: "2025-06-30", issued_on: "2025-07-01", due_on: "2025-07-22", plan_charges: 60, addon_charges: 25, usage_charges: 13, amount: 98}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0913, full_name: Marco Ruiz, pin: "5151"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0913}}
          - {tool: list_payment_arrangements, parameters: {account_id: ACC-0913}}
          - {tool: create_payment_arrangement, parameters: {account_id: ACC-0913, total_amount: 215, installments: 3, first_due_on: "2025-07-25"}}
    """
    check_arrangement(x, "C-0913", "ACC-0913", 215, 3, "2025-07-25")


def test_arrangement_limits_offered(x: TestContext, judge: Judge):
    """!
    query: >-
      Money is tight. Could I pay my overdue balance in six monthly payments, starting
      August 15?
    user_context: >-
      You are Leila Haddad, mobile 415-555-0915, account PIN 4004. You want six installments
      starting 2025-08-15. If told the limits, accept the most installments allowed with the
      latest first due date allowed.
    tags: [computed, policy, write, "difficulty:hard"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0915, first_name: Leila, last_name: Haddad, email: leila.haddad@example.net, mailing_address: "9 Birch Ln, Seattle", date_of_birth: "1992-12-01", pin: "4004", status: active}]
          accounts: [{id: ACC-0915, customer_id: C-0915, billing_day: 1, payment_method: bank_account, status: active, opened_on: "2020-07-07"}]
          lines: [{id: LN-0915, account_id: ACC-0915, mobile_number: "4155550915", plan_id: PL-50, status: active, activated_on: "2020-07-07"}]
          bills:
          - {id: B-91501, account_id: ACC-0915, period_start: "2025-05-01", period_end: "2025-05-31", issued_on: "2025-06-01", due_on: "2025-06-22", plan_charges: 90, addon_charges: 0, usage_charges: 90, amount: 180}
          - {id: B-91502, account_id: ACC-0915, period_start: "2025-06-01", period_end: "2025-06-30", issued_on: "2025-07-01", due_on: "2025-07-22", plan_charges: 90, addon_charges: 0, usage_charges: 0, amount: 90}
          payment_arrangements:
          - {id: PA-0915, account_id: ACC-0915, total_amount: 150, installments: 2, installment_amount: 75, first_due_on: "2024-03-10", created_on: "2024-03-01", status: broken}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0915, full_name: Leila Haddad, pin: "4004"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0915}}
          - {tool: list_payment_arrangements, parameters: {account_id: ACC-0915}}
          - {tool: create_payment_arrangement, parameters: {account_id: ACC-0915, total_amount: 180, installments: 3, first_due_on: "2025-07-29"}}
    """
    check_arrangement(x, "C-0915", "ACC-0915", 180, 3, "2025-07-29")


def test_arrangement_broken_recently_trap(x: TestContext, judge: Judge):
    """!
    query: Can I set up a payment plan for my overdue phone bill?
    user_context: >-
      You are Victor Lima, mobile 415-555-0914, account PIN
      1212. You want a payment plan of two installments for what is overdue. If refused, ask once
      why, then accept.
    tags: [trap, policy, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0914, first_name: Victor, last_name: Lima, email: victor.lima@example.net, mailing_address: "31 Oak St, Boston", date_of_birth: "1977-03-03", pin: "1212", status: active}]
          accounts: [{id: ACC-0914, customer_id: C-0914, billing_day: 1, payment_method: card, status: active, opened_on: "2019-05-05"}]
          lines: [{id: LN-0914, account_id: ACC-0914, mobile_number: "4155550914", plan_id: PL-40, status: active, activated_on: "2019-05-05"}]
          bills:
          - {id: B-91401, account_id: ACC-0914, period_start: "2025-05-01", period_end: "2025-05-31", issued_on: "2025-06-01", due_on: "2025-06-22", plan_charges: 75, addon_charges: 0, usage_charges: 45, amount: 120}
          payment_arrangements:
          - {id: PA-0914, account_id: ACC-0914, total_amount: 200, installments: 2, installment_amount: 100, first_due_on: "2025-01-20", created_on: "2025-01-10", status: broken}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0914, full_name: Victor Lima, pin: "1212"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0914}}
          - {tool: list_payment_arrangements, parameters: {account_id: ACC-0914}}
    """
    fx = fx_of(x)
    verified(fx, "C-0914")
    none_new(fx, "payment_arrangements", account_id="ACC-0914")
    only(fx)


def test_bill_increase_explained(x: TestContext, judge: Judge):
    """!
    query: Why is my June bill so much higher than May's?
    user_context: >-
      You are Sofia Brandt, mobile 415-555-0916, account PIN 9090. You want to know why the bill
      went up. You do not want anything changed.
    tags: [lookup, judge, "difficulty:medium"]
    init:
      telecom:
        data_patch:
          customers: [{id: C-0916, first_name: Sofia, last_name: Brandt, email: sofia.brandt@example.net, mailing_address: "6 Sunset Blvd, Chicago", date_of_birth: "1989-09-19", pin: "9090", status: active}]
          accounts: [{id: ACC-0916, customer_id: C-0916, billing_day: 1, payment_method: card, status: active, opened_on: "2023-03-03"}]
          lines: [{id: LN-0916, account_id: ACC-0916, mobile_number: "4155550916", plan_id: PL-20, status: active, activated_on: "2023-03-03"}]
          bills:
          - {id: B-91601, account_id: ACC-0916, period_start: "2025-05-01", period_end: "2025-05-31", issued_on: "2025-06-01", due_on: "2025-06-22", plan_charges: 45, addon_charges: 0, usage_charges: 0, amount: 45}
          - {id: B-91602, account_id: ACC-0916, period_start: "2025-06-01", period_end: "2025-06-30", issued_on: "2025-07-01", due_on: "2025-07-22", plan_charges: 45, addon_charges: 0, usage_charges: 42.75, amount: 87.75}
          payments: [{id: PAY-91601, account_id: ACC-0916, paid_on: "2025-06-10", amount: 45, method: card, status: posted}]
          usage_records:
          - {id: UR-91601, line_id: LN-0916, day: "2025-06-09", kind: intl_call, quantity: 35, charge: 17.5}
          - {id: UR-91602, line_id: LN-0916, day: "2025-06-16", kind: intl_call, quantity: 50.5, charge: 25.25}
        golden_test_case:
          tool_interactions:
          - {tool: verify_account_holder, parameters: {mobile_number: 415-555-0916, full_name: Sofia Brandt, pin: "9090"}}
          - {tool: list_account_bills, parameters: {account_id: ACC-0916}}
          - {tool: get_line_usage, parameters: {line_id: LN-0916, since: "2025-06-01", until: "2025-06-30"}}
        rubrics_yesno:
        - >-
          Does the assistant explain that the June bill is higher because of about $42.75 of
          international call charges (calls on June 9 and June 16), which the May bill did not have?
    """
    fx = fx_of(x)
    verified(fx, "C-0916")
    only(fx)
    ask_judge(x, judge)
