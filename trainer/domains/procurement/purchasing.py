"""Purchasing tools: employees and cost centres, suppliers and the catalogue, requisitions, purchase orders."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.procurement.common import (
    EMPLOYEE_ID, ID, ITEM_ID, PO_ID, QTY, REQ_ID, SUPPLIER_ID, TEXT, WAREHOUSE_ID, active_employee, cents,
    po_lines, supplier,
)
from trainer.domains.procurement.domain import DOMAIN

STATUSES = ["draft", "pending_approval", "approved", "rejected", "ordered", "cancelled"]


# ---------------------------------------------------------------------------- people and cost centres

@DOMAIN.tool("Find employees by email address or by (part of) their name: id, title, role, cost centre, status.",
             params={"query": {"type": "string", "minLength": 2, "description": "An email address or a name."}})
def find_employee(db: Session, query: str) -> dict[str, Any]:
    q = query.strip().lower()
    rows = db.all("SELECT * FROM employees WHERE lower(email) = ? OR lower(name) LIKE ? ORDER BY id",
                  (q, f"%{q}%"))
    return {"employees": rows}


@DOMAIN.tool("A cost centre: its owner (manager) and the owner's approval limit, its director, default warehouse.",
             params={"cost_centre_id": {**ID, "description": "Cost centre id, e.g. CC-110."}})
def get_cost_centre(db: Session, cost_centre_id: str) -> dict[str, Any]:
    cc = db.require("cost_centres", cost_centre_id, "cost centre")
    names = {e["id"]: e["name"] for e in db.all("SELECT id, name FROM employees WHERE id IN (?, ?)",
                                                 (cc["owner_id"], cc["director_id"]))}
    return {**cc, "owner_name": names.get(cc["owner_id"]), "director_name": names.get(cc["director_id"])}


# ---------------------------------------------------------------------------- suppliers and the catalogue

@DOMAIN.tool("Suppliers (optionally of one category): status, preferred flag, payment discount and return window.",
             params={"category": {"type": "string", "minLength": 2}}, required=[])
def list_suppliers(db: Session, category: str | None = None) -> dict[str, Any]:
    cols = "id, name, category, status, preferred, discount_pct, discount_days, return_window_days"
    if category is None:
        return {"suppliers": db.all(f"SELECT {cols} FROM suppliers ORDER BY id")}
    return {"suppliers": db.all(f"SELECT {cols} FROM suppliers WHERE category = ? ORDER BY id", (category,))}


@DOMAIN.tool("One supplier in full, with contact details and the (masked) remit-to bank account.",
             params={"supplier_id": SUPPLIER_ID})
def get_supplier(db: Session, supplier_id: str) -> dict[str, Any]:
    return supplier(db, supplier_id)


@DOMAIN.tool("Change a supplier's email, phone and/or remit-to bank account (give at least one).",
             params={"supplier_id": SUPPLIER_ID,
                     "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[^@\s]+$"},
                     "phone": {"type": "string", "pattern": r"^[0-9+()\- ]{7,20}$"},
                     "remit_account": {"type": "string", "minLength": 4, "maxLength": 34}},
             required=["supplier_id"])
def update_supplier_contact(db: Session, supplier_id: str, email: str | None = None, phone: str | None = None,
                            remit_account: str | None = None) -> dict[str, Any]:
    supplier(db, supplier_id)
    fields = {k: v.strip() for k, v in (("email", email), ("phone", phone), ("remit_account", remit_account))
              if v is not None}
    if not fields:
        raise ToolError("give at least one of email, phone, remit_account")
    return db.update("suppliers", supplier_id, **fields)


@DOMAIN.tool("Search the item catalogue by words of the name or by category.",
             params={"query": {"type": "string", "minLength": 2}})
def search_items(db: Session, query: str) -> dict[str, Any]:
    words = query.lower().split()
    sql = "SELECT * FROM items WHERE " + " AND ".join(["(lower(name) LIKE ? OR category = ?)"] * len(words))
    args = [a for w in words for a in (f"%{w}%", w)]
    return {"items": db.all(sql + " ORDER BY id", args)}


@DOMAIN.tool("The contract prices of an item, one per supplier that carries it, with the supplier's status "
             "and preferred flag.", params={"item_id": ITEM_ID})
def get_item_prices(db: Session, item_id: str) -> dict[str, Any]:
    item = db.require("items", item_id, "item")
    prices = db.all("SELECT p.supplier_id, s.name AS supplier_name, s.status, s.preferred, p.unit_price "
                    "FROM supplier_prices p JOIN suppliers s ON s.id = p.supplier_id WHERE p.item_id = ? "
                    "ORDER BY p.unit_price, p.supplier_id", (item_id,))
    return {"item": item, "prices": prices}


# ---------------------------------------------------------------------------- requisitions

def _requisition(db: Session, requisition_id: str) -> dict[str, Any]:
    r = db.require("requisitions", requisition_id, "requisition")
    lines = db.all("SELECT * FROM requisition_lines WHERE requisition_id = ? ORDER BY id", (requisition_id,))
    return {**r, "lines": lines}


@DOMAIN.tool("Requisitions filtered by requester, cost centre, supplier and/or status, newest first.",
             params={"requester_id": EMPLOYEE_ID, "cost_centre_id": ID, "supplier_id": SUPPLIER_ID,
                     "status": {"type": "string", "enum": STATUSES}},
             required=[])
def list_requisitions(db: Session, requester_id: str | None = None, cost_centre_id: str | None = None,
                      supplier_id: str | None = None, status: str | None = None) -> dict[str, Any]:
    conds = [(c, v) for c, v in (("requester_id", requester_id), ("cost_centre_id", cost_centre_id),
                                 ("supplier_id", supplier_id), ("status", status)) if v is not None]
    if not conds:
        raise ToolError("give at least one filter")
    where = " AND ".join(f"{c} = ?" for c, _ in conds)
    return {"requisitions": db.all(f"SELECT * FROM requisitions WHERE {where} ORDER BY created_on DESC, id DESC",
                                   [v for _, v in conds])}


@DOMAIN.tool("One requisition with its lines.", params={"requisition_id": REQ_ID})
def get_requisition(db: Session, requisition_id: str) -> dict[str, Any]:
    return _requisition(db, requisition_id)


def _approver(db: Session, approver_id: str) -> dict[str, Any]:
    a = active_employee(db, approver_id)
    if a["role"] not in ("manager", "director", "cfo"):
        raise ToolError(f"employee {approver_id} ({a['title']}) does not approve requisitions")
    return a


LINES = {"type": "array", "minItems": 1, "maxItems": 20,
         "items": {"type": "object", "additionalProperties": False, "required": ["item_id", "quantity"],
                   "properties": {"item_id": ITEM_ID, "quantity": QTY}},
         "description": "What to buy: [{item_id, quantity}]; unit prices come from the supplier's contract."}


@DOMAIN.tool("Create a purchase requisition for one supplier, priced from its contract. With approver_id it is "
             "submitted to that approver at once (status pending_approval); without, it stays a draft.",
             params={"requester_id": EMPLOYEE_ID, "cost_centre_id": {**ID, "description": "Cost centre, e.g. CC-110."},
                     "supplier_id": SUPPLIER_ID, "lines": LINES, "justification": TEXT,
                     "approver_id": {**EMPLOYEE_ID, "description": "Who approves it, e.g. E-002."}},
             required=["requester_id", "cost_centre_id", "supplier_id", "lines", "justification"])
def create_requisition(db: Session, requester_id: str, cost_centre_id: str, supplier_id: str,
                       lines: list[dict[str, Any]], justification: str, approver_id: str | None = None) -> dict[str, Any]:
    active_employee(db, requester_id)
    db.require("cost_centres", cost_centre_id, "cost centre")
    supplier(db, supplier_id)
    if approver_id is not None:
        _approver(db, approver_id)
    priced = []
    for line in lines:
        price = db.one("SELECT unit_price FROM supplier_prices WHERE supplier_id = ? AND item_id = ?",
                       (supplier_id, line["item_id"]))
        if price is None:
            raise ToolError(f"supplier {supplier_id} has no contract price for {line['item_id']}")
        priced.append((line["item_id"], line["quantity"], price["unit_price"]))
    rid = db.next_id("requisitions", "PR-")
    db.insert("requisitions", {
        "id": rid, "requester_id": requester_id, "cost_centre_id": cost_centre_id, "supplier_id": supplier_id,
        "justification": justification, "total": cents(sum(q * p for _, q, p in priced)),
        "status": "pending_approval" if approver_id else "draft", "created_on": db.today.isoformat(),
        "approver_id": approver_id, "decided_on": None, "decision_note": None})
    for item_id, qty, price in priced:
        db.insert("requisition_lines", {"id": db.next_id("requisition_lines", "RL-", 5), "requisition_id": rid,
                                        "item_id": item_id, "quantity": qty, "unit_price": price})
    return _requisition(db, rid)


@DOMAIN.tool("Submit a draft requisition to an approver, or re-route a pending one to another approver.",
             params={"requisition_id": REQ_ID, "approver_id": EMPLOYEE_ID})
def submit_requisition(db: Session, requisition_id: str, approver_id: str) -> dict[str, Any]:
    r = db.require("requisitions", requisition_id, "requisition")
    if r["status"] not in ("draft", "pending_approval"):
        raise ToolError(f"requisition {requisition_id} is {r['status']}")
    _approver(db, approver_id)
    db.update("requisitions", requisition_id, status="pending_approval", approver_id=approver_id)
    return _requisition(db, requisition_id)


def _decide(db: Session, requisition_id: str, approver_id: str, status: str, note: str | None) -> dict[str, Any]:
    r = db.require("requisitions", requisition_id, "requisition")
    if r["status"] != "pending_approval":
        raise ToolError(f"requisition {requisition_id} is {r['status']}, not pending approval")
    if r["approver_id"] != approver_id:
        raise ToolError(f"requisition {requisition_id} is routed to {r['approver_id']}, not {approver_id}")
    db.update("requisitions", requisition_id, status=status, decided_on=db.today.isoformat(), decision_note=note)
    return _requisition(db, requisition_id)


@DOMAIN.tool("Record the routed approver's approval of a pending requisition.",
             params={"requisition_id": REQ_ID, "approver_id": EMPLOYEE_ID,
                     "note": {"type": "string", "maxLength": 500}},
             required=["requisition_id", "approver_id"])
def approve_requisition(db: Session, requisition_id: str, approver_id: str, note: str | None = None) -> dict[str, Any]:
    return _decide(db, requisition_id, approver_id, "approved", note)


@DOMAIN.tool("Record the routed approver's rejection of a pending requisition.",
             params={"requisition_id": REQ_ID, "approver_id": EMPLOYEE_ID, "reason": TEXT})
def reject_requisition(db: Session, requisition_id: str, approver_id: str, reason: str) -> dict[str, Any]:
    return _decide(db, requisition_id, approver_id, "rejected", reason)


@DOMAIN.tool("Cancel a draft, pending or approved requisition that has not been ordered.",
             params={"requisition_id": REQ_ID, "reason": TEXT})
def cancel_requisition(db: Session, requisition_id: str, reason: str) -> dict[str, Any]:
    r = db.require("requisitions", requisition_id, "requisition")
    if r["status"] not in ("draft", "pending_approval", "approved"):
        raise ToolError(f"requisition {requisition_id} is {r['status']}")
    db.update("requisitions", requisition_id, status="cancelled", decision_note=reason)
    return _requisition(db, requisition_id)


# ---------------------------------------------------------------------------- purchase orders

def _po(db: Session, po_id: str) -> dict[str, Any]:
    po = db.require("purchase_orders", po_id, "purchase order")
    receipts = db.all("SELECT * FROM goods_receipts WHERE po_id = ? ORDER BY id", (po_id,))
    invoices = db.all("SELECT id, invoice_number, invoice_date, amount, status FROM supplier_invoices "
                      "WHERE po_id = ? ORDER BY id", (po_id,))
    return {**po, "lines": po_lines(db, po_id), "receipts": receipts, "invoices": invoices}


@DOMAIN.tool("Issue a purchase order from an approved requisition (lines and prices copied). Ships to "
             "warehouse_id, by default the cost centre's warehouse.",
             params={"requisition_id": REQ_ID, "warehouse_id": WAREHOUSE_ID}, required=["requisition_id"])
def create_purchase_order(db: Session, requisition_id: str, warehouse_id: str | None = None) -> dict[str, Any]:
    r = _requisition(db, requisition_id)
    if r["status"] != "approved":
        raise ToolError(f"requisition {requisition_id} is {r['status']}; only an approved one can be ordered")
    cc = db.require("cost_centres", r["cost_centre_id"], "cost centre")
    wh = db.require("warehouses", warehouse_id or cc["warehouse_id"], "warehouse")["id"]
    po_id = db.next_id("purchase_orders", "PO-")
    db.insert("purchase_orders", {"id": po_id, "requisition_id": requisition_id, "supplier_id": r["supplier_id"],
                                  "warehouse_id": wh, "total": r["total"], "status": "open",
                                  "issued_on": db.today.isoformat()})
    for line in r["lines"]:
        db.insert("po_lines", {"id": db.next_id("po_lines", "POL-", 5), "po_id": po_id, "item_id": line["item_id"],
                               "quantity": line["quantity"], "unit_price": line["unit_price"],
                               "received_qty": 0, "returned_qty": 0})
    db.update("requisitions", requisition_id, status="ordered")
    return _po(db, po_id)


@DOMAIN.tool("One purchase order: lines (ordered, received, returned, invoiced and paid quantities), "
             "receipts and invoices.", params={"po_id": PO_ID})
def get_purchase_order(db: Session, po_id: str) -> dict[str, Any]:
    return _po(db, po_id)


@DOMAIN.tool("Purchase orders of a supplier and/or with a status, newest first.",
             params={"supplier_id": SUPPLIER_ID,
                     "status": {"type": "string", "enum": ["open", "partially_received", "received", "cancelled"]}},
             required=[])
def list_purchase_orders(db: Session, supplier_id: str | None = None, status: str | None = None) -> dict[str, Any]:
    conds = [(c, v) for c, v in (("supplier_id", supplier_id), ("status", status)) if v is not None]
    if not conds:
        raise ToolError("give a supplier_id or a status")
    where = " AND ".join(f"{c} = ?" for c, _ in conds)
    return {"purchase_orders": db.all(f"SELECT * FROM purchase_orders WHERE {where} ORDER BY issued_on DESC, id DESC",
                                      [v for _, v in conds])}


@DOMAIN.tool("Cancel a purchase order nothing has been received on; its requisition is cancelled too.",
             params={"po_id": PO_ID, "reason": TEXT})
def cancel_purchase_order(db: Session, po_id: str, reason: str) -> dict[str, Any]:
    po = db.require("purchase_orders", po_id, "purchase order")
    if po["status"] != "open" or any(l["received_qty"] for l in po_lines(db, po_id)):
        raise ToolError(f"purchase order {po_id} is {po['status']}; only an open order with nothing received can be cancelled")
    db.update("purchase_orders", po_id, status="cancelled")
    db.update("requisitions", po["requisition_id"], status="cancelled", decision_note=reason)
    return _po(db, po_id)

