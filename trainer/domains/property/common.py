"""What the property tools share: argument schemas, the clock, money and the lease balance."""

from __future__ import annotations

from datetime import date
from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.property.seed import SLA_HOURS, plus_hours

ID = {"type": "string", "minLength": 1}
MONEY = {"type": "number", "exclusiveMinimum": 0, "maximum": 100000}
DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
TRADES = ["plumbing", "electrical", "hvac", "appliance", "general", "pest", "locksmith"]
PRIORITIES = list(SLA_HOURS)
CHARGES = ("rent", "late_fee", "utility", "pet_rent", "damage")
CREDITS = ("payment", "concession", "deposit_applied")


def today(db: Session) -> date:
    return date.fromisoformat(db.now[:10])


def now_stamp(db: Session) -> str:
    """The clock as YYYY-MM-DDTHH:MM:SSZ."""
    return db.now[:19] + "Z"


def due_by(db: Session, priority: str) -> str:
    """Now plus the priority's SLA."""
    return plus_hours(now_stamp(db), SLA_HOURS[priority])


def cents(x: float) -> float:
    return round(float(x) + 0.0, 2)


def balance(db: Session, lease_id: str) -> float:
    """Posted charges minus posted credits (waived charges and returned payments do not count)."""
    row = db.one(
        "SELECT COALESCE(SUM(CASE WHEN kind IN (?, ?, ?, ?, ?) THEN amount ELSE -amount END), 0) AS b "
        "FROM ledger_entries WHERE lease_id = ? AND status = 'posted'", (*CHARGES, lease_id))
    return cents(row["b"] if row else 0)


def lease(db: Session, lease_id: str) -> dict[str, Any]:
    return db.require("leases", lease_id, "lease")


def parse_date(text: str, what: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{what} must be a real date YYYY-MM-DD, got {text!r}") from None
