"""Stock tools: goods receipts, stock levels, transfers between warehouses, returns to supplier, write-offs."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.procurement.common import (
    EMPLOYEE_ID, ITEM_ID, PO_ID, PO_LINE_ID, QTY, TEXT, WAREHOUSE_ID, active_employee, add_stock, cents, po_lines,
)
from trainer.domains.procurement.domain import DOMAIN


@DOMAIN.tool("Record goods that arrived against a purchase order: [{po_line_id, quantity}] received now. "
             "Stock at the order's ship-to warehouse goes up; the order becomes partially_received or received.",
             params={"po_id": PO_ID, "received_by": EMPLOYEE_ID,
                     "lines": {"type": "array", "minItems": 1, "maxItems": 20,
                               "items": {"type": "object", "additionalProperties": False,
                                         "required": ["po_line_id", "quantity"],
                                         "properties": {"po_line_id": PO_LINE_ID, "quantity": QTY}}}})
def record_goods_receipt(db: Session, po_id: str, received_by: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    po = db.require("purchase_orders", po_id, "purchase order")
    if po["status"] not in ("open", "partially_received"):
        raise ToolError(f"purchase order {po_id} is {po['status']}")
    active_employee(db, received_by)
    by_id = {l["id"]: l for l in po_lines(db, po_id)}
    gr_id = db.next_id("goods_receipts", "GR-")
    db.insert("goods_receipts", {"id": gr_id, "po_id": po_id, "received_on": db.today.isoformat(),
                                 "received_by": received_by})
    for line in lines:
        pol = by_id.get(line["po_line_id"])
        if pol is None:
            raise ToolError(f"{line['po_line_id']} is not a line of {po_id}")
        left = pol["quantity"] - pol["received_qty"]
        if line["quantity"] > left:
            raise ToolError(f"line {pol['id']} has {left} left to receive, not {line['quantity']}")
        pol["received_qty"] += line["quantity"]
        db.update("po_lines", pol["id"], received_qty=pol["received_qty"])
        db.insert("receipt_lines", {"id": db.next_id("receipt_lines", "GRL-", 5), "receipt_id": gr_id,
                                    "po_line_id": pol["id"], "quantity": line["quantity"]})
        add_stock(db, po["warehouse_id"], pol["item_id"], line["quantity"])
    done = all(l["received_qty"] == l["quantity"] for l in by_id.values())
    db.update("purchase_orders", po_id, status="received" if done else "partially_received")
    return {"receipt": db.get("goods_receipts", gr_id),
            "lines": db.all("SELECT * FROM receipt_lines WHERE receipt_id = ? ORDER BY id", (gr_id,)),
            "po_status": "received" if done else "partially_received"}


@DOMAIN.tool("Stock of an item at every warehouse: on hand and reorder point.", params={"item_id": ITEM_ID})
def check_stock(db: Session, item_id: str) -> dict[str, Any]:
    item = db.require("items", item_id, "item")
    return {"item": item, "stock": db.all("SELECT * FROM inventory WHERE item_id = ? ORDER BY warehouse_id", (item_id,))}


@DOMAIN.tool("Move stock of an item from one warehouse to another.",
             params={"item_id": ITEM_ID, "from_warehouse_id": WAREHOUSE_ID, "to_warehouse_id": WAREHOUSE_ID,
                     "quantity": QTY, "requested_by": EMPLOYEE_ID})
def transfer_stock(db: Session, item_id: str, from_warehouse_id: str, to_warehouse_id: str, quantity: int,
                   requested_by: str) -> dict[str, Any]:
    db.require("items", item_id, "item")
    for wh in (from_warehouse_id, to_warehouse_id):
        db.require("warehouses", wh, "warehouse")
    if from_warehouse_id == to_warehouse_id:
        raise ToolError("the two warehouses must differ")
    active_employee(db, requested_by)
    source = add_stock(db, from_warehouse_id, item_id, -quantity)
    target = add_stock(db, to_warehouse_id, item_id, quantity)
    tr = db.insert("transfers", {"id": db.next_id("transfers", "TR-"), "item_id": item_id,
                                 "from_warehouse_id": from_warehouse_id, "to_warehouse_id": to_warehouse_id,
                                 "quantity": quantity, "requested_by": requested_by, "created_on": db.today.isoformat()})
    return {"transfer": tr, "from_stock": source, "to_stock": target}


@DOMAIN.tool("Return received goods on a purchase order line to the supplier. Stock at the order's warehouse "
             "goes down; the credit due is quantity x the line's unit price.",
             params={"po_line_id": PO_LINE_ID, "quantity": QTY, "reason": TEXT})
def create_supplier_return(db: Session, po_line_id: str, quantity: int, reason: str) -> dict[str, Any]:
    pol = db.require("po_lines", po_line_id, "purchase order line")
    po = db.require("purchase_orders", pol["po_id"], "purchase order")
    left = pol["received_qty"] - pol["returned_qty"]
    if quantity > left:
        raise ToolError(f"line {po_line_id} has {left} received and not yet returned, not {quantity}")
    db.update("po_lines", po_line_id, returned_qty=pol["returned_qty"] + quantity)
    add_stock(db, po["warehouse_id"], pol["item_id"], -quantity)
    return db.insert("supplier_returns", {"id": db.next_id("supplier_returns", "RTV-"), "po_line_id": po_line_id,
                                          "quantity": quantity, "reason": reason,
                                          "credit_amount": cents(quantity * pol["unit_price"]),
                                          "created_on": db.today.isoformat()})


@DOMAIN.tool("Write stock off (damaged, expired, lost): on hand at the warehouse goes down.",
             params={"warehouse_id": WAREHOUSE_ID, "item_id": ITEM_ID, "quantity": QTY, "reason": TEXT})
def write_off_stock(db: Session, warehouse_id: str, item_id: str, quantity: int, reason: str) -> dict[str, Any]:
    db.require("warehouses", warehouse_id, "warehouse")
    db.require("items", item_id, "item")
    stock = add_stock(db, warehouse_id, item_id, -quantity)
    wo = db.insert("write_offs", {"id": db.next_id("write_offs", "WO-"), "warehouse_id": warehouse_id,
                                  "item_id": item_id, "quantity": quantity, "reason": reason,
                                  "created_on": db.today.isoformat()})
    return {"write_off": wo, "stock": stock}
