"""What the procurement tools share: argument schemas, money, look-ups and the derived quantities."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import ID, Session, ToolError

MONEY = {"type": "number", "exclusiveMinimum": 0, "maximum": 10000000}
QTY = {"type": "integer", "minimum": 1, "maximum": 100000}
TEXT = {"type": "string", "minLength": 3, "maxLength": 500}
EMPLOYEE_ID = {**ID, "description": "Employee id, e.g. E-010."}
SUPPLIER_ID = {**ID, "description": "Supplier id, e.g. S-101."}
ITEM_ID = {**ID, "description": "Item id, e.g. I-1001."}
WAREHOUSE_ID = {**ID, "description": "Warehouse id, e.g. WH-01."}
REQ_ID = {**ID, "description": "Requisition id, e.g. PR-0042."}
PO_ID = {**ID, "description": "Purchase order id, e.g. PO-0042."}
PO_LINE_ID = {**ID, "description": "Purchase order line id, e.g. POL-00042."}
INVOICE_ID = {**ID, "description": "Supplier invoice id (ours), e.g. VI-0042."}


def cents(x: float) -> float:
    return round(float(x) + 0.0, 2)


def employee(db: Session, employee_id: str) -> dict[str, Any]:
    return db.require("employees", employee_id, "employee")


def active_employee(db: Session, employee_id: str) -> dict[str, Any]:
    e = employee(db, employee_id)
    if e["status"] == "left":
        raise ToolError(f"employee {employee_id} has left the company")
    return e


def supplier(db: Session, supplier_id: str) -> dict[str, Any]:
    return db.require("suppliers", supplier_id, "supplier")


def po_lines(db: Session, po_id: str) -> list[dict[str, Any]]:
    """The lines of a purchase order with what has been invoiced on each (on any invoice, and on paid ones)."""
    return db.all(
        "SELECT l.*, "
        "COALESCE((SELECT SUM(il.quantity) FROM invoice_lines il WHERE il.po_line_id = l.id), 0) AS invoiced_qty, "
        "COALESCE((SELECT SUM(il.quantity) FROM invoice_lines il JOIN supplier_invoices v ON v.id = il.invoice_id "
        "          WHERE il.po_line_id = l.id AND v.status = 'paid'), 0) AS paid_qty "
        "FROM po_lines l WHERE l.po_id = ? ORDER BY l.id", (po_id,))


def stock_row(db: Session, warehouse_id: str, item_id: str) -> dict[str, Any] | None:
    return db.one("SELECT * FROM inventory WHERE warehouse_id = ? AND item_id = ?", (warehouse_id, item_id))


def add_stock(db: Session, warehouse_id: str, item_id: str, delta: int) -> dict[str, Any]:
    """Change the on-hand quantity of an item at a warehouse (a new stock row when there is none).
    Going below zero is refused by the schema."""
    row = stock_row(db, warehouse_id, item_id)
    if row is None:
        if delta < 0:
            raise ToolError(f"warehouse {warehouse_id} holds no {item_id}")
        return db.insert("inventory", {"id": db.next_id("inventory", "ST-"), "warehouse_id": warehouse_id,
                                       "item_id": item_id, "on_hand": delta, "reorder_point": 0})
    return db.update("inventory", row["id"], on_hand=row["on_hand"] + delta)
