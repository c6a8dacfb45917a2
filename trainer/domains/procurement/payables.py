"""Accounts-payable tools: supplier invoices, holds and payments."""

from __future__ import annotations

from typing import Any

from trainer.domains.kit import Session, ToolError
from trainer.domains.procurement.common import INVOICE_ID, MONEY, PO_ID, SUPPLIER_ID, TEXT, cents, supplier
from trainer.domains.procurement.domain import DOMAIN


def _invoice(db: Session, invoice_id: str) -> dict[str, Any]:
    inv = db.require("supplier_invoices", invoice_id, "invoice")
    lines = db.all("SELECT * FROM invoice_lines WHERE invoice_id = ? ORDER BY id", (invoice_id,))
    payment = db.one("SELECT * FROM payments WHERE invoice_id = ?", (invoice_id,))
    return {**inv, "lines": lines, "payment": payment}


@DOMAIN.tool("One supplier invoice with its lines (PO line, quantity, unit price) and its payment, if any.",
             params={"invoice_id": INVOICE_ID})
def get_supplier_invoice(db: Session, invoice_id: str) -> dict[str, Any]:
    return _invoice(db, invoice_id)


@DOMAIN.tool("Supplier invoices filtered by supplier, purchase order and/or status.",
             params={"supplier_id": SUPPLIER_ID, "po_id": PO_ID,
                     "status": {"type": "string", "enum": ["received", "on_hold", "paid"]}},
             required=[])
def list_supplier_invoices(db: Session, supplier_id: str | None = None, po_id: str | None = None,
                           status: str | None = None) -> dict[str, Any]:
    conds = [(c, v) for c, v in (("supplier_id", supplier_id), ("po_id", po_id), ("status", status)) if v is not None]
    if not conds:
        raise ToolError("give at least one filter")
    where = " AND ".join(f"{c} = ?" for c, _ in conds)
    return {"invoices": db.all(f"SELECT * FROM supplier_invoices WHERE {where} ORDER BY invoice_date DESC, id DESC",
                               [v for _, v in conds])}


@DOMAIN.tool("Put a supplier invoice on hold (not to be paid) with the reason.",
             params={"invoice_id": INVOICE_ID, "reason": TEXT})
def hold_supplier_invoice(db: Session, invoice_id: str, reason: str) -> dict[str, Any]:
    inv = db.require("supplier_invoices", invoice_id, "invoice")
    if inv["status"] != "received":
        raise ToolError(f"invoice {invoice_id} is {inv['status']}")
    db.update("supplier_invoices", invoice_id, status="on_hold", hold_reason=reason)
    return _invoice(db, invoice_id)


@DOMAIN.tool("Pay a supplier invoice (received or on hold) to the supplier's remit-to account: amount is what "
             "is paid now, at most the invoice amount (less when an early-payment discount applies).",
             params={"invoice_id": INVOICE_ID, "amount": MONEY})
def pay_supplier_invoice(db: Session, invoice_id: str, amount: float) -> dict[str, Any]:
    inv = db.require("supplier_invoices", invoice_id, "invoice")
    if inv["status"] == "paid":
        raise ToolError(f"invoice {invoice_id} is already paid")
    if cents(amount) > inv["amount"]:
        raise ToolError(f"invoice {invoice_id} is for {inv['amount']:.2f}; {amount:.2f} is more than that")
    s = supplier(db, inv["supplier_id"])
    db.insert("payments", {"id": db.next_id("payments", "PAY-"), "invoice_id": invoice_id, "amount": cents(amount),
                           "paid_on": db.today.isoformat(), "account": s["remit_account"]})
    db.update("supplier_invoices", invoice_id, status="paid")
    return _invoice(db, invoice_id)
