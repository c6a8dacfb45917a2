"""What the property tools share: argument schemas, the clock, money, lease and tenant look-ups, the balance."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import ID, Session, ToolError, now_stamp, parse_date  # noqa: F401  (re-exported to the tools)
from trainer.domains.property.seed import SLA_HOURS, plus_hours

MONEY = {"type": "number", "exclusiveMinimum": 0, "maximum": 100000}
DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
PHONE = {"type": "string", "pattern": r"^[0-9+()\- ]{7,20}$"}
UNIT_ID = {**ID, "description": "Unit id, e.g. U-0042."}
VENDOR_ID = {**ID, "description": "Vendor id, e.g. V-101."}
PROPERTY_ID = {**ID, "description": "Property id, e.g. P-01."}
TRADES = ["plumbing", "electrical", "hvac", "appliance", "general", "pest", "locksmith"]
PRIORITIES = list(SLA_HOURS)
CHARGES = ("rent", "late_fee", "utility", "pet_rent", "damage")
CREDITS = ("payment", "concession", "deposit_applied")


def due_by(db: Session, priority: str) -> str:
    """Now plus the priority's SLA."""
    return plus_hours(now_stamp(db), SLA_HOURS[priority])


def cents(x: float) -> float:
    return round(float(x) + 0.0, 2)


def _marks(kinds: tuple[str, ...]) -> str:
    return ", ".join("?" * len(kinds))


def balance(db: Session, lease_id: str) -> float:
    """Posted charges minus posted credits (waived charges and returned payments do not count)."""
    row = db.one(
        f"SELECT COALESCE(SUM(CASE WHEN kind IN ({_marks(CHARGES)}) THEN amount "
        f"WHEN kind IN ({_marks(CREDITS)}) THEN -amount ELSE 0 END), 0) AS b "
        "FROM ledger_entries WHERE lease_id = ? AND status = 'posted'", (*CHARGES, *CREDITS, lease_id))
    return cents(row["b"] if row else 0)


def lease(db: Session, lease_id: str) -> dict[str, Any]:
    return db.require("leases", lease_id, "lease")


def tenant(db: Session, tenant_id: str) -> dict[str, Any]:
    return db.require("tenants", tenant_id, "tenant")


