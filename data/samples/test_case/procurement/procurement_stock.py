"""Procurement tasks: stock transfers (the reorder point, choosing a source), returns to supplier
within the return window, write-offs, and a stock look-up."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.procurement.checks import (
    ask_judge, field, fx_of, money, new_one, new_requisition, none_new, on_hand, only,
)

"""!
scenario: procurement
tags: ["domain:procurement", stock]
"""


def check_transfer(x: TestContext, item_id: str, source: str, target: str, qty: int, requested_by: str,
                   stock: dict) -> None:
    """One transfer of the item, from the right source, and the two stock levels after it."""
    fx = fx_of(x)
    tr = new_one(fx, "transfers", f"transfer of {item_id}", item_id=item_id)
    assert (tr["from_warehouse_id"], tr["to_warehouse_id"]) == (source, target), \
        f"the transfer should go {source} -> {target}, it goes {tr['from_warehouse_id']} -> {tr['to_warehouse_id']}"
    assert tr["quantity"] == qty, f"the transfer should move {qty}, it moves {tr['quantity']}"
    assert tr["requested_by"] == requested_by, f"the transfer should name {requested_by} as requester"
    only(fx, [f"transfers[{tr['id']}]", *(on_hand(fx, s, q) for s, q in stock.items())])


def check_return(x: TestContext, po_line_id: str, qty: int, credit: float, stock_id: str, left: int) -> None:
    """One return on the PO line: quantity, credit, the line's returned quantity, stock after it."""
    fx = fx_of(x)
    rtv = new_one(fx, "supplier_returns", f"return on {po_line_id}", po_line_id=po_line_id)
    assert rtv["quantity"] == qty, f"return {qty} units, not {rtv['quantity']}"
    assert money(rtv["credit_amount"], credit), f"the credit should be {credit:.2f}, it is {rtv['credit_amount']}"
    assert field(fx, "po_lines", po_line_id, "returned_qty") == qty
    only(fx, [f"supplier_returns[{rtv['id']}]", f"po_lines[{po_line_id}].returned_qty", on_hand(fx, stock_id, left)])


def check_write_off(x: TestContext, warehouse_id: str, item_id: str, qty: int, stock_id: str, left: int) -> None:
    fx = fx_of(x)
    none_new(fx, "supplier_returns")
    wo = new_one(fx, "write_offs", f"write-off of {item_id}", item_id=item_id)
    assert (wo["warehouse_id"], wo["quantity"]) == (warehouse_id, qty), \
        f"write off {qty} at {warehouse_id}, not {wo['quantity']} at {wo['warehouse_id']}"
    only(fx, [f"write_offs[{wo['id']}]", on_hand(fx, stock_id, left)])


# ---------------------------------------------------------------------------- transfers

def test_transfer_named_source(x: TestContext, judge: Judge):
    """!
    query: Please move 30 stretch wrap rolls (I-1950) from the Central Warehouse to East Depot.
    user_context: >-
      You are Aisha Rahman, email aisha.rahman@brightwater.example, Logistics Manager. You want 30
      stretch wrap rolls, item I-1950, moved from the Central Warehouse (WH-01) to East Depot (WH-02).
    tags: [write, transfer, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1950, name: Stretch wrap roll 18 in, category: packaging, unit: roll, standard_cost: 19}]
          inventory:
          - {id: ST-0950, warehouse_id: WH-01, item_id: I-1950, on_hand: 80, reorder_point: 40}
          - {id: ST-0951, warehouse_id: WH-02, item_id: I-1950, on_hand: 5, reorder_point: 20}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: aisha.rahman@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1950}}
          - {tool: transfer_stock, parameters: {item_id: I-1950, from_warehouse_id: WH-01, to_warehouse_id: WH-02, quantity: 30, requested_by: E-012}}
    """
    check_transfer(x, "I-1950", "WH-01", "WH-02", 30, "E-012", {"ST-0950": 50, "ST-0951": 35})


def test_transfer_below_reorder_point_trap(x: TestContext, judge: Judge):
    """!
    query: Move 50 boxes of packing tape (I-1951) from Central to East Depot, please.
    user_context: >-
      You are Aisha Rahman, email aisha.rahman@brightwater.example, Logistics Manager. East Depot
      (WH-02) needs 50 cases of packing tape, item I-1951. You suggested Central (WH-01) as the
      source but any warehouse the policy allows is fine.
    tags: [write, trap, transfer, reorder-point, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1951, name: Packing tape clear (case of 36), category: packaging, unit: case, standard_cost: 48}]
          inventory:
          - {id: ST-0952, warehouse_id: WH-01, item_id: I-1951, on_hand: 70, reorder_point: 40}
          - {id: ST-0953, warehouse_id: WH-02, item_id: I-1951, on_hand: 0, reorder_point: 20}
          - {id: ST-0954, warehouse_id: WH-03, item_id: I-1951, on_hand: 120, reorder_point: 50}
          - {id: ST-0955, warehouse_id: WH-04, item_id: I-1951, on_hand: 90, reorder_point: 20}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: aisha.rahman@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1951}}
          - {tool: transfer_stock, parameters: {item_id: I-1951, from_warehouse_id: WH-03, to_warehouse_id: WH-02, quantity: 50, requested_by: E-012}}
    """
    check_transfer(x, "I-1951", "WH-03", "WH-02", 50, "E-012", {"ST-0954": 70, "ST-0953": 50})


def test_transfer_best_source(x: TestContext, judge: Judge):
    """!
    query: South Depot needs 25 boxes of ear plugs (I-1952). Pull them from wherever makes sense.
    user_context: >-
      You are Lily Chen, email lily.chen@brightwater.example, warehouse lead at the South Depot
      (WH-04). You need 25 boxes of ear plugs, item I-1952, from any warehouse.
    tags: [write, transfer, reorder-point, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1952, name: Foam ear plugs (box of 200), category: safety, unit: box, standard_cost: 24}]
          inventory:
          - {id: ST-0956, warehouse_id: WH-01, item_id: I-1952, on_hand: 30, reorder_point: 20}
          - {id: ST-0957, warehouse_id: WH-02, item_id: I-1952, on_hand: 60, reorder_point: 20}
          - {id: ST-0958, warehouse_id: WH-03, item_id: I-1952, on_hand: 50, reorder_point: 15}
          - {id: ST-0959, warehouse_id: WH-04, item_id: I-1952, on_hand: 2, reorder_point: 10}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: lily.chen@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1952}}
          - {tool: transfer_stock, parameters: {item_id: I-1952, from_warehouse_id: WH-02, to_warehouse_id: WH-04, quantity: 25, requested_by: E-027}}
    """
    check_transfer(x, "I-1952", "WH-02", "WH-04", 25, "E-027", {"ST-0957": 35, "ST-0959": 27})


def test_no_source_covers_raise_requisition(x: TestContext, judge: Judge):
    """!
    query: East Depot needs 100 hi-vis vests (I-1953) for the new shift. Can you get them to us?
    user_context: >-
      You are Aisha Rahman, email aisha.rahman@brightwater.example, Logistics Manager (owner of
      cost centre CC-130, East Depot WH-02). You need 100 hi-vis vests, item I-1953. If no
      warehouse can spare them, you want them bought.
    tags: [write, transfer, reorder-point, supplier-rule, self-approval, two-paths, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1953, name: Hi-vis vest class 2, category: safety, unit: each, standard_cost: 6.8}]
          inventory:
          - {id: ST-0960, warehouse_id: WH-01, item_id: I-1953, on_hand: 60, reorder_point: 40}
          - {id: ST-0961, warehouse_id: WH-02, item_id: I-1953, on_hand: 0, reorder_point: 30}
          - {id: ST-0962, warehouse_id: WH-03, item_id: I-1953, on_hand: 50, reorder_point: 30}
          - {id: ST-0963, warehouse_id: WH-04, item_id: I-1953, on_hand: 45, reorder_point: 25}
          supplier_prices:
          - {id: SP-0960, supplier_id: S-106, item_id: I-1953, unit_price: 7.0}
          - {id: SP-0961, supplier_id: S-107, item_id: I-1953, unit_price: 6.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: aisha.rahman@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1953}}
          - {tool: get_item_prices, parameters: {item_id: I-1953}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-130}}
          - {tool: create_requisition, parameters: {requester_id: E-012, cost_centre_id: CC-130, supplier_id: S-106, lines: [{item_id: I-1953, quantity: 100}], justification: Vests for the new shift, approver_id: E-002}}
          alternatives:
          - tool_interactions:
            - {tool: find_employee, parameters: {query: aisha.rahman@brightwater.example}}
            - {tool: check_stock, parameters: {item_id: I-1953}}
            - {tool: get_item_prices, parameters: {item_id: I-1953}}
            - {tool: create_requisition, parameters: {requester_id: E-012, cost_centre_id: CC-130, supplier_id: S-106, lines: [{item_id: I-1953, quantity: 100}], justification: Hi-vis vests}}
            - {tool: get_cost_centre, parameters: {cost_centre_id: CC-130}}
            - {tool: submit_requisition, parameters: {requisition_id: PR-0481, approver_id: E-002}}
    """
    fx = fx_of(x)
    none_new(fx, "transfers")
    only(fx, new_requisition(fx, "E-012", cost_centre_id="CC-130", supplier_id="S-106", lines={"I-1953": 100},
                             approver_id="E-002"))


def test_stock_available_lookup(x: TestContext, judge: Judge):
    """!
    query: How many pH buffer bottles (I-1959) could I take from West Depot without going under its reorder point?
    user_context: >-
      You are Nina Kowalski, email nina.kowalski@brightwater.example, Quality Manager. You only want
      to know the number; do not move anything yet.
    tags: [lookup, reorder-point, judge, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1959, name: pH buffer solution 7.00 500 ml, category: lab, unit: bottle, standard_cost: 15.5}]
          inventory:
          - {id: ST-0969, warehouse_id: WH-03, item_id: I-1959, on_hand: 75, reorder_point: 30}
          - {id: ST-0970, warehouse_id: WH-01, item_id: I-1959, on_hand: 12, reorder_point: 10}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: nina.kowalski@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1959}}
        rubrics_yesno:
        - Does the assistant say that 45 bottles can be taken from West Depot?
    """
    only(fx_of(x))
    ask_judge(x, judge)


# ---------------------------------------------------------------------------- returns and write-offs

def test_return_within_window(x: TestContext, judge: Judge):
    """!
    query: Six of the digital calipers we got on PO-0955 read wrong. Please send them back to the supplier.
    user_context: >-
      You are Nina Kowalski, email nina.kowalski@brightwater.example, Quality Manager. 6 calipers
      from PO-0955 (line POL-09551) are defective.
    tags: [write, return, return-window, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1955, name: Digital caliper 150 mm, category: lab, unit: each, standard_cost: 38}]
          inventory: [{id: ST-0965, warehouse_id: WH-03, item_id: I-1955, on_hand: 20, reorder_point: 5}]
          requisitions: [{id: PR-0955, requester_id: E-014, cost_centre_id: CC-220, supplier_id: S-108, justification: Calipers, total: 770, status: ordered, created_on: "2025-08-25", approver_id: E-003, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0955, requisition_id: PR-0955, supplier_id: S-108, warehouse_id: WH-03, total: 770, status: received, issued_on: "2025-08-27"}]
          po_lines: [{id: POL-09551, po_id: PO-0955, item_id: I-1955, quantity: 20, unit_price: 38.5, received_qty: 20, returned_qty: 0}]
          goods_receipts: [{id: GR-0955, po_id: PO-0955, received_on: "2025-09-01", received_by: E-026}]
          receipt_lines: [{id: GRL-09551, receipt_id: GR-0955, po_line_id: POL-09551, quantity: 20}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: nina.kowalski@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0955}}
          - {tool: get_supplier, parameters: {supplier_id: S-108}}
          - {tool: create_supplier_return, parameters: {po_line_id: POL-09551, quantity: 6, reason: Calipers read wrong}}
    """
    check_return(x, "POL-09551", 6, 231.0, "ST-0965", 14)


def test_return_window_passed_write_off(x: TestContext, judge: Judge):
    """!
    query: Six torque wrenches from PO-0956 turned out defective. Send them back to Midwest Fasteners.
    user_context: >-
      You are Dana Reyes, email dana.reyes@brightwater.example, Maintenance Manager. 6 torque
      wrenches from PO-0956 (line POL-09561) are defective. If they cannot go back, deal with them
      the way the policy says.
    tags: [write, trap, return, return-window, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1956, name: Torque wrench 1/2 in drive, category: mro, unit: each, standard_cost: 85}]
          inventory: [{id: ST-0966, warehouse_id: WH-01, item_id: I-1956, on_hand: 15, reorder_point: 4}]
          requisitions: [{id: PR-0956, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-102, justification: Wrenches, total: 1360, status: ordered, created_on: "2025-08-15", approver_id: E-002, decided_on: "2025-08-16"}]
          purchase_orders: [{id: PO-0956, requisition_id: PR-0956, supplier_id: S-102, warehouse_id: WH-01, total: 1360, status: received, issued_on: "2025-08-18"}]
          po_lines: [{id: POL-09561, po_id: PO-0956, item_id: I-1956, quantity: 16, unit_price: 85.0, received_qty: 16, returned_qty: 0}]
          goods_receipts: [{id: GR-0956, po_id: PO-0956, received_on: "2025-08-25", received_by: E-024}]
          receipt_lines: [{id: GRL-09561, receipt_id: GR-0956, po_line_id: POL-09561, quantity: 16}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: dana.reyes@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0956}}
          - {tool: get_supplier, parameters: {supplier_id: S-102}}
          - {tool: write_off_stock, parameters: {warehouse_id: WH-01, item_id: I-1956, quantity: 6, reason: "Defective, return window passed"}}
    """
    check_write_off(x, "WH-01", "I-1956", 6, "ST-0966", 9)


def test_return_counts_from_latest_receipt(x: TestContext, judge: Judge):
    """!
    query: 8 of the filter cartridges on PO-0957 are the wrong size. Please return them to Apex.
    user_context: >-
      You are Samuel Park, email samuel.park@brightwater.example, Production Manager. 8 filter
      cartridges from PO-0957 (line POL-09571) are the wrong size.
    tags: [write, return, return-window, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1957, name: Machine filter cartridge 10 in, category: mro, unit: each, standard_cost: 23}]
          inventory: [{id: ST-0967, warehouse_id: WH-01, item_id: I-1957, on_hand: 44, reorder_point: 10}]
          requisitions: [{id: PR-0957, requester_id: E-011, cost_centre_id: CC-120, supplier_id: S-101, justification: Filters, total: 1175, status: ordered, created_on: "2025-08-01", approver_id: E-002, decided_on: "2025-08-01"}]
          purchase_orders: [{id: PO-0957, requisition_id: PR-0957, supplier_id: S-101, warehouse_id: WH-01, total: 1175, status: received, issued_on: "2025-08-04"}]
          po_lines: [{id: POL-09571, po_id: PO-0957, item_id: I-1957, quantity: 50, unit_price: 23.5, received_qty: 50, returned_qty: 0}]
          goods_receipts:
          - {id: GR-0957, po_id: PO-0957, received_on: "2025-08-10", received_by: E-024}
          - {id: GR-0958, po_id: PO-0957, received_on: "2025-09-02", received_by: E-024}
          receipt_lines:
          - {id: GRL-09571, receipt_id: GR-0957, po_line_id: POL-09571, quantity: 30}
          - {id: GRL-09572, receipt_id: GR-0958, po_line_id: POL-09571, quantity: 20}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: samuel.park@brightwater.example}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0957}}
          - {tool: get_supplier, parameters: {supplier_id: S-101}}
          - {tool: create_supplier_return, parameters: {po_line_id: POL-09571, quantity: 8, reason: Wrong size}}
    """
    check_return(x, "POL-09571", 8, 188.0, "ST-0967", 36)


def test_write_off_damaged_stock(x: TestContext, judge: Judge):
    """!
    query: A forklift knocked a pallet over here, three of the 24 inch monitors (I-1958) are wrecked. Please write them off.
    user_context: >-
      You are Hannah Weiss, email hannah.weiss@brightwater.example, warehouse lead at East Depot
      (WH-02). 3 monitors, item I-1958, were destroyed in the warehouse by a forklift.
    tags: [write, write-off, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1958, name: 24 in monitor IPS, category: it, unit: each, standard_cost: 189}]
          inventory: [{id: ST-0968, warehouse_id: WH-02, item_id: I-1958, on_hand: 12, reorder_point: 5}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: hannah.weiss@brightwater.example}}
          - {tool: check_stock, parameters: {item_id: I-1958}}
          - {tool: write_off_stock, parameters: {warehouse_id: WH-02, item_id: I-1958, quantity: 3, reason: Forklift accident}}
    """
    check_write_off(x, "WH-02", "I-1958", 3, "ST-0968", 9)
