"""Line tools: plans and add-ons, usage, lost and stolen phones, number ports."""

from __future__ import annotations

import hashlib
from typing import Any

from trainer.domains.kit import ID, Session, ToolError
from trainer.domains.telecom.common import ACCOUNT_ID, DATE, LINE_ID, NUMBER, account, digits, line
from trainer.domains.telecom.domain import DOMAIN

PLAN_ID = {**ID, "description": "Plan id, e.g. PL-20."}


@DOMAIN.tool("The mobile plans on sale: monthly fee, data allowance (null: unlimited), hotspot.")
def list_mobile_plans(db: Session) -> dict[str, Any]:
    return {"plans": db.all("SELECT * FROM plans ORDER BY monthly_fee, id")}


@DOMAIN.tool("The add-ons on sale: monthly fee and what each includes.")
def list_plan_addons(db: Session) -> dict[str, Any]:
    return {"addons": db.all("SELECT * FROM addons ORDER BY id")}


def _live(db: Session, line_id: str) -> dict[str, Any]:
    ln = line(db, line_id)
    if ln["status"] not in ("active", "suspended"):
        raise ToolError(f"line {line_id} is {ln['status']}")
    return ln


@DOMAIN.tool("Move a line to another plan, effective today. Returns the old and new plan; posts no proration.",
             params={"line_id": LINE_ID, "plan_id": PLAN_ID})
def change_line_plan(db: Session, line_id: str, plan_id: str) -> dict[str, Any]:
    ln = _live(db, line_id)
    new = db.require("plans", plan_id, "plan")
    if ln["plan_id"] == plan_id:
        raise ToolError(f"line {line_id} is already on {new['name']}")
    old = db.require("plans", ln["plan_id"], "plan")
    return {"line": db.update("lines", line_id, plan_id=plan_id), "old_plan": old, "new_plan": new}


@DOMAIN.tool("Add an add-on to a line, starting today. Posts no proration.",
             params={"line_id": LINE_ID, "addon_id": {**ID, "description": "Add-on id, e.g. AD-01."}})
def add_line_addon(db: Session, line_id: str, addon_id: str) -> dict[str, Any]:
    _live(db, line_id)
    db.require("addons", addon_id, "add-on")
    return db.insert("line_addons", {"id": db.next_id("line_addons", "LA-"), "line_id": line_id,
                                     "addon_id": addon_id, "started_on": db.today.isoformat(), "ended_on": None})


@DOMAIN.tool("End an active add-on of a line today (today is its last day). Posts no proration.",
             params={"line_addon_id": {**ID, "description": "The line's add-on subscription id, e.g. LA-0042."}})
def remove_line_addon(db: Session, line_addon_id: str) -> dict[str, Any]:
    la = db.require("line_addons", line_addon_id, "line add-on")
    if la["ended_on"] is not None:
        raise ToolError(f"add-on {line_addon_id} already ended on {la['ended_on']}")
    return db.update("line_addons", line_addon_id, ended_on=db.today.isoformat())


@DOMAIN.tool("A line's usage records (day, kind, quantity, charge), optionally within dates, and its add-on "
             "history.",
             params={"line_id": LINE_ID, "since": {**DATE, "description": "First day, YYYY-MM-DD."},
                     "until": {**DATE, "description": "Last day, YYYY-MM-DD."}},
             required=["line_id"])
def get_line_usage(db: Session, line_id: str, since: str | None = None, until: str | None = None) -> dict[str, Any]:
    line(db, line_id)
    usage = db.all("SELECT * FROM usage_records WHERE line_id = ? AND day >= ? AND day <= ? ORDER BY day, id",
                   (line_id, since or "0000-00-00", until or "9999-99-99"))
    addons = db.all("SELECT la.*, ad.name FROM line_addons la JOIN addons ad ON ad.id = la.addon_id "
                    "WHERE la.line_id = ? ORDER BY la.started_on, la.id", (line_id,))
    return {"line_id": line_id, "usage": usage, "total_charges": round(sum(u["charge"] for u in usage), 2),
            "addon_history": addons}


@DOMAIN.tool("Suspend a line today because its phone was lost or stolen.",
             params={"line_id": LINE_ID, "reason": {"type": "string", "enum": ["lost", "stolen"]}})
def suspend_line(db: Session, line_id: str, reason: str) -> dict[str, Any]:
    ln = line(db, line_id)
    if ln["status"] != "active":
        raise ToolError(f"line {line_id} is {ln['status']}, not active")
    return db.update("lines", line_id, status="suspended", suspended_on=db.today.isoformat(), suspend_reason=reason)


@DOMAIN.tool("Restore a line suspended for a lost or stolen phone.", params={"line_id": LINE_ID})
def restore_line(db: Session, line_id: str) -> dict[str, Any]:
    ln = line(db, line_id)
    if ln["status"] != "suspended" or ln["suspend_reason"] not in ("lost", "stolen"):
        raise ToolError(f"line {line_id} is not suspended for a lost or stolen phone")
    return db.update("lines", line_id, status="active", suspended_on=None, suspend_reason=None)


@DOMAIN.tool("Issue the transfer PIN a customer needs to move a line's number to another carrier "
             "(creates an authorized port-out request).",
             params={"line_id": LINE_ID})
def issue_port_out_pin(db: Session, line_id: str) -> dict[str, Any]:
    _live(db, line_id)
    # deterministic, so a replay and an agent issue the same PIN
    pin = f"{int(hashlib.sha256(f'{line_id}:{db.today}'.encode()).hexdigest(), 16) % 10**6:06d}"
    return db.insert("port_requests", {"id": db.next_id("port_requests", "PR-"), "line_id": line_id,
                                       "direction": "out", "other_carrier": None, "other_account": None,
                                       "transfer_pin": pin, "status": "authorized",
                                       "requested_on": db.today.isoformat()})


@DOMAIN.tool("Bring a number from another carrier onto an account: a new line (pending the port) on the "
             "given plan and a pending port-in request.",
             params={"account_id": ACCOUNT_ID, "mobile_number": NUMBER,
                     "donor_carrier": {"type": "string", "minLength": 2},
                     "donor_account_number": {"type": "string", "minLength": 4},
                     "plan_id": PLAN_ID})
def submit_port_in(db: Session, account_id: str, mobile_number: str, donor_carrier: str, donor_account_number: str,
                   plan_id: str) -> dict[str, Any]:
    account(db, account_id)
    db.require("plans", plan_id, "plan")
    number = digits(mobile_number)
    if len(number) != 10:
        raise ToolError("a mobile number has ten digits")
    ln = db.insert("lines", {"id": db.next_id("lines", "LN-"), "account_id": account_id, "mobile_number": number,
                             "plan_id": plan_id, "status": "pending_port", "activated_on": db.today.isoformat(),
                             "suspended_on": None, "suspend_reason": None})
    pr = db.insert("port_requests", {"id": db.next_id("port_requests", "PR-"), "line_id": ln["id"],
                                     "direction": "in", "other_carrier": donor_carrier.strip(),
                                     "other_account": donor_account_number.strip(), "transfer_pin": None,
                                     "status": "pending", "requested_on": db.today.isoformat()})
    return {"line": ln, "port_request": pr}


@DOMAIN.tool("An account's port requests (in and out) with their status.", params={"account_id": ACCOUNT_ID})
def list_port_requests(db: Session, account_id: str) -> dict[str, Any]:
    account(db, account_id)
    return {"port_requests": db.all(
        "SELECT pr.*, l.mobile_number FROM port_requests pr JOIN lines l ON l.id = pr.line_id "
        "WHERE l.account_id = ? ORDER BY pr.requested_on, pr.id", (account_id,))}


@DOMAIN.tool("Cancel a pending or authorized port request (a cancelled port-in also removes its pending line).",
             params={"port_request_id": {**ID, "description": "Port request id, e.g. PR-0042."}})
def cancel_port_request(db: Session, port_request_id: str) -> dict[str, Any]:
    pr = db.require("port_requests", port_request_id, "port request")
    if pr["status"] not in ("pending", "authorized"):
        raise ToolError(f"port request {port_request_id} is {pr['status']} and cannot be cancelled")
    if pr["direction"] == "in":
        db.update("lines", pr["line_id"], status="ported_out")
    return db.update("port_requests", port_request_id, status="cancelled")
