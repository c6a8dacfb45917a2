"""Check helpers of the procurement tasks, on top of `trainer.domains.checks`.

A check reads the records the task is about (a requisition's routing and lines, a payment's
amount, stock levels), then the collateral check `only(...)`: no writes outside the allowed rows
and fields. Free text (justifications, reasons, notes) is never read, so any wording passes.
Judge questions are asked last, about the visible transcript, and only where the database cannot
show the outcome (what was said).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from trainer.domains import checks
from trainer.domains.checks import assert_no_collateral, field, new_one, new_records, none_new, record

SERVER = "procurement"


def fx_of(x: Any) -> dict[str, Any]:
    """The procurement server's effects of an episode."""
    return x.effects[SERVER]


def only(fx: dict[str, Any], allow: Iterable[str] = ()) -> None:
    """No writes outside `allow`."""
    assert_no_collateral(fx, allow=list(allow))


def money(a: Any, b: float) -> bool:
    return a is not None and abs(float(a) - b) < 0.005


def new_requisition(fx: dict[str, Any], requester_id: str, *, cost_centre_id: str, supplier_id: str,
                    lines: Mapping[str, int], approver_id: str, status: str = "pending_approval") -> list[str]:
    """Exactly one new requisition by `requester_id`, for these items and quantities, routed to
    `approver_id`; returns the rows it may write (the requisition and its lines)."""
    req = new_one(fx, "requisitions", f"requisition by {requester_id}", requester_id=requester_id)
    assert req["cost_centre_id"] == cost_centre_id, f"cost centre should be {cost_centre_id}, got {req['cost_centre_id']}"
    assert req["supplier_id"] == supplier_id, f"supplier should be {supplier_id}, got {req['supplier_id']}"
    got = {}
    rows = new_records(fx, "requisition_lines", requisition_id=req["id"])
    for r in rows:
        got[r["item_id"]] = got.get(r["item_id"], 0) + r["quantity"]
    assert got == dict(lines), f"the requisition should order {dict(lines)}, it orders {got}"
    assert req["status"] == status, f"the requisition should be {status}, it is {req['status']}"
    assert req["approver_id"] == approver_id, f"it should be routed to {approver_id}, it is routed to {req['approver_id']}"
    return [f"requisitions[{req['id']}]", *(f"requisition_lines[{r['id']}]" for r in rows)]


def routed(fx: dict[str, Any], requisition_id: str, approver_id: str, status: str = "pending_approval") -> list[str]:
    """An existing requisition now has this status and approver; returns the fields it may change."""
    assert field(fx, "requisitions", requisition_id, "status") == status, \
        f"{requisition_id} should be {status}, it is {field(fx, 'requisitions', requisition_id, 'status')}"
    assert field(fx, "requisitions", requisition_id, "approver_id") == approver_id, \
        f"{requisition_id} should be routed to {approver_id}"
    return [f"requisitions[{requisition_id}].{f}" for f in ("status", "approver_id", "decided_on", "decision_note")]


def paid(fx: dict[str, Any], invoice_id: str, amount: float) -> list[str]:
    """The invoice is paid, once, for exactly `amount`; returns what the payment may write."""
    pay = new_one(fx, "payments", f"payment of {invoice_id}", invoice_id=invoice_id)
    assert money(pay["amount"], amount), f"{invoice_id} should be paid {amount:.2f}, it was paid {pay['amount']}"
    assert field(fx, "supplier_invoices", invoice_id, "status") == "paid", f"{invoice_id} is not marked paid"
    return [f"payments[{pay['id']}]", f"supplier_invoices[{invoice_id}].status"]


def held(fx: dict[str, Any], invoice_id: str) -> list[str]:
    """The invoice is on hold and unpaid; returns what the hold may write."""
    none_new(fx, "payments", invoice_id=invoice_id)
    assert field(fx, "supplier_invoices", invoice_id, "status") == "on_hold", \
        f"{invoice_id} should be on hold, it is {field(fx, 'supplier_invoices', invoice_id, 'status')}"
    return [f"supplier_invoices[{invoice_id}].status", f"supplier_invoices[{invoice_id}].hold_reason"]


def on_hand(fx: dict[str, Any], stock_id: str, qty: int) -> str:
    """A stock row holds `qty`; returns its allow path."""
    got = field(fx, "inventory", stock_id, "on_hand")
    assert got == qty, f"stock {stock_id} should be {qty} on hand, it is {got}"
    return f"inventory[{stock_id}].on_hand"


def ask_judge(x: Any, judge: Any) -> None:
    """Every `rubrics_yesno` question of the task must be answered yes about the visible transcript."""
    checks.ask_judge(fx_of(x), x, judge)


__all__ = ["ask_judge", "field", "fx_of", "held", "money", "new_one", "new_records", "new_requisition", "none_new",
           "on_hand", "only", "paid", "record", "routed"]
