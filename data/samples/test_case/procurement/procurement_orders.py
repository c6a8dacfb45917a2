"""Procurement tasks: purchase orders from approved requisitions, goods receipts (over-delivery,
damaged units), cancellation."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.procurement.checks import field, fx_of, new_one, new_records, on_hand, only

"""!
scenario: procurement
tags: ["domain:procurement", orders]
"""


def check_new_po(x: TestContext, requisition_id: str, supplier_id: str, warehouse_id: str, lines: dict) -> None:
    """One new purchase order from the requisition, shipping where the policy says, lines copied."""
    fx = fx_of(x)
    po = new_one(fx, "purchase_orders", f"purchase order of {requisition_id}", requisition_id=requisition_id)
    assert po["supplier_id"] == supplier_id and po["status"] == "open", f"unexpected order {po}"
    assert po["warehouse_id"] == warehouse_id, f"the order should ship to {warehouse_id}, not {po['warehouse_id']}"
    pols = new_records(fx, "po_lines", po_id=po["id"])
    assert {p["item_id"]: p["quantity"] for p in pols} == lines, f"order lines {pols} should be {lines}"
    assert field(fx, "requisitions", requisition_id, "status") == "ordered"
    only(fx, [f"purchase_orders[{po['id']}]", *(f"po_lines[{p['id']}]" for p in pols),
              f"requisitions[{requisition_id}].status"])


def check_receipt(x: TestContext, po_id: str, received: dict, status: str, stock: dict) -> None:
    """The PO lines have received these totals, the order has this status, stock rose to these levels;
    the writes are receipts of this order, their lines and those fields (one receipt or several)."""
    fx = fx_of(x)
    receipts = new_records(fx, "goods_receipts", po_id=po_id)
    assert receipts, f"no goods receipt was recorded on {po_id}"
    ids = {r["id"] for r in receipts}
    lines = [r for r in new_records(fx, "receipt_lines") if r["receipt_id"] in ids]
    allow = [f"goods_receipts[{r['id']}]" for r in receipts] + [f"receipt_lines[{r['id']}]" for r in lines]
    for pol, qty in received.items():
        assert field(fx, "po_lines", pol, "received_qty") == qty, \
            f"{pol} should have {qty} received, has {field(fx, 'po_lines', pol, 'received_qty')}"
        allow.append(f"po_lines[{pol}].received_qty")
    assert field(fx, "purchase_orders", po_id, "status") == status, f"{po_id} should be {status}"
    allow += [f"purchase_orders[{po_id}].status", *(on_hand(fx, s, q) for s, q in stock.items())]
    only(fx, allow)


# ---------------------------------------------------------------------------- purchase orders

def test_issue_po_default_warehouse(x: TestContext, judge: Judge):
    """!
    query: PR-0920 has been approved. Please issue the purchase order.
    user_context: >-
      You are Ravi Menon, email ravi.menon@brightwater.example, a buyer. PR-0920 (packaging for
      Logistics) was approved; you want the PO issued. No special delivery instructions.
    tags: [write, purchase-order, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-915, name: Carla Mensah, email: carla.mensah@brightwater.example, title: Coordinator, role: staff, cost_centre_id: CC-130, status: active}]
          requisitions: [{id: PR-0920, requester_id: E-915, cost_centre_id: CC-130, supplier_id: S-114, justification: Packaging restock, total: 1500, status: approved, created_on: "2025-09-10", approver_id: E-012, decided_on: "2025-09-11"}]
          requisition_lines:
          - {id: RL-09201, requisition_id: PR-0920, item_id: I-1061, quantity: 1000, unit_price: 1.2}
          - {id: RL-09202, requisition_id: PR-0920, item_id: I-1062, quantity: 15, unit_price: 20.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ravi.menon@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0920}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-130}}
          - {tool: create_purchase_order, parameters: {requisition_id: PR-0920}}
    """
    check_new_po(x, "PR-0920", "S-114", "WH-02", {"I-1061": 1000, "I-1062": 15})


def test_issue_po_named_warehouse(x: TestContext, judge: Judge):
    """!
    query: My requisition PR-0921 was approved. Issue the PO, but have it shipped to the Central Warehouse in Dayton this time.
    user_context: >-
      You are Grace Liu, email grace.liu@brightwater.example, Facilities Manager. Your PR-0921 was
      approved. You want this order delivered to the Central Warehouse in Dayton, not your usual depot.
    tags: [write, purchase-order, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0921, requester_id: E-016, cost_centre_id: CC-320, supplier_id: S-104, justification: Lighting upgrade, total: 2580, status: approved, created_on: "2025-09-08", approver_id: E-004, decided_on: "2025-09-09"}]
          requisition_lines: [{id: RL-09211, requisition_id: PR-0921, item_id: I-1013, quantity: 20, unit_price: 129.0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: grace.liu@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0921}}
          - {tool: create_purchase_order, parameters: {requisition_id: PR-0921, warehouse_id: WH-01}}
    """
    check_new_po(x, "PR-0921", "S-104", "WH-01", {"I-1013": 20})


def test_cancel_po_nothing_received(x: TestContext, judge: Judge):
    """!
    query: Please cancel PO-0927. The trade show it was for got called off.
    user_context: >-
      You are Paul Novak, email paul.novak@brightwater.example, Sales Manager. You raised PR-0927,
      which became PO-0927; nothing has arrived yet. The trade show was cancelled.
    tags: [write, purchase-order, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0927, requester_id: E-017, cost_centre_id: CC-330, supplier_id: S-112, justification: Trade show supplies, total: 440, status: ordered, created_on: "2025-09-05", approver_id: E-004, decided_on: "2025-09-05"}]
          purchase_orders: [{id: PO-0927, requisition_id: PR-0927, supplier_id: S-112, warehouse_id: WH-02, total: 440, status: open, issued_on: "2025-09-08"}]
          po_lines: [{id: POL-09271, po_id: PO-0927, item_id: I-1053, quantity: 40, unit_price: 11.0, received_qty: 0, returned_qty: 0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: paul.novak@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0927}}
          - {tool: cancel_purchase_order, parameters: {po_id: PO-0927, reason: Trade show cancelled}}
    """
    fx = fx_of(x)
    assert field(fx, "purchase_orders", "PO-0927", "status") == "cancelled"
    assert field(fx, "requisitions", "PR-0927", "status") == "cancelled"
    only(fx, ["purchase_orders[PO-0927].status", "requisitions[PR-0927].status", "requisitions[PR-0927].decision_note"])


# ---------------------------------------------------------------------------- goods receipts


def test_receive_full_delivery(x: TestContext, judge: Judge):
    """!
    query: PO-0924 from Apex just came in complete, 24 hydraulic hoses and 10 fitting kits. Please book it in.
    user_context: >-
      You are Carlos Diaz, email carlos.diaz@brightwater.example, warehouse lead at the Central
      Warehouse. PO-0924 arrived complete: 24 hoses and 10 fitting kits, nothing damaged.
    tags: [write, receipt, two-paths, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items:
          - {id: I-1921, name: Hydraulic hose 3/4 in x 10 ft, category: mro, unit: each, standard_cost: 42}
          - {id: I-1922, name: Quick-coupler fitting kit, category: mro, unit: kit, standard_cost: 55}
          inventory:
          - {id: ST-0921, warehouse_id: WH-01, item_id: I-1921, on_hand: 5, reorder_point: 10}
          - {id: ST-0922, warehouse_id: WH-01, item_id: I-1922, on_hand: 2, reorder_point: 4}
          requisitions: [{id: PR-0924, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-101, justification: Hydraulics, total: 1558, status: ordered, created_on: "2025-09-01", approver_id: E-002, decided_on: "2025-09-02"}]
          purchase_orders: [{id: PO-0924, requisition_id: PR-0924, supplier_id: S-101, warehouse_id: WH-01, total: 1558, status: open, issued_on: "2025-09-03"}]
          po_lines:
          - {id: POL-09241, po_id: PO-0924, item_id: I-1921, quantity: 24, unit_price: 42.0, received_qty: 0, returned_qty: 0}
          - {id: POL-09242, po_id: PO-0924, item_id: I-1922, quantity: 10, unit_price: 55.0, received_qty: 0, returned_qty: 0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: carlos.diaz@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0924}}
          - {tool: record_goods_receipt, parameters: {po_id: PO-0924, received_by: E-024, lines: [{po_line_id: POL-09241, quantity: 24}, {po_line_id: POL-09242, quantity: 10}]}}
          alternatives:
          - tool_interactions:
            - {tool: find_employee, parameters: {query: carlos.diaz@brightwater.example}}
            - {tool: get_purchase_order, parameters: {po_id: PO-0924}}
            - {tool: record_goods_receipt, parameters: {po_id: PO-0924, received_by: E-024, lines: [{po_line_id: POL-09241, quantity: 24}]}}
            - {tool: record_goods_receipt, parameters: {po_id: PO-0924, received_by: E-024, lines: [{po_line_id: POL-09242, quantity: 10}]}}
    """
    check_receipt(x, "PO-0924", {"POL-09241": 24, "POL-09242": 10}, "received", {"ST-0921": 29, "ST-0922": 12})


def test_receive_over_delivery(x: TestContext, judge: Judge):
    """!
    query: The glove delivery for PO-0925 is here. They sent 120 boxes though, and we only ordered 100. Book it in.
    user_context: >-
      You are Hannah Weiss, email hannah.weiss@brightwater.example, warehouse lead at the East Depot.
      120 boxes of nitrile gloves arrived on PO-0925, all in good condition.
    tags: [write, receipt, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1923, name: Nitrile gloves large (box of 100), category: safety, unit: box, standard_cost: 9}]
          inventory: [{id: ST-0923, warehouse_id: WH-02, item_id: I-1923, on_hand: 30, reorder_point: 40}]
          requisitions: [{id: PR-0925, requester_id: E-012, cost_centre_id: CC-130, supplier_id: S-106, justification: Gloves, total: 900, status: ordered, created_on: "2025-09-02", approver_id: E-002, decided_on: "2025-09-02"}]
          purchase_orders: [{id: PO-0925, requisition_id: PR-0925, supplier_id: S-106, warehouse_id: WH-02, total: 900, status: open, issued_on: "2025-09-03"}]
          po_lines: [{id: POL-09251, po_id: PO-0925, item_id: I-1923, quantity: 100, unit_price: 9.0, received_qty: 0, returned_qty: 0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: hannah.weiss@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0925}}
          - {tool: record_goods_receipt, parameters: {po_id: PO-0925, received_by: E-025, lines: [{po_line_id: POL-09251, quantity: 100}]}}
    """
    check_receipt(x, "PO-0925", {"POL-09251": 100}, "received", {"ST-0923": 130})


def test_receive_refusing_damaged_units(x: TestContext, judge: Judge):
    """!
    query: 50 beaker sets came in on PO-0926 but 4 of them are smashed in the box. What do I book?
    user_context: >-
      You are Ivan Petrov, email ivan.petrov@brightwater.example, warehouse lead at the West Depot.
      50 beaker sets arrived on PO-0926; 4 are visibly broken and you refused them at the dock.
    tags: [write, receipt, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1924, name: Beaker set 250 ml, category: lab, unit: set, standard_cost: 46}]
          inventory: [{id: ST-0924, warehouse_id: WH-03, item_id: I-1924, on_hand: 10, reorder_point: 15}]
          requisitions: [{id: PR-0926, requester_id: E-013, cost_centre_id: CC-210, supplier_id: S-108, justification: Lab glassware, total: 2300, status: ordered, created_on: "2025-09-01", approver_id: E-003, decided_on: "2025-09-02"}]
          purchase_orders: [{id: PO-0926, requisition_id: PR-0926, supplier_id: S-108, warehouse_id: WH-03, total: 2300, status: open, issued_on: "2025-09-03"}]
          po_lines: [{id: POL-09261, po_id: PO-0926, item_id: I-1924, quantity: 50, unit_price: 46.0, received_qty: 0, returned_qty: 0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ivan.petrov@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0926}}
          - {tool: record_goods_receipt, parameters: {po_id: PO-0926, received_by: E-026, lines: [{po_line_id: POL-09261, quantity: 46}]}}
    """
    check_receipt(x, "PO-0926", {"POL-09261": 46}, "partially_received", {"ST-0924": 56})
