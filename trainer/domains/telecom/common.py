"""What the telecom tools share: argument schemas, money, the billing cycle, the balance and bill status."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import ID, Session, ToolError, now_stamp, parse_date  # noqa: F401  (re-exported to the tools)
from trainer.domains.telecom.seed import cycle_of

MONEY = {"type": "number", "exclusiveMinimum": 0, "maximum": 100000}
DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
ACCOUNT_ID = {**ID, "description": "Billing account id, e.g. ACC-0042."}
CUSTOMER_ID = {**ID, "description": "Customer id, e.g. C-0042."}
LINE_ID = {**ID, "description": "Line id, e.g. LN-0042."}
NUMBER = {"type": "string", "pattern": r"^[0-9+()\-. ]{10,20}$", "description": "Mobile number, e.g. 415-555-0901."}


def cents(x: float) -> float:
    return round(float(x) + 0.0, 2)


def digits(number: str) -> str:
    """A mobile number as its ten digits (a leading country code 1 dropped)."""
    d = "".join(c for c in number if c.isdigit())
    return d[1:] if len(d) == 11 and d.startswith("1") else d


def account(db: Session, account_id: str) -> dict[str, Any]:
    return db.require("accounts", account_id, "account")


def line(db: Session, line_id: str) -> dict[str, Any]:
    return db.require("lines", line_id, "line")


def current_cycle(db: Session, acc: dict[str, Any]) -> dict[str, Any]:
    """The account's billing cycle containing today, its length and the days left (today included)."""
    start, end = cycle_of(acc["billing_day"], db.today)
    return {"start": start.isoformat(), "end": end.isoformat(), "days": (end - start).days + 1,
            "remaining_days_including_today": (end - db.today).days + 1}


def _sum(db: Session, sql: str, params: tuple[Any, ...]) -> float:
    row = db.one(sql, params)
    return cents(row["s"] if row and row["s"] is not None else 0)


def balance(db: Session, account_id: str) -> float:
    """Bills + posted charges − posted payments − credits."""
    bills = _sum(db, "SELECT SUM(amount) AS s FROM bills WHERE account_id = ?", (account_id,))
    charges = _sum(db, "SELECT SUM(amount) AS s FROM adjustments WHERE account_id = ? AND kind = 'charge'", (account_id,))
    credits = _sum(db, "SELECT SUM(amount) AS s FROM adjustments WHERE account_id = ? AND kind = 'credit'", (account_id,))
    paid = _sum(db, "SELECT SUM(amount) AS s FROM payments WHERE account_id = ? AND status = 'posted'", (account_id,))
    return cents(bills + charges - credits - paid)


def bills_with_status(db: Session, account_id: str) -> list[dict[str, Any]]:
    """The account's bills, oldest first, each with `owed` and `status` (paid / open / past_due):
    posted payments and credits settle the oldest bills first."""
    settled = _sum(db, "SELECT SUM(amount) AS s FROM payments WHERE account_id = ? AND status = 'posted'", (account_id,))
    settled += _sum(db, "SELECT SUM(amount) AS s FROM adjustments WHERE account_id = ? AND kind = 'credit'", (account_id,))
    out = []
    for b in db.all("SELECT * FROM bills WHERE account_id = ? ORDER BY issued_on, id", (account_id,)):
        covered = min(settled, b["amount"])
        settled = cents(settled - covered)
        owed = cents(b["amount"] - covered)
        status = "paid" if owed <= 0 else ("past_due" if b["due_on"] < db.today.isoformat() else "open")
        out.append({**b, "owed": owed, "status": status})
    return out


def past_due(db: Session, account_id: str) -> float:
    return cents(sum(b["owed"] for b in bills_with_status(db, account_id) if b["status"] == "past_due"))
