"""Maintenance and leasing tools: properties, available units, showings, vendors, work orders."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.property.common import (
    ID, PHONE, PRIORITIES, PROPERTY_ID, TRADES, UNIT_ID, VENDOR_ID, due_by, now_stamp, tenant,
)
from trainer.domains.property.domain import DOMAIN

WO_ID = {**ID, "description": "Work order id, e.g. WO-0042."}
OPEN = ("open", "assigned", "in_progress")


@DOMAIN.tool("All properties with id, name and city.")
def list_properties(db: Session) -> dict[str, Any]:
    return {"properties": db.all("SELECT id, name, address, city FROM properties ORDER BY id")}


@DOMAIN.tool("A property: address, manager, renewal increase %, pet policy, max dog weight, pet rent.",
             params={"property_id": PROPERTY_ID})
def get_property(db: Session, property_id: str) -> dict[str, Any]:
    return db.require("properties", property_id, "property")


@DOMAIN.tool("Units available to rent (vacant, or on notice) with market rent; filters are optional.",
             params={"property_id": PROPERTY_ID,
                     "bedrooms": {"type": "integer", "minimum": 0, "maximum": 5},
                     "max_rent": {"type": "number", "exclusiveMinimum": 0}},
             required=[])
def search_available_units(db: Session, property_id: str | None = None, bedrooms: int | None = None,
                           max_rent: float | None = None) -> dict[str, Any]:
    sql = ("SELECT u.*, p.name AS property_name FROM units u JOIN properties p ON p.id = u.property_id "
           "WHERE u.status IN ('vacant', 'notice')")
    args: list[Any] = []
    for cond, val in (("u.property_id = ?", property_id), ("u.bedrooms = ?", bedrooms), ("u.market_rent <= ?", max_rent)):
        if val is not None:
            sql += f" AND {cond}"
            args.append(val)
    return {"units": db.all(sql + " ORDER BY u.market_rent, u.id", args)}


@DOMAIN.tool("Book a showing of an available unit for a prospective renter.",
             params={"unit_id": UNIT_ID,
                     "prospect_name": {"type": "string", "minLength": 1},
                     "prospect_phone": PHONE,
                     "starts_at": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$",
                                   "description": "Local time YYYY-MM-DDTHH:MM."}})
def schedule_showing(db: Session, unit_id: str, prospect_name: str, prospect_phone: str, starts_at: str) -> dict[str, Any]:
    unit = db.require("units", unit_id, "unit")
    if unit["status"] not in ("vacant", "notice"):
        raise ToolError(f"unit {unit_id} is not available for showings")
    if db.one("SELECT id FROM showings WHERE unit_id = ? AND starts_at = ? AND status = 'scheduled'", (unit_id, starts_at)):
        raise ToolError(f"unit {unit_id} already has a showing at {starts_at}")
    return db.insert("showings", {"id": db.next_id("showings", "SH-"), "unit_id": unit_id,
                                  "prospect_name": prospect_name.strip(), "prospect_phone": prospect_phone.strip(),
                                  "starts_at": starts_at, "status": "scheduled"})


@DOMAIN.tool("Vendors of a trade with hourly rate, emergency service, call-out fee, insurance expiry and status.",
             params={"trade": {"type": "string", "enum": TRADES}})
def search_vendors(db: Session, trade: str) -> dict[str, Any]:
    return {"vendors": db.all("SELECT * FROM vendors WHERE trade = ? ORDER BY id", (trade,))}


@DOMAIN.tool("A unit's work orders: open, assigned and in-progress ones, plus closed ones if asked.",
             params={"unit_id": UNIT_ID, "include_closed": {"type": "boolean", "default": False}})
def list_work_orders(db: Session, unit_id: str, include_closed: bool = False) -> dict[str, Any]:
    db.require("units", unit_id, "unit")
    where, args = ("", ()) if include_closed else (f" AND status IN ({', '.join('?' * len(OPEN))})", OPEN)
    return {"work_orders": db.all(f"SELECT * FROM work_orders WHERE unit_id = ?{where} ORDER BY created_at, id",
                                  (unit_id, *args))}


@DOMAIN.tool("One work order in full.", params={"work_order_id": WO_ID})
def get_work_order(db: Session, work_order_id: str) -> dict[str, Any]:
    return db.require("work_orders", work_order_id, "work order")


def _vendor_for(db: Session, vendor_id: str, category: str) -> dict[str, Any]:
    v = db.require("vendors", vendor_id, "vendor")
    if v["trade"] != category:
        raise ToolError(f"vendor {vendor_id} does {v['trade']} work, not {category}")
    return v


@DOMAIN.tool("Create a maintenance work order on a unit; due time = now + the priority's SLA "
             "(emergency 4 h, urgent 24 h, routine 7 days). With vendor_id it is assigned at once.",
             params={"unit_id": UNIT_ID,
                     "category": {"type": "string", "enum": TRADES, "description": "The trade needed."},
                     "priority": {"type": "string", "enum": PRIORITIES},
                     "description": {"type": "string", "minLength": 3, "maxLength": 500},
                     "permission_to_enter": {"type": "boolean", "description": "May the technician enter when nobody is home?"},
                     "reported_by": {**ID, "description": "Tenant id of the caller."},
                     "vendor_id": {**VENDOR_ID, "description": "Vendor to assign, e.g. V-101."}},
             required=["unit_id", "category", "priority", "description", "permission_to_enter", "reported_by"])
def create_work_order(db: Session, unit_id: str, category: str, priority: str, description: str,
                      permission_to_enter: bool, reported_by: str, vendor_id: str | None = None) -> dict[str, Any]:
    db.require("units", unit_id, "unit")
    tenant(db, reported_by)
    if vendor_id is not None:
        _vendor_for(db, vendor_id, category)
    return db.insert("work_orders", {
        "id": db.next_id("work_orders", "WO-"), "unit_id": unit_id, "reported_by": reported_by,
        "category": category, "priority": priority, "description": description,
        "permission_to_enter": int(permission_to_enter), "status": "assigned" if vendor_id else "open",
        "vendor_id": vendor_id, "created_at": now_stamp(db), "due_by": due_by(db, priority),
        "closed_at": None, "resolution": None})


def _open_order(db: Session, work_order_id: str) -> dict[str, Any]:
    wo = db.require("work_orders", work_order_id, "work order")
    if wo["status"] not in OPEN:
        raise ToolError(f"work order {work_order_id} is {wo['status']}")
    return wo


@DOMAIN.tool("Assign (or reassign) the vendor of an open or assigned work order.",
             params={"work_order_id": WO_ID, "vendor_id": VENDOR_ID})
def assign_vendor(db: Session, work_order_id: str, vendor_id: str) -> dict[str, Any]:
    wo = _open_order(db, work_order_id)
    if wo["status"] == "in_progress":
        raise ToolError(f"work order {work_order_id} is in progress; its vendor cannot change")
    _vendor_for(db, vendor_id, wo["category"])
    return db.update("work_orders", work_order_id, vendor_id=vendor_id, status="assigned")


def _cancel(db: Session, wo: dict[str, Any], reason: str) -> dict[str, Any]:
    """Cancel an open order (`wo` from `_open_order`)."""
    return db.update("work_orders", wo["id"], status="cancelled", closed_at=now_stamp(db), resolution=reason)


@DOMAIN.tool("Change a work order: raise or lower its priority (the due time restarts from now), or set "
             "status cancelled with a resolution.",
             params={"work_order_id": WO_ID, "priority": {"type": "string", "enum": PRIORITIES},
                     "status": {"type": "string", "enum": ["cancelled"]},
                     "resolution": {"type": "string", "minLength": 1, "description": "Why (with status cancelled)."}},
             required=["work_order_id"])
def update_work_order(db: Session, work_order_id: str, priority: str | None = None, status: str | None = None,
                      resolution: str | None = None) -> dict[str, Any]:
    wo = _open_order(db, work_order_id)
    if priority is None and status is None:
        raise ToolError("give a priority or a status")
    if status == "cancelled":
        if priority is not None:
            raise ToolError("cancel or change the priority, not both")
        return _cancel(db, wo, resolution or "Cancelled")
    if priority != wo["priority"]:
        wo = db.update("work_orders", work_order_id, priority=priority, due_by=due_by(db, priority))
    return wo


@DOMAIN.tool("Cancel an open, assigned or in-progress work order.",
             params={"work_order_id": WO_ID, "reason": {"type": "string", "minLength": 1}})
def cancel_work_order(db: Session, work_order_id: str, reason: str) -> dict[str, Any]:
    return _cancel(db, _open_order(db, work_order_id), reason)

