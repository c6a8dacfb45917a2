"""Procurement tasks: supplier invoices (three-way match of PO, receipt and invoice, early-payment
discounts, duplicates, a blocked supplier) and a supplier's status question."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.procurement.checks import ask_judge, fx_of, held, only, paid

"""!
scenario: procurement
tags: ["domain:procurement", payables]
"""


def check_paid(x: TestContext, invoice_id: str, amount: float) -> None:
    fx = fx_of(x)
    only(fx, paid(fx, invoice_id, amount))


def check_held(x: TestContext, invoice_id: str) -> None:
    fx = fx_of(x)
    only(fx, held(fx, invoice_id))


def test_pay_matching_invoice(x: TestContext, judge: Judge):
    """!
    query: Please pay invoice VI-0930 from Midwest Fasteners.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0930 paid if it can be.
    tags: [write, three-way-match, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0930, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-102, justification: Supplies, total: 720, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0930, requisition_id: PR-0930, supplier_id: S-102, warehouse_id: WH-01, total: 720, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09301, po_id: PO-0930, item_id: I-1001, quantity: 40, unit_price: 18.0, received_qty: 40, returned_qty: 0}
          goods_receipts: [{id: GR-0930, po_id: PO-0930, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09301, receipt_id: GR-0930, po_line_id: POL-09301, quantity: 40}
          supplier_invoices:
          - {id: VI-0930, supplier_id: S-102, po_id: PO-0930, invoice_number: "102-77001", invoice_date: "2025-09-09", amount: 720, status: received}
          invoice_lines:
          - {id: VIL-09301, invoice_id: VI-0930, po_line_id: POL-09301, quantity: 40, unit_price: 18.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0930}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0930}}
          - {tool: get_supplier, parameters: {supplier_id: S-102}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0930, amount: 720}}
    """
    check_paid(x, "VI-0930", 720.0)


def test_pay_with_early_discount(x: TestContext, judge: Judge):
    """!
    query: Apex sent invoice VI-0931. Can you pay it today?
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0931 paid today if it can be.
    tags: [write, three-way-match, discount, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0931, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-101, justification: Supplies, total: 4120, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0931, requisition_id: PR-0931, supplier_id: S-101, warehouse_id: WH-01, total: 4120, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09311, po_id: PO-0931, item_id: I-1004, quantity: 50, unit_price: 41.0, received_qty: 50, returned_qty: 0}
          - {id: POL-09312, po_id: PO-0931, item_id: I-1006, quantity: 36, unit_price: 57.5, received_qty: 36, returned_qty: 0}
          goods_receipts: [{id: GR-0931, po_id: PO-0931, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09311, receipt_id: GR-0931, po_line_id: POL-09311, quantity: 50}
          - {id: GRL-09312, receipt_id: GR-0931, po_line_id: POL-09312, quantity: 36}
          supplier_invoices:
          - {id: VI-0931, supplier_id: S-101, po_id: PO-0931, invoice_number: "101-30417", invoice_date: "2025-09-08", amount: 4120, status: received}
          invoice_lines:
          - {id: VIL-09311, invoice_id: VI-0931, po_line_id: POL-09311, quantity: 50, unit_price: 41.0}
          - {id: VIL-09312, invoice_id: VI-0931, po_line_id: POL-09312, quantity: 36, unit_price: 57.5}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0931}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0931}}
          - {tool: get_supplier, parameters: {supplier_id: S-101}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0931, amount: 4037.6}}
    """
    check_paid(x, "VI-0931", 4037.60)


def test_discount_window_passed(x: TestContext, judge: Judge):
    """!
    query: Please pay the Voltline invoice VI-0932.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0932 paid today if it can be.
    tags: [write, three-way-match, discount, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0932, requester_id: E-016, cost_centre_id: CC-320, supplier_id: S-104, justification: Supplies, total: 1500, status: ordered, created_on: "2025-08-25", approver_id: E-004, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0932, requisition_id: PR-0932, supplier_id: S-104, warehouse_id: WH-04, total: 1500, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09321, po_id: PO-0932, item_id: I-1013, quantity: 12, unit_price: 125.0, received_qty: 12, returned_qty: 0}
          goods_receipts: [{id: GR-0932, po_id: PO-0932, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09321, receipt_id: GR-0932, po_line_id: POL-09321, quantity: 12}
          supplier_invoices:
          - {id: VI-0932, supplier_id: S-104, po_id: PO-0932, invoice_number: "104-88120", invoice_date: "2025-09-01", amount: 1500, status: received}
          invoice_lines:
          - {id: VIL-09321, invoice_id: VI-0932, po_line_id: POL-09321, quantity: 12, unit_price: 125.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0932}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0932}}
          - {tool: get_supplier, parameters: {supplier_id: S-104}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0932, amount: 1500}}
    """
    check_paid(x, "VI-0932", 1500.0)


def test_discount_on_last_day(x: TestContext, judge: Judge):
    """!
    query: Can you pay BoxRight's invoice VI-0933 now?
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0933 paid today if it can be.
    tags: [write, three-way-match, discount, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0933, requester_id: E-012, cost_centre_id: CC-130, supplier_id: S-114, justification: Supplies, total: 980, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0933, requisition_id: PR-0933, supplier_id: S-114, warehouse_id: WH-02, total: 980, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09331, po_id: PO-0933, item_id: I-1063, quantity: 20, unit_price: 49.0, received_qty: 20, returned_qty: 0}
          goods_receipts: [{id: GR-0933, po_id: PO-0933, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09331, receipt_id: GR-0933, po_line_id: POL-09331, quantity: 20}
          supplier_invoices:
          - {id: VI-0933, supplier_id: S-114, po_id: PO-0933, invoice_number: "114-20555", invoice_date: "2025-09-05", amount: 980, status: received}
          invoice_lines:
          - {id: VIL-09331, invoice_id: VI-0933, po_line_id: POL-09331, quantity: 20, unit_price: 49.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0933}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0933}}
          - {tool: get_supplier, parameters: {supplier_id: S-114}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0933, amount: 960.4}}
    """
    check_paid(x, "VI-0933", 960.40)


def test_invoice_quantity_above_receipt_trap(x: TestContext, judge: Judge):
    """!
    query: Circuit Depot is chasing invoice VI-0934. Please pay it today.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0934 paid today; you have not checked it yourself.
    tags: [write, trap, three-way-match, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0934, requester_id: E-016, cost_centre_id: CC-320, supplier_id: S-105, justification: Supplies, total: 1400, status: ordered, created_on: "2025-08-25", approver_id: E-004, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0934, requisition_id: PR-0934, supplier_id: S-105, warehouse_id: WH-04, total: 1400, status: partially_received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09341, po_id: PO-0934, item_id: I-1011, quantity: 100, unit_price: 14.0, received_qty: 80, returned_qty: 0}
          goods_receipts: [{id: GR-0934, po_id: PO-0934, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09341, receipt_id: GR-0934, po_line_id: POL-09341, quantity: 80}
          supplier_invoices:
          - {id: VI-0934, supplier_id: S-105, po_id: PO-0934, invoice_number: "105-61002", invoice_date: "2025-09-10", amount: 1400, status: received}
          invoice_lines:
          - {id: VIL-09341, invoice_id: VI-0934, po_line_id: POL-09341, quantity: 100, unit_price: 14.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0934}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0934}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0934, reason: "Billed 100, received 80"}}
    """
    check_held(x, "VI-0934")


def test_invoice_price_above_po_trap(x: TestContext, judge: Judge):
    """!
    query: Pay Hydraulix invoice VI-0935, please.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0935 paid; you have not checked it yourself.
    tags: [write, trap, three-way-match, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0935, requester_id: E-011, cost_centre_id: CC-120, supplier_id: S-116, justification: Supplies, total: 360, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0935, requisition_id: PR-0935, supplier_id: S-116, warehouse_id: WH-01, total: 360, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09351, po_id: PO-0935, item_id: I-1008, quantity: 30, unit_price: 12.0, received_qty: 30, returned_qty: 0}
          goods_receipts: [{id: GR-0935, po_id: PO-0935, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09351, receipt_id: GR-0935, po_line_id: POL-09351, quantity: 30}
          supplier_invoices:
          - {id: VI-0935, supplier_id: S-116, po_id: PO-0935, invoice_number: "116-00931", invoice_date: "2025-09-10", amount: 372, status: received}
          invoice_lines:
          - {id: VIL-09351, invoice_id: VI-0935, po_line_id: POL-09351, quantity: 30, unit_price: 12.4}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0935}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0935}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0935, reason: "Unit price 12.40 above PO price 12.00"}}
    """
    check_held(x, "VI-0935")


def test_invoice_amount_not_sum_of_lines_trap(x: TestContext, judge: Judge):
    """!
    query: Please pay Precision Instruments' invoice VI-0936.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0936 paid; you have not checked it yourself.
    tags: [write, trap, three-way-match, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0936, requester_id: E-013, cost_centre_id: CC-210, supplier_id: S-109, justification: Supplies, total: 2450, status: ordered, created_on: "2025-08-25", approver_id: E-003, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0936, requisition_id: PR-0936, supplier_id: S-109, warehouse_id: WH-03, total: 2450, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09361, po_id: PO-0936, item_id: I-1032, quantity: 50, unit_price: 49.0, received_qty: 50, returned_qty: 0}
          goods_receipts: [{id: GR-0936, po_id: PO-0936, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09361, receipt_id: GR-0936, po_line_id: POL-09361, quantity: 50}
          supplier_invoices:
          - {id: VI-0936, supplier_id: S-109, po_id: PO-0936, invoice_number: "109-44810", invoice_date: "2025-09-10", amount: 2540, status: received}
          invoice_lines:
          - {id: VIL-09361, invoice_id: VI-0936, po_line_id: POL-09361, quantity: 50, unit_price: 49.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0936}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0936}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0936, reason: "Amount 2540.00 but lines sum to 2450.00"}}
    """
    check_held(x, "VI-0936")


def test_invoice_after_a_return(x: TestContext, judge: Judge):
    """!
    query: Midwest Fasteners billed us for the bearings on VI-0937. Can you pay it?
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0937 paid if it can be.
    tags: [write, three-way-match, return, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0937, requester_id: E-011, cost_centre_id: CC-120, supplier_id: S-102, justification: Supplies, total: 300, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0937, requisition_id: PR-0937, supplier_id: S-102, warehouse_id: WH-01, total: 300, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09371, po_id: PO-0937, item_id: I-1002, quantity: 50, unit_price: 6.0, received_qty: 50, returned_qty: 5}
          goods_receipts: [{id: GR-0937, po_id: PO-0937, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09371, receipt_id: GR-0937, po_line_id: POL-09371, quantity: 50}
          supplier_invoices:
          - {id: VI-0937, supplier_id: S-102, po_id: PO-0937, invoice_number: "102-77140", invoice_date: "2025-09-11", amount: 270, status: received}
          invoice_lines:
          - {id: VIL-09371, invoice_id: VI-0937, po_line_id: POL-09371, quantity: 45, unit_price: 6.0}
          supplier_returns:
          - {id: RTV-0937, po_line_id: POL-09371, quantity: 5, reason: Damaged in transit, credit_amount: 30, created_on: "2025-09-09"}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0937}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0937}}
          - {tool: get_supplier, parameters: {supplier_id: S-102}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0937, amount: 270}}
    """
    check_paid(x, "VI-0937", 270.0)


def test_duplicate_invoice_trap(x: TestContext, judge: Judge):
    """!
    query: OfficeHub's invoice VI-0939 came in. Please pay it.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0939 paid; you have not checked it yourself.
    tags: [write, trap, three-way-match, duplicate, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0938, requester_id: E-017, cost_centre_id: CC-330, supplier_id: S-112, justification: Supplies, total: 432, status: ordered, created_on: "2025-08-25", approver_id: E-004, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0938, requisition_id: PR-0938, supplier_id: S-112, warehouse_id: WH-02, total: 432, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09381, po_id: PO-0938, item_id: I-1052, quantity: 6, unit_price: 72.0, received_qty: 6, returned_qty: 0}
          goods_receipts: [{id: GR-0938, po_id: PO-0938, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09381, receipt_id: GR-0938, po_line_id: POL-09381, quantity: 6}
          supplier_invoices:
          - {id: VI-0938, supplier_id: S-112, po_id: PO-0938, invoice_number: "112-50123", invoice_date: "2025-09-01", amount: 432, status: paid}
          - {id: VI-0939, supplier_id: S-112, po_id: PO-0938, invoice_number: "112-50123", invoice_date: "2025-09-12", amount: 432, status: received}
          invoice_lines:
          - {id: VIL-09381, invoice_id: VI-0938, po_line_id: POL-09381, quantity: 6, unit_price: 72.0}
          - {id: VIL-09391, invoice_id: VI-0939, po_line_id: POL-09381, quantity: 6, unit_price: 72.0}
          payments:
          - {id: PAY-0938, invoice_id: VI-0938, amount: 432, paid_on: "2025-09-05", account: "****5521"}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0939}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0938}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0939, reason: "Duplicate of VI-0938, already paid"}}
    """
    check_held(x, "VI-0939")


def test_blocked_supplier_invoice_trap(x: TestContext, judge: Judge):
    """!
    query: ShieldPro's invoice VI-0940 matches the PO. Please pay it.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0940 paid; you have not checked the supplier's status.
    tags: [write, trap, blocked-supplier, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0940, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-107, justification: Supplies, total: 340, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0940, requisition_id: PR-0940, supplier_id: S-107, warehouse_id: WH-01, total: 340, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09401, po_id: PO-0940, item_id: I-1025, quantity: 20, unit_price: 17.0, received_qty: 20, returned_qty: 0}
          goods_receipts: [{id: GR-0940, po_id: PO-0940, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09401, receipt_id: GR-0940, po_line_id: POL-09401, quantity: 20}
          supplier_invoices:
          - {id: VI-0940, supplier_id: S-107, po_id: PO-0940, invoice_number: "107-10009", invoice_date: "2025-09-10", amount: 340, status: received}
          invoice_lines:
          - {id: VIL-09401, invoice_id: VI-0940, po_line_id: POL-09401, quantity: 20, unit_price: 17.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0940}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0940}}
          - {tool: get_supplier, parameters: {supplier_id: S-107}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0940, reason: "Supplier blocked"}}
    """
    check_held(x, "VI-0940")


def test_open_invoices_on_po(x: TestContext, judge: Judge):
    """!
    query: >-
      Please sort out the open ByteWorks invoices on PO-0941: pay whatever can be paid.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want the
      open invoices on PO-0941 handled: paid where allowed.
    tags: [write, trap, three-way-match, discount, two-paths, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0941, requester_id: E-015, cost_centre_id: CC-310, supplier_id: S-110, justification: Supplies, total: 3450, status: ordered, created_on: "2025-08-25", approver_id: E-004, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0941, requisition_id: PR-0941, supplier_id: S-110, warehouse_id: WH-01, total: 3450, status: partially_received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09411, po_id: PO-0941, item_id: I-1042, quantity: 10, unit_price: 185.0, received_qty: 10, returned_qty: 0}
          - {id: POL-09412, po_id: PO-0941, item_id: I-1043, quantity: 10, unit_price: 160.0, received_qty: 6, returned_qty: 0}
          goods_receipts: [{id: GR-0941, po_id: PO-0941, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09411, receipt_id: GR-0941, po_line_id: POL-09411, quantity: 10}
          - {id: GRL-09412, receipt_id: GR-0941, po_line_id: POL-09412, quantity: 6}
          supplier_invoices:
          - {id: VI-0941, supplier_id: S-110, po_id: PO-0941, invoice_number: "110-70011", invoice_date: "2025-09-11", amount: 1850, status: received}
          - {id: VI-0942, supplier_id: S-110, po_id: PO-0941, invoice_number: "110-70012", invoice_date: "2025-09-12", amount: 1600, status: received}
          invoice_lines:
          - {id: VIL-09411, invoice_id: VI-0941, po_line_id: POL-09411, quantity: 10, unit_price: 185.0}
          - {id: VIL-09421, invoice_id: VI-0942, po_line_id: POL-09412, quantity: 10, unit_price: 160.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: list_supplier_invoices, parameters: {po_id: PO-0941}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0941}}
          - {tool: get_supplier, parameters: {supplier_id: S-110}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0941, amount: 1831.5}}
          - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0942, reason: "Billed 10, received 6"}}
          alternatives:
          - tool_interactions:
            - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
            - {tool: list_supplier_invoices, parameters: {po_id: PO-0941}}
            - {tool: get_purchase_order, parameters: {po_id: PO-0941}}
            - {tool: hold_supplier_invoice, parameters: {invoice_id: VI-0942, reason: "Quantity above receipt"}}
            - {tool: get_supplier, parameters: {supplier_id: S-110}}
            - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0941, amount: 1831.5}}
    """
    fx = fx_of(x)
    only(fx, [*paid(fx, "VI-0941", 1831.50), *held(fx, "VI-0942")])


def test_second_partial_invoice(x: TestContext, judge: Judge):
    """!
    query: BoxRight's second invoice for the pallets, VI-0944, came in. Please pay it.
    user_context: >-
      You are Ben Adler, email ben.adler@brightwater.example, accounts payable clerk. You want
      invoice VI-0944 paid today if it can be.
    tags: [write, three-way-match, discount, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0943, requester_id: E-012, cost_centre_id: CC-130, supplier_id: S-114, justification: Supplies, total: 1500, status: ordered, created_on: "2025-08-25", approver_id: E-002, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0943, requisition_id: PR-0943, supplier_id: S-114, warehouse_id: WH-02, total: 1500, status: received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09431, po_id: PO-0943, item_id: I-1064, quantity: 100, unit_price: 15.0, received_qty: 100, returned_qty: 0}
          goods_receipts: [{id: GR-0943, po_id: PO-0943, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09431, receipt_id: GR-0943, po_line_id: POL-09431, quantity: 100}
          supplier_invoices:
          - {id: VI-0943, supplier_id: S-114, po_id: PO-0943, invoice_number: "114-20601", invoice_date: "2025-09-02", amount: 900, status: paid}
          - {id: VI-0944, supplier_id: S-114, po_id: PO-0943, invoice_number: "114-20644", invoice_date: "2025-09-12", amount: 600, status: received}
          invoice_lines:
          - {id: VIL-09431, invoice_id: VI-0943, po_line_id: POL-09431, quantity: 60, unit_price: 15.0}
          - {id: VIL-09441, invoice_id: VI-0944, po_line_id: POL-09431, quantity: 40, unit_price: 15.0}
          payments:
          - {id: PAY-0943, invoice_id: VI-0943, amount: 882, paid_on: "2025-09-04", account: "****1180"}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: ben.adler@brightwater.example}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0944}}
          - {tool: get_purchase_order, parameters: {po_id: PO-0943}}
          - {tool: get_supplier, parameters: {supplier_id: S-114}}
          - {tool: pay_supplier_invoice, parameters: {invoice_id: VI-0944, amount: 588}}
    """
    check_paid(x, "VI-0944", 588.0)


def test_supplier_asks_invoice_status(x: TestContext, judge: Judge):
    """!
    query: Hi, this is Circuit Depot accounts. When will our invoice 105-66120 be paid?
    user_context: >-
      You are Priya Shah from Circuit Depot (supplier S-105) accounts receivable, email
      ar@circuit.example. You want to know the status of your invoice 105-66120. You do not know
      our internal ids.
    tags: [lookup, three-way-match, judge, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0945, requester_id: E-016, cost_centre_id: CC-320, supplier_id: S-105, justification: Supplies, total: 1400, status: ordered, created_on: "2025-08-25", approver_id: E-004, decided_on: "2025-08-26"}]
          purchase_orders: [{id: PO-0945, requisition_id: PR-0945, supplier_id: S-105, warehouse_id: WH-04, total: 1400, status: partially_received, issued_on: "2025-08-27"}]
          po_lines:
          - {id: POL-09451, po_id: PO-0945, item_id: I-1011, quantity: 100, unit_price: 14.0, received_qty: 80, returned_qty: 0}
          goods_receipts: [{id: GR-0945, po_id: PO-0945, received_on: "2025-09-08", received_by: E-024}]
          receipt_lines:
          - {id: GRL-09451, receipt_id: GR-0945, po_line_id: POL-09451, quantity: 80}
          supplier_invoices:
          - {id: VI-0945, supplier_id: S-105, po_id: PO-0945, invoice_number: "105-66120", invoice_date: "2025-09-03", amount: 1400, status: on_hold, hold_reason: "Billed 100, received 80"}
          invoice_lines:
          - {id: VIL-09451, invoice_id: VI-0945, po_line_id: POL-09451, quantity: 100, unit_price: 14.0}
        golden_test_case:
          tool_interactions:
          - {tool: list_supplier_invoices, parameters: {supplier_id: S-105}}
          - {tool: get_supplier_invoice, parameters: {invoice_id: VI-0945}}
        rubrics_yesno:
        - Does the assistant tell the caller that invoice 105-66120 is on hold and has not been paid?
    """
    only(fx_of(x))
    ask_judge(x, judge)
