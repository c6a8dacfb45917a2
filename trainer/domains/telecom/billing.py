"""Account-facing billing tools: identity, profile, bills, payments, credits and charges, escalations,
payment arrangements, notes."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import ID, Session, ToolError
from trainer.domains.telecom.common import (
    ACCOUNT_ID, CUSTOMER_ID, DATE, LINE_ID, MONEY, NUMBER, account, balance, bills_with_status, cents,
    current_cycle, digits, now_stamp, parse_date, past_due,
)
from trainer.domains.telecom.domain import DOMAIN

CATEGORY = {"type": "string", "enum": ["plan_change", "addon", "billing_error", "fraud", "goodwill"]}
REASON = {"type": "string", "minLength": 1, "maxLength": 500}


def _full_name(c: dict[str, Any]) -> str:
    return f"{c['first_name']} {c['last_name']}"


def _customer(db: Session, customer_id: str) -> dict[str, Any]:
    return db.require("customers", customer_id, "customer")


# ---------------------------------------------------------------------------- identity and profile

@DOMAIN.tool("Verify a caller as an account holder: a mobile number on the account, the holder's full name "
             "and the four-digit account PIN must all match. Every attempt is logged.",
             params={"mobile_number": NUMBER,
                     "full_name": {**ID, "description": "First and last name as the caller gives it."},
                     "pin": {"type": "string", "pattern": r"^\d{4}$", "description": "Four-digit account PIN."}})
def verify_account_holder(db: Session, mobile_number: str, full_name: str, pin: str) -> dict[str, Any]:
    row = db.one("SELECT c.*, a.id AS account_id FROM lines l JOIN accounts a ON a.id = l.account_id "
                 "JOIN customers c ON c.id = a.customer_id WHERE l.mobile_number = ? AND l.status != 'ported_out'",
                 (digits(mobile_number),))
    if row is None:
        raise ToolError("no account has that mobile number")
    ok = " ".join(full_name.lower().split()) == _full_name(row).lower() and pin == row["pin"]
    db.insert("identity_checks", {"id": db.next_id("identity_checks", "IC-"), "customer_id": row["id"],
                                  "result": "passed" if ok else "failed", "checked_at": now_stamp(db)})
    if not ok:
        return {"verified": False}
    return {"verified": True, "customer_id": row["id"], "account_id": row["account_id"], "name": _full_name(row)}


@DOMAIN.tool("A customer's profile: name, email, mailing address, status.", params={"customer_id": CUSTOMER_ID})
def get_subscriber(db: Session, customer_id: str) -> dict[str, Any]:
    c = _customer(db, customer_id)
    return {k: v for k, v in c.items() if k not in ("pin", "date_of_birth")}


@DOMAIN.tool("Update a customer's email and/or mailing address (give at least one).",
             params={"customer_id": CUSTOMER_ID,
                     "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "description": "New email."},
                     "mailing_address": {"type": "string", "minLength": 5, "description": "New mailing address."}},
             required=["customer_id"])
def update_subscriber_contact(db: Session, customer_id: str, email: str | None = None,
                              mailing_address: str | None = None) -> dict[str, Any]:
    _customer(db, customer_id)
    fields = {k: v.strip() for k, v in (("email", email), ("mailing_address", mailing_address)) if v is not None}
    if not fields:
        raise ToolError("give at least one of email, mailing_address")
    if "email" in fields and db.one("SELECT id FROM customers WHERE lower(email) = lower(?) AND id != ?",
                                    (fields["email"], customer_id)):
        raise ToolError("that email address is already in use")
    db.update("customers", customer_id, **fields)
    return get_subscriber(db, customer_id)


@DOMAIN.tool("A customer's billing accounts with status, billing day and number of lines.",
             params={"customer_id": CUSTOMER_ID})
def list_subscriber_accounts(db: Session, customer_id: str) -> dict[str, Any]:
    _customer(db, customer_id)
    return {"accounts": db.all(
        "SELECT a.*, (SELECT COUNT(*) FROM lines l WHERE l.account_id = a.id AND l.status != 'ported_out') AS lines "
        "FROM accounts a WHERE a.customer_id = ? ORDER BY a.id", (customer_id,))}


@DOMAIN.tool("One billing account in full: status, payment method on file, current cycle (start, end, days, "
             "remaining days), balance, and its lines with plan and active add-ons.",
             params={"account_id": ACCOUNT_ID})
def get_billing_account(db: Session, account_id: str) -> dict[str, Any]:
    acc = account(db, account_id)
    lines = db.all("SELECT l.*, p.name AS plan_name, p.monthly_fee AS plan_fee, p.hotspot AS plan_hotspot "
                   "FROM lines l JOIN plans p ON p.id = l.plan_id WHERE l.account_id = ? ORDER BY l.id", (account_id,))
    for ln in lines:
        ln["addons"] = db.all("SELECT la.id, la.addon_id, ad.name, ad.monthly_fee, la.started_on FROM line_addons la "
                              "JOIN addons ad ON ad.id = la.addon_id WHERE la.line_id = ? AND la.ended_on IS NULL "
                              "ORDER BY la.id", (ln["id"],))
    return {"account": acc, "current_cycle": current_cycle(db, acc), "balance": balance(db, account_id),
            "lines": lines}


@DOMAIN.tool("Add a short note to an account.",
             params={"account_id": ACCOUNT_ID, "text": {"type": "string", "minLength": 1, "maxLength": 500}})
def add_account_note(db: Session, account_id: str, text: str) -> dict[str, Any]:
    account(db, account_id)
    return db.insert("account_notes", {"id": db.next_id("account_notes", "AN-"), "account_id": account_id,
                                       "text": text, "created_at": now_stamp(db)})


# ---------------------------------------------------------------------------- bills and payments

@DOMAIN.tool("An account's bills, oldest first, with what is still owed and the status of each (paid, open, "
             "past_due), the balance, the past-due amount, payments and credits/charges.",
             params={"account_id": ACCOUNT_ID})
def list_account_bills(db: Session, account_id: str) -> dict[str, Any]:
    account(db, account_id)
    return {"account_id": account_id, "balance": balance(db, account_id), "past_due": past_due(db, account_id),
            "bills": bills_with_status(db, account_id),
            "payments": db.all("SELECT * FROM payments WHERE account_id = ? ORDER BY paid_on, id", (account_id,)),
            "adjustments": db.all("SELECT * FROM adjustments WHERE account_id = ? ORDER BY posted_on, id", (account_id,))}


@DOMAIN.tool("Take a payment on an account with the payment method on file.",
             params={"account_id": ACCOUNT_ID, "amount": MONEY,
                     "method": {"type": "string", "enum": ["card", "bank_account"], "description": "Must be the method on file."}})
def take_bill_payment(db: Session, account_id: str, amount: float, method: str) -> dict[str, Any]:
    acc = account(db, account_id)
    if acc["payment_method"] != method:
        on_file = acc["payment_method"]
        raise ToolError(f"no {method} on file for this account" + (f" (on file: {on_file})" if on_file else ""))
    pay = db.insert("payments", {"id": db.next_id("payments", "PAY-", 5), "account_id": account_id,
                                 "paid_on": db.today.isoformat(), "amount": cents(amount), "method": method,
                                 "status": "posted"})
    return {"payment": pay, "balance": balance(db, account_id)}


# ---------------------------------------------------------------------------- credits, charges, escalations

def _adjust(db: Session, account_id: str, kind: str, amount: float, category: str, reason: str,
            line_id: str | None, escalation_id: str | None = None) -> dict[str, Any]:
    account(db, account_id)
    if line_id is not None:
        ln = db.require("lines", line_id, "line")
        if ln["account_id"] != account_id:
            raise ToolError(f"line {line_id} is not on account {account_id}")
    adj = db.insert("adjustments", {"id": db.next_id("adjustments", "ADJ-"), "account_id": account_id,
                                    "line_id": line_id, "kind": kind, "category": category, "amount": cents(amount),
                                    "reason": reason, "posted_on": db.today.isoformat(), "escalation_id": escalation_id})
    return {"adjustment": adj, "balance": balance(db, account_id)}


@DOMAIN.tool("Post a credit to an account (lowers the balance). Pass escalation_id when a supervisor "
             "escalation is required.",
             params={"account_id": ACCOUNT_ID, "amount": MONEY, "category": CATEGORY, "reason": REASON,
                     "line_id": {**LINE_ID, "description": "The line the credit is about, if any."},
                     "escalation_id": {**ID, "description": "An approved escalation, e.g. ES-0042."}},
             required=["account_id", "amount", "category", "reason"])
def post_account_credit(db: Session, account_id: str, amount: float, category: str, reason: str,
                        line_id: str | None = None, escalation_id: str | None = None) -> dict[str, Any]:
    if escalation_id is not None:
        es = db.require("escalations", escalation_id, "escalation")
        if es["account_id"] != account_id:
            raise ToolError(f"escalation {escalation_id} is not for account {account_id}")
        if es["status"] != "approved":
            raise ToolError(f"escalation {escalation_id} is {es['status']}, not approved")
        if cents(amount) > es["amount"]:
            raise ToolError(f"escalation {escalation_id} covers at most {es['amount']:.2f}")
        db.update("escalations", escalation_id, status="used")
    return _adjust(db, account_id, "credit", amount, category, reason, line_id, escalation_id)


@DOMAIN.tool("Post a charge to an account (raises the balance; it appears on the next bill).",
             params={"account_id": ACCOUNT_ID, "amount": MONEY,
                     "category": {"type": "string", "enum": ["plan_change", "addon"]}, "reason": REASON,
                     "line_id": {**LINE_ID, "description": "The line the charge is about, if any."}},
             required=["account_id", "amount", "category", "reason"])
def post_account_charge(db: Session, account_id: str, amount: float, category: str, reason: str,
                        line_id: str | None = None) -> dict[str, Any]:
    return _adjust(db, account_id, "charge", amount, category, reason, line_id)


@DOMAIN.tool("Ask a supervisor to approve a credit above your limit; creates a pending escalation.",
             params={"account_id": ACCOUNT_ID, "amount": MONEY, "reason": REASON})
def request_credit_escalation(db: Session, account_id: str, amount: float, reason: str) -> dict[str, Any]:
    account(db, account_id)
    pending = db.one("SELECT id FROM escalations WHERE account_id = ? AND status = 'pending'", (account_id,))
    if pending:
        raise ToolError(f"an escalation for account {account_id} is already pending ({pending['id']})")
    return db.insert("escalations", {"id": db.next_id("escalations", "ES-"), "account_id": account_id,
                                     "amount": cents(amount), "reason": reason, "status": "pending",
                                     "requested_on": db.today.isoformat(), "decided_by": None, "decided_on": None})


@DOMAIN.tool("An account's credit escalations with their status.", params={"account_id": ACCOUNT_ID})
def list_credit_escalations(db: Session, account_id: str) -> dict[str, Any]:
    account(db, account_id)
    return {"escalations": db.all("SELECT * FROM escalations WHERE account_id = ? ORDER BY requested_on, id",
                                  (account_id,))}


# ---------------------------------------------------------------------------- payment arrangements

@DOMAIN.tool("Split an amount owed into monthly installments (the installment amount is total ÷ installments, "
             "rounded to the cent; later installments fall on the same day of each following month).",
             params={"account_id": ACCOUNT_ID, "total_amount": MONEY,
                     "installments": {"type": "integer", "minimum": 1, "maximum": 12},
                     "first_due_on": {**DATE, "description": "Due date of the first installment."}})
def create_payment_arrangement(db: Session, account_id: str, total_amount: float, installments: int,
                               first_due_on: str) -> dict[str, Any]:
    account(db, account_id)
    if parse_date(first_due_on, "first_due_on") <= db.today:
        raise ToolError("the first installment must be due after today")
    active = db.one("SELECT id FROM payment_arrangements WHERE account_id = ? AND status = 'active'", (account_id,))
    if active:
        raise ToolError(f"account {account_id} already has an active arrangement ({active['id']})")
    return db.insert("payment_arrangements", {
        "id": db.next_id("payment_arrangements", "PA-"), "account_id": account_id, "total_amount": cents(total_amount),
        "installments": installments, "installment_amount": cents(total_amount / installments),
        "first_due_on": first_due_on, "created_on": db.today.isoformat(), "status": "active"})


@DOMAIN.tool("An account's payment arrangements (active, completed, broken).", params={"account_id": ACCOUNT_ID})
def list_payment_arrangements(db: Session, account_id: str) -> dict[str, Any]:
    account(db, account_id)
    return {"arrangements": db.all("SELECT * FROM payment_arrangements WHERE account_id = ? ORDER BY created_on, id",
                                   (account_id,))}
