"""Tenant-facing account tools: identity, contact details, leases, ledger, concessions, deposits, pets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.property.common import (
    DATE, ID, MONEY, PHONE, balance, cents, lease, now_stamp, parse_date, tenant,
)
from trainer.domains.property.domain import DOMAIN
from trainer.domains.property.seed import add_months

LEASE_ID = {**ID, "description": "Lease id, e.g. L-0042."}
TENANT_ID = {**ID, "description": "Tenant id, e.g. T-0042."}


def _full_name(t: dict[str, Any]) -> str:
    return f"{t['first_name']} {t['last_name']}"


def _post(db: Session, lease_id: str, kind: str, amount: float, *, method: str | None = None, memo: str = "",
          ref_id: str | None = None) -> dict[str, Any]:
    """Post a ledger entry dated today; the entry and the lease's new balance."""
    entry = db.insert("ledger_entries", {"id": db.next_id("ledger_entries", "E-", 5), "lease_id": lease_id,
                                         "posted_on": db.today.isoformat(), "kind": kind, "amount": cents(amount),
                                         "status": "posted", "method": method, "memo": memo, "ref_id": ref_id})
    return {"entry": entry, "balance": balance(db, lease_id)}


# ---------------------------------------------------------------------------- identity and contact

@DOMAIN.tool("Verify a caller as a tenant: the email on file, full name and date of birth must all match. "
             "Every attempt is logged.",
             params={"email": {**ID, "description": "Email address on file."},
                     "full_name": {**ID, "description": "First and last name as the caller gives it."},
                     "date_of_birth": {**DATE, "description": "YYYY-MM-DD."}})
def verify_tenant_identity(db: Session, email: str, full_name: str, date_of_birth: str) -> dict[str, Any]:
    t = db.one("SELECT * FROM tenants WHERE lower(email) = lower(?)", (email.strip(),))
    if t is None:
        raise ToolError("no tenant has that email address on file")
    ok = " ".join(full_name.lower().split()) == _full_name(t).lower() and date_of_birth == t["date_of_birth"]
    db.insert("identity_checks", {"id": db.next_id("identity_checks", "IC-"), "tenant_id": t["id"],
                                  "result": "passed" if ok else "failed", "checked_at": now_stamp(db)})
    return {"verified": True, "tenant_id": t["id"], "name": _full_name(t)} if ok else {"verified": False}


@DOMAIN.tool("A tenant's profile: name, contact details, forwarding address, payment method on file, status.",
             params={"tenant_id": TENANT_ID})
def get_tenant(db: Session, tenant_id: str) -> dict[str, Any]:
    t = tenant(db, tenant_id)
    return {k: v for k, v in t.items() if k != "date_of_birth"}


@DOMAIN.tool("Update a tenant's phone, email and/or forwarding address (give at least one).",
             params={"tenant_id": TENANT_ID,
                     "phone": {**PHONE, "description": "New phone."},
                     "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "description": "New email."},
                     "forwarding_address": {"type": "string", "minLength": 5, "description": "Mailing address after move-out."}},
             required=["tenant_id"])
def update_tenant_contact(db: Session, tenant_id: str, phone: str | None = None, email: str | None = None,
                          forwarding_address: str | None = None) -> dict[str, Any]:
    tenant(db, tenant_id)
    fields = {k: v.strip() for k, v in (("phone", phone), ("email", email),
                                        ("forwarding_address", forwarding_address)) if v is not None}
    if not fields:
        raise ToolError("give at least one of phone, email, forwarding_address")
    if "email" in fields:
        other = db.one("SELECT id FROM tenants WHERE lower(email) = lower(?) AND id != ?", (fields["email"], tenant_id))
        if other:
            raise ToolError("that email address is already in use")
    return get_tenant(db, db.update("tenants", tenant_id, **fields)["id"])


@DOMAIN.tool("Add a short note to a tenant's account.",
             params={"tenant_id": TENANT_ID, "text": {"type": "string", "minLength": 1, "maxLength": 500}})
def add_note(db: Session, tenant_id: str, text: str) -> dict[str, Any]:
    tenant(db, tenant_id)
    return db.insert("notes", {"id": db.next_id("notes", "N-"), "tenant_id": tenant_id, "text": text,
                               "created_at": now_stamp(db)})


# ---------------------------------------------------------------------------- leases

@DOMAIN.tool("List a tenant's leases (all statuses) with unit and property.",
             params={"tenant_id": TENANT_ID})
def list_leases(db: Session, tenant_id: str) -> dict[str, Any]:
    tenant(db, tenant_id)
    return {"leases": db.all(
        "SELECT l.id, l.status, l.start_date, l.end_date, l.monthly_rent, l.unit_id, u.number AS unit_number, "
        "p.id AS property_id, p.name AS property_name FROM leases l JOIN units u ON u.id = l.unit_id "
        "JOIN properties p ON p.id = u.property_id WHERE l.tenant_id = ? ORDER BY l.start_date, l.id", (tenant_id,))}


@DOMAIN.tool("One lease in full: terms, notice, unit, property (renewal %, pet policy) and pets.",
             params={"lease_id": LEASE_ID})
def get_lease(db: Session, lease_id: str) -> dict[str, Any]:
    le = lease(db, lease_id)
    unit = db.require("units", le["unit_id"], "unit")
    return {"lease": le, "unit": unit, "property": db.require("properties", unit["property_id"], "property"),
            "pets": db.all("SELECT * FROM pets WHERE lease_id = ? ORDER BY id", (lease_id,))}


@DOMAIN.tool("Record a tenant's notice to vacate: sets the move-out date and puts the lease and unit on notice.",
             params={"lease_id": LEASE_ID, "move_out_date": {**DATE, "description": "Last day in the unit."}})
def record_move_out_notice(db: Session, lease_id: str, move_out_date: str) -> dict[str, Any]:
    le = lease(db, lease_id)
    if le["status"] != "active":
        raise ToolError(f"lease {lease_id} is {le['status']}; notice can be given only on an active lease")
    if parse_date(move_out_date, "move_out_date") <= db.today:
        raise ToolError("the move-out date must be in the future")
    db.update("units", le["unit_id"], status="notice")
    return db.update("leases", lease_id, status="notice", notice_given_on=db.today.isoformat(),
                     move_out_date=move_out_date)


@DOMAIN.tool("Renew a lease for 12 months starting the day after it ends, at the given monthly rent. "
             "Creates the new (upcoming) lease.",
             params={"lease_id": LEASE_ID, "new_monthly_rent": MONEY})
def renew_lease(db: Session, lease_id: str, new_monthly_rent: float) -> dict[str, Any]:
    le = lease(db, lease_id)
    if le["status"] != "active":
        raise ToolError(f"lease {lease_id} is {le['status']}; only an active lease can be renewed")
    if db.one("SELECT id FROM leases WHERE previous_lease_id = ?", (lease_id,)):
        raise ToolError(f"lease {lease_id} has already been renewed")
    start = parse_date(le["end_date"], "end_date") + timedelta(days=1)
    end = add_months(start.replace(day=1), 12) + timedelta(days=start.day - 2)
    return db.insert("leases", {
        "id": db.next_id("leases", "L-"), "unit_id": le["unit_id"], "tenant_id": le["tenant_id"],
        "start_date": start.isoformat(), "end_date": end.isoformat(), "monthly_rent": cents(new_monthly_rent),
        "status": "upcoming", "notice_given_on": None, "move_out_date": None, "previous_lease_id": lease_id})


@DOMAIN.tool("Add a pet to a lease (pet addendum); the property's monthly pet rent applies.",
             params={"lease_id": LEASE_ID, "species": {"type": "string", "enum": ["cat", "dog"]},
                     "name": {"type": "string", "minLength": 1}, "weight_lb": {"type": "number", "exclusiveMinimum": 0}})
def add_pet(db: Session, lease_id: str, species: str, name: str, weight_lb: float) -> dict[str, Any]:
    le = lease(db, lease_id)
    prop = db.one("SELECT p.* FROM properties p JOIN units u ON u.property_id = p.id WHERE u.id = ?", (le["unit_id"],))
    return db.insert("pets", {"id": db.next_id("pets", "PET-"), "lease_id": lease_id, "species": species,
                              "name": name, "weight_lb": weight_lb, "monthly_fee": prop["pet_rent"],
                              "added_on": db.today.isoformat()})


# ---------------------------------------------------------------------------- ledger

@DOMAIN.tool("A lease's rent ledger (charges, payments, credits) and its current balance.",
             params={"lease_id": LEASE_ID})
def get_ledger(db: Session, lease_id: str) -> dict[str, Any]:
    lease(db, lease_id)
    return {"lease_id": lease_id, "balance": balance(db, lease_id),
            "entries": db.all("SELECT * FROM ledger_entries WHERE lease_id = ? ORDER BY posted_on, id", (lease_id,))}


@DOMAIN.tool("Take a payment toward a lease's balance with the tenant's payment method on file.",
             params={"lease_id": LEASE_ID, "amount": MONEY,
                     "method": {"type": "string", "enum": ["card", "bank_account"], "description": "Must be the method on file."}})
def record_payment(db: Session, lease_id: str, amount: float, method: str) -> dict[str, Any]:
    le = lease(db, lease_id)
    on_file = tenant(db, le["tenant_id"])["payment_method"]
    if on_file != method:
        raise ToolError(f"no {method} on file for this tenant" + (f" (on file: {on_file})" if on_file else ""))
    return _post(db, lease_id, "payment", amount, method=method, memo="Taken by resident services")


@DOMAIN.tool("Waive a posted late fee (the fee stays on the ledger with status waived).",
             params={"entry_id": {**ID, "description": "Ledger entry id of the late fee, e.g. E-00042."},
                     "reason": {"type": "string", "minLength": 1}})
def waive_late_fee(db: Session, entry_id: str, reason: str) -> dict[str, Any]:
    e = db.require("ledger_entries", entry_id, "ledger entry")
    if e["kind"] != "late_fee":
        raise ToolError(f"entry {entry_id} is a {e['kind']} entry, not a late fee")
    if e["status"] != "posted":
        raise ToolError(f"late fee {entry_id} is already {e['status']}")
    return {"entry": db.update("ledger_entries", entry_id, status="waived", memo=reason),
            "balance": balance(db, e["lease_id"])}


def _use_approval(db: Session, approval_id: str, lease_id: str, kind: str, amount: float, *, exact: bool) -> None:
    """Check that the approval is an approved `kind` approval of this lease covering `amount`
    (`exact`: for exactly that amount), then mark it used."""
    a = db.require("approvals", approval_id, "approval")
    if a["lease_id"] != lease_id or a["kind"] != kind:
        raise ToolError(f"approval {approval_id} is not a {kind} approval for lease {lease_id}")
    if a["status"] != "approved":
        raise ToolError(f"approval {approval_id} is {a['status']}, not approved")
    if exact and amount != a["amount"]:
        raise ToolError(f"approval {approval_id} is for {a['amount']:.2f}, not {amount:.2f}")
    if not exact and amount > a["amount"]:
        raise ToolError(f"approval {approval_id} covers at most {a['amount']:.2f}")
    db.update("approvals", approval_id, status="used")


@DOMAIN.tool("Credit a rent concession to a lease. Pass approval_id when a manager approval is required.",
             params={"lease_id": LEASE_ID, "amount": MONEY, "reason": {"type": "string", "minLength": 1},
                     "approval_id": {**ID, "description": "An approved concession approval, e.g. A-0042."}},
             required=["lease_id", "amount", "reason"])
def apply_rent_concession(db: Session, lease_id: str, amount: float, reason: str,
                          approval_id: str | None = None) -> dict[str, Any]:
    lease(db, lease_id)
    if approval_id is not None:
        _use_approval(db, approval_id, lease_id, "concession", cents(amount), exact=False)
    return _post(db, lease_id, "concession", amount, memo=reason, ref_id=approval_id)


# ---------------------------------------------------------------------------- approvals

@DOMAIN.tool("Ask the property manager to approve a concession or a deposit refund; creates a pending request.",
             params={"lease_id": LEASE_ID, "kind": {"type": "string", "enum": ["concession", "deposit_refund"]},
                     "amount": MONEY, "reason": {"type": "string", "minLength": 1}})
def request_manager_approval(db: Session, lease_id: str, kind: str, amount: float, reason: str) -> dict[str, Any]:
    lease(db, lease_id)
    pending = db.one("SELECT id FROM approvals WHERE lease_id = ? AND kind = ? AND status = 'pending'", (lease_id, kind))
    if pending:
        raise ToolError(f"a {kind} request for lease {lease_id} is already pending ({pending['id']})")
    return db.insert("approvals", {"id": db.next_id("approvals", "A-"), "lease_id": lease_id, "kind": kind,
                                   "amount": cents(amount), "reason": reason, "status": "pending",
                                   "requested_on": db.today.isoformat(), "decided_by": None, "decided_on": None})


@DOMAIN.tool("List a lease's manager approvals and requests with their status.", params={"lease_id": LEASE_ID})
def list_approvals(db: Session, lease_id: str) -> dict[str, Any]:
    lease(db, lease_id)
    return {"approvals": db.all("SELECT * FROM approvals WHERE lease_id = ? ORDER BY requested_on, id", (lease_id,))}


# ---------------------------------------------------------------------------- deposits

def _deposit(db: Session, lease_id: str) -> dict[str, Any]:
    lease(db, lease_id)
    d = db.one("SELECT * FROM deposits WHERE lease_id = ?", (lease_id,))
    if d is None:
        raise ToolError(f"lease {lease_id} has no security deposit")
    return d


@DOMAIN.tool("A lease's security deposit with its itemized move-out deductions.", params={"lease_id": LEASE_ID})
def get_deposit(db: Session, lease_id: str) -> dict[str, Any]:
    d = _deposit(db, lease_id)
    deductions = db.all("SELECT * FROM deposit_deductions WHERE deposit_id = ? ORDER BY id", (d["id"],))
    return {"deposit": d, "deductions": deductions, "deductions_total": cents(sum(x["amount"] for x in deductions))}


def _applied(db: Session, deposit_id: str) -> float:
    """What `apply_deposit_to_balance` has already taken from the deposit: its posted
    `deposit_applied` ledger entries (`ref_id` names the deposit)."""
    row = db.one("SELECT COALESCE(SUM(amount), 0) AS applied FROM ledger_entries "
                 "WHERE kind = 'deposit_applied' AND status = 'posted' AND ref_id = ?", (deposit_id,))
    return cents(row["applied"] if row else 0)


def _within_deposit(d: dict[str, Any], applied: float, amount: float, what: str) -> None:
    """Money taken from a deposit (applied to the balance, then refunded) never exceeds what it holds."""
    if cents(applied + amount) > d["amount_held"]:
        if not applied:
            raise ToolError(f"deposit {d['id']} holds only {d['amount_held']:.2f}")
        left = cents(d["amount_held"] - applied)
        raise ToolError(f"deposit {d['id']} holds {d['amount_held']:.2f} and {applied:.2f} of it was already "
                        f"applied to the balance: at most {left:.2f} can be {what}")


@DOMAIN.tool("Cover part of a lease's unpaid balance from its held deposit (posts a deposit_applied credit; "
             "at most what the deposit holds minus what was already applied).",
             params={"lease_id": LEASE_ID, "amount": MONEY})
def apply_deposit_to_balance(db: Session, lease_id: str, amount: float) -> dict[str, Any]:
    d = _deposit(db, lease_id)
    if d["status"] != "held":
        raise ToolError(f"deposit {d['id']} is {d['status']}")
    _within_deposit(d, _applied(db, d["id"]), cents(amount), "applied")
    return _post(db, lease_id, "deposit_applied", amount, memo=f"From deposit {d['id']}", ref_id=d["id"])


@DOMAIN.tool("Issue the security deposit refund (mailed to the forwarding address on file; at most what the "
             "deposit holds minus what was applied to the balance). "
             "Pass approval_id when a manager approval is required.",
             params={"lease_id": LEASE_ID, "amount": {"type": "number", "minimum": 0, "maximum": 100000},
                     "approval_id": {**ID, "description": "An approved deposit_refund approval, e.g. A-0042."}},
             required=["lease_id", "amount"])
def issue_deposit_refund(db: Session, lease_id: str, amount: float, approval_id: str | None = None) -> dict[str, Any]:
    d = _deposit(db, lease_id)
    if d["status"] != "held":
        raise ToolError(f"deposit {d['id']} was already {d['status']}")
    _within_deposit(d, _applied(db, d["id"]), cents(amount), "refunded")
    if not tenant(db, lease(db, lease_id)["tenant_id"])["forwarding_address"]:
        raise ToolError("no forwarding address on file: record one before issuing the refund")
    if approval_id is not None:
        _use_approval(db, approval_id, lease_id, "deposit_refund", cents(amount), exact=True)
    return db.update("deposits", d["id"], status="refunded", refund_amount=cents(amount),
                     refunded_on=db.today.isoformat(), approval_id=approval_id)
