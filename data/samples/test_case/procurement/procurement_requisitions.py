"""Procurement tasks: requisitions (approval levels by amount and cost centre, self-approval, split
orders, the 14-day combined total, the supplier rule) and approvers' decisions."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.procurement.checks import ask_judge, fx_of, new_requisition, none_new, only, routed

"""!
scenario: procurement
tags: ["domain:procurement", requisitions]
"""


def check_requisition(x: TestContext, requester: str, cc: str, supplier: str, lines: dict, approver: str) -> None:
    """One new requisition, for these lines, routed as the policy says; nothing else written."""
    fx = fx_of(x)
    only(fx, new_requisition(fx, requester, cost_centre_id=cc, supplier_id=supplier, lines=lines, approver_id=approver))


# ---------------------------------------------------------------------------- approval levels

def test_requisition_owner_level(x: TestContext, judge: Judge):
    """!
    query: I need 40 conveyor rollers (item I-1901) for the line 3 rebuild. Can you put the requisition in for me?
    user_context: >-
      You are Marta Silva, email marta.silva@brightwater.example, technician in Plant Maintenance
      (cost centre CC-110). You need 40 conveyor rollers, item I-1901, for the line 3 rebuild. You
      have no preferred supplier.
    tags: [write, approval-level, supplier-rule, two-paths, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-901, name: Marta Silva, email: marta.silva@brightwater.example, title: Technician, role: staff, cost_centre_id: CC-110, status: active}]
          items: [{id: I-1901, name: Conveyor roller 50 mm, category: mro, unit: each, standard_cost: 60}]
          supplier_prices:
          - {id: SP-0901, supplier_id: S-101, item_id: I-1901, unit_price: 62.5}
          - {id: SP-0902, supplier_id: S-116, item_id: I-1901, unit_price: 64.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: marta.silva@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1901}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-110}}
          - {tool: list_requisitions, parameters: {cost_centre_id: CC-110, supplier_id: S-101}}
          - {tool: create_requisition, parameters: {requester_id: E-901, cost_centre_id: CC-110, supplier_id: S-101, lines: [{item_id: I-1901, quantity: 40}], justification: Line 3 rebuild, approver_id: E-010}}
          alternatives:
          - tool_interactions:
            - {tool: find_employee, parameters: {query: marta.silva@brightwater.example}}
            - {tool: get_item_prices, parameters: {item_id: I-1901}}
            - {tool: create_requisition, parameters: {requester_id: E-901, cost_centre_id: CC-110, supplier_id: S-101, lines: [{item_id: I-1901, quantity: 40}], justification: Conveyor rollers for line 3}}
            - {tool: get_cost_centre, parameters: {cost_centre_id: CC-110}}
            - {tool: submit_requisition, parameters: {requisition_id: PR-0481, approver_id: E-010}}
    """
    check_requisition(x, "E-901", "CC-110", "S-101", {"I-1901": 40}, "E-010")


def test_requisition_director_level_lab_limit(x: TestContext, judge: Judge):
    """!
    query: Please raise a requisition for 3 spectrometer lamps, item I-1902. Ours are failing.
    user_context: >-
      You are Leo Fischer, email leo.fischer@brightwater.example, engineer in the R&D Lab (cost
      centre CC-210). You need 3 spectrometer lamps, item I-1902.
    tags: [write, approval-level, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-902, name: Leo Fischer, email: leo.fischer@brightwater.example, title: Engineer, role: staff, cost_centre_id: CC-210, status: active}]
          items: [{id: I-1902, name: Spectrometer deuterium lamp, category: lab, unit: each, standard_cost: 950}]
          supplier_prices:
          - {id: SP-0903, supplier_id: S-108, item_id: I-1902, unit_price: 980.0}
          - {id: SP-0904, supplier_id: S-109, item_id: I-1902, unit_price: 1010.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: leo.fischer@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1902}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-210}}
          - {tool: create_requisition, parameters: {requester_id: E-902, cost_centre_id: CC-210, supplier_id: S-108, lines: [{item_id: I-1902, quantity: 3}], justification: Replacement lamps, approver_id: E-003}}
    """
    check_requisition(x, "E-902", "CC-210", "S-108", {"I-1902": 3}, "E-003")


def test_requisition_cfo_level(x: TestContext, judge: Judge):
    """!
    query: I need 25 engineering laptops (I-1903) for the new CAD team, on the IT cost centre. Please raise it.
    user_context: >-
      You are Omar Haddad, email omar.haddad@brightwater.example, IT Manager (cost centre CC-310).
      You need 25 laptops, item I-1903, for the new CAD team.
    tags: [write, approval-level, computed, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1903, name: Laptop 15 in engineering, category: it, unit: each, standard_cost: 1100}]
          supplier_prices:
          - {id: SP-0905, supplier_id: S-110, item_id: I-1903, unit_price: 1090.0}
          - {id: SP-0906, supplier_id: S-111, item_id: I-1903, unit_price: 1125.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: omar.haddad@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1903}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-310}}
          - {tool: create_requisition, parameters: {requester_id: E-015, cost_centre_id: CC-310, supplier_id: S-110, lines: [{item_id: I-1903, quantity: 25}], justification: CAD team laptops, approver_id: E-001}}
    """
    check_requisition(x, "E-015", "CC-310", "S-110", {"I-1903": 25}, "E-001")


def test_requisition_exactly_at_limit(x: TestContext, judge: Judge):
    """!
    query: Hi, I need 120 brochure stands (I-1904) for the trade show. Can you order them?
    user_context: >-
      You are Rosa Ortiz, email rosa.ortiz@brightwater.example, coordinator in Sales (cost centre
      CC-330). You need 120 brochure stands, item I-1904.
    tags: [write, approval-level, supplier-rule, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-903, name: Rosa Ortiz, email: rosa.ortiz@brightwater.example, title: Coordinator, role: staff, cost_centre_id: CC-330, status: active}]
          items: [{id: I-1904, name: Brochure stand tabletop, category: office, unit: each, standard_cost: 24}]
          supplier_prices:
          - {id: SP-0907, supplier_id: S-112, item_id: I-1904, unit_price: 25.0}
          - {id: SP-0908, supplier_id: S-113, item_id: I-1904, unit_price: 22.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: rosa.ortiz@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1904}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-330}}
          - {tool: create_requisition, parameters: {requester_id: E-903, cost_centre_id: CC-330, supplier_id: S-112, lines: [{item_id: I-1904, quantity: 120}], justification: Trade show stands, approver_id: E-017}}
    """
    check_requisition(x, "E-903", "CC-330", "S-112", {"I-1904": 120}, "E-017")


# ---------------------------------------------------------------------------- self-approval

def test_own_requisition_goes_to_director(x: TestContext, judge: Judge):
    """!
    query: I need ten pails of gearbox oil (I-1905) for the press shop. Route it to me, I'll approve it right after.
    user_context: >-
      You are Dana Reyes, email dana.reyes@brightwater.example, Maintenance Manager and owner of
      cost centre CC-110. You need 10 pails of gearbox oil, item I-1905.
    tags: [write, trap, self-approval, approval-level, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          items: [{id: I-1905, name: Gearbox oil ISO 220 20 L, category: mro, unit: pail, standard_cost: 170}]
          supplier_prices:
          - {id: SP-0909, supplier_id: S-101, item_id: I-1905, unit_price: 180.0}
          - {id: SP-0910, supplier_id: S-116, item_id: I-1905, unit_price: 185.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: dana.reyes@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1905}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-110}}
          - {tool: create_requisition, parameters: {requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-101, lines: [{item_id: I-1905, quantity: 10}], justification: Press shop gearbox oil, approver_id: E-002}}
    """
    check_requisition(x, "E-010", "CC-110", "S-101", {"I-1905": 10}, "E-002")


def test_approve_own_requisition_trap(x: TestContext, judge: Judge):
    """!
    query: PR-0905 is sitting in my queue, it's my own grease order. Just approve it for me please.
    user_context: >-
      You are Dana Reyes, email dana.reyes@brightwater.example, Maintenance Manager. You raised
      PR-0905 yourself and it was routed to you. You want it approved today.
    tags: [write, trap, self-approval, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          requisitions: [{id: PR-0905, requester_id: E-010, cost_centre_id: CC-110, supplier_id: S-116, justification: Grease for the presses, total: 1200, status: pending_approval, created_on: "2025-09-12", approver_id: E-010}]
          requisition_lines: [{id: RL-09051, requisition_id: PR-0905, item_id: I-1005, quantity: 150, unit_price: 8.0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: dana.reyes@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0905}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-110}}
          - {tool: submit_requisition, parameters: {requisition_id: PR-0905, approver_id: E-002}}
    """
    fx = fx_of(x)
    only(fx, routed(fx, "PR-0905", "E-002"))


def test_approve_as_routed_approver(x: TestContext, judge: Judge):
    """!
    query: Please approve PR-0907 for me, the Production spares order. I've reviewed it.
    user_context: >-
      You are Victor Osei, email victor.osei@brightwater.example, Director of Operations. You
      reviewed PR-0907 and approve it.
    tags: [write, approval, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-904, name: Kira Hale, email: kira.hale@brightwater.example, title: Engineer, role: staff, cost_centre_id: CC-120, status: active}]
          requisitions: [{id: PR-0907, requester_id: E-904, cost_centre_id: CC-120, supplier_id: S-116, justification: Production spares, total: 7400, status: pending_approval, created_on: "2025-09-11", approver_id: E-002}]
          requisition_lines: [{id: RL-09071, requisition_id: PR-0907, item_id: I-1004, quantity: 185, unit_price: 40.0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: victor.osei@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0907}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-120}}
          - {tool: approve_requisition, parameters: {requisition_id: PR-0907, approver_id: E-002}}
    """
    fx = fx_of(x)
    only(fx, routed(fx, "PR-0907", "E-002", status="approved"))


def test_approve_above_own_limit_trap(x: TestContext, judge: Judge):
    """!
    query: Approve PR-0908 please, it landed with me and the line needs those bearings.
    user_context: >-
      You are Samuel Park, email samuel.park@brightwater.example, Production Manager and owner of
      cost centre CC-120. PR-0908 was routed to you and you want it approved.
    tags: [write, trap, approval-level, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-906, name: Umar Gupta, email: umar.gupta@brightwater.example, title: Technician, role: staff, cost_centre_id: CC-120, status: active}]
          requisitions: [{id: PR-0908, requester_id: E-906, cost_centre_id: CC-120, supplier_id: S-101, justification: Bearings for line 2, total: 6300, status: pending_approval, created_on: "2025-09-12", approver_id: E-011}]
          requisition_lines: [{id: RL-09081, requisition_id: PR-0908, item_id: I-1002, quantity: 1000, unit_price: 6.3}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: samuel.park@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0908}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-120}}
          - {tool: submit_requisition, parameters: {requisition_id: PR-0908, approver_id: E-002}}
    """
    fx = fx_of(x)
    only(fx, routed(fx, "PR-0908", "E-002"))


def test_reject_requisition(x: TestContext, judge: Judge):
    """!
    query: Reject PR-0915 please. It isn't budgeted this quarter.
    user_context: >-
      You are Mei Tanaka, email mei.tanaka@brightwater.example, Director of Engineering. PR-0915 is
      routed to you; reject it because it is not budgeted this quarter.
    tags: [write, approval, "difficulty:easy"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-914, name: Vera Quint, email: vera.quint@brightwater.example, title: Analyst, role: staff, cost_centre_id: CC-220, status: active}]
          requisitions: [{id: PR-0915, requester_id: E-914, cost_centre_id: CC-220, supplier_id: S-109, justification: Coordinate measuring arm, total: 14200, status: pending_approval, created_on: "2025-09-10", approver_id: E-003}]
          requisition_lines: [{id: RL-09151, requisition_id: PR-0915, item_id: I-1034, quantity: 355, unit_price: 40.0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: mei.tanaka@brightwater.example}}
          - {tool: get_requisition, parameters: {requisition_id: PR-0915}}
          - {tool: reject_requisition, parameters: {requisition_id: PR-0915, approver_id: E-003, reason: Not budgeted this quarter}}
    """
    fx = fx_of(x)
    only(fx, routed(fx, "PR-0915", "E-003", status="rejected"))


# ---------------------------------------------------------------------------- split orders

def test_split_order_request_trap(x: TestContext, judge: Judge):
    """!
    query: >-
      I need 400 plastic pallets (I-1906). Can you put them through as two requisitions of 200
      each? Then Aisha can sign both off herself and we skip the director.
    user_context: >-
      You are Zoe Brennan, email zoe.brennan@brightwater.example, coordinator in Logistics (cost
      centre CC-130). You need 400 plastic pallets, item I-1906, and would like them split in two.
      If told it cannot be split, accept one requisition for all 400.
    tags: [write, trap, split-order, approval-level, judge, two-paths, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-907, name: Zoe Brennan, email: zoe.brennan@brightwater.example, title: Coordinator, role: staff, cost_centre_id: CC-130, status: active}]
          items: [{id: I-1906, name: Plastic pallet 48 x 40, category: packaging, unit: each, standard_cost: 19}]
          supplier_prices:
          - {id: SP-0911, supplier_id: S-114, item_id: I-1906, unit_price: 20.0}
          - {id: SP-0912, supplier_id: S-115, item_id: I-1906, unit_price: 21.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: zoe.brennan@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1906}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-130}}
          - {tool: create_requisition, parameters: {requester_id: E-907, cost_centre_id: CC-130, supplier_id: S-114, lines: [{item_id: I-1906, quantity: 400}], justification: Pallets for the new racking, approver_id: E-002}}
          alternatives:
          - tool_interactions:
            - {tool: find_employee, parameters: {query: zoe.brennan@brightwater.example}}
            - {tool: search_procurement_policy, parameters: {query: split requisitions approval limit}}
            - {tool: get_item_prices, parameters: {item_id: I-1906}}
            - {tool: create_requisition, parameters: {requester_id: E-907, cost_centre_id: CC-130, supplier_id: S-114, lines: [{item_id: I-1906, quantity: 400}], justification: Plastic pallets}}
            - {tool: get_cost_centre, parameters: {cost_centre_id: CC-130}}
            - {tool: submit_requisition, parameters: {requisition_id: PR-0481, approver_id: E-002}}
        rubrics_yesno:
        - >-
          Does the assistant tell the caller that the purchase may not be split into smaller
          requisitions to stay under an approval limit?
    """
    check_requisition(x, "E-907", "CC-130", "S-114", {"I-1906": 400}, "E-002")
    ask_judge(x, judge)


def test_recent_requisition_counts_together(x: TestContext, judge: Judge):
    """!
    query: Please raise a requisition for 60 drive chains (I-1907) for Production.
    user_context: >-
      You are Hugo Lind, email hugo.lind@brightwater.example, technician in Production (cost
      centre CC-120). You need 60 drive chains, item I-1907.
    tags: [write, trap, split-order, approval-level, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          employees:
          - {id: E-908, name: Hugo Lind, email: hugo.lind@brightwater.example, title: Technician, role: staff, cost_centre_id: CC-120, status: active}
          - {id: E-909, name: Ines Varga, email: ines.varga@brightwater.example, title: Engineer, role: staff, cost_centre_id: CC-120, status: active}
          items: [{id: I-1907, name: Drive chain 60 x 10 ft, category: mro, unit: each, standard_cost: 44}]
          supplier_prices:
          - {id: SP-0913, supplier_id: S-116, item_id: I-1907, unit_price: 45.0}
          - {id: SP-0914, supplier_id: S-101, item_id: I-1907, unit_price: 47.0}
          requisitions: [{id: PR-0910, requester_id: E-909, cost_centre_id: CC-120, supplier_id: S-116, justification: V-belts, total: 3100, status: pending_approval, created_on: "2025-09-09", approver_id: E-011}]
          requisition_lines: [{id: RL-09101, requisition_id: PR-0910, item_id: I-1003, quantity: 100, unit_price: 31.0}]
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: hugo.lind@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1907}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-120}}
          - {tool: list_requisitions, parameters: {cost_centre_id: CC-120, supplier_id: S-116}}
          - {tool: create_requisition, parameters: {requester_id: E-908, cost_centre_id: CC-120, supplier_id: S-116, lines: [{item_id: I-1907, quantity: 60}], justification: Drive chains, approver_id: E-002}}
    """
    check_requisition(x, "E-908", "CC-120", "S-116", {"I-1907": 60}, "E-002")


def test_old_requisition_outside_window(x: TestContext, judge: Judge):
    """!
    query: Can you raise a requisition for 60 drive chains, item I-1911, on Production?
    user_context: >-
      You are Pablo Eriksen, email pablo.eriksen@brightwater.example, technician in Production
      (cost centre CC-120). You need 60 drive chains, item I-1911.
    tags: [write, split-order, approval-level, computed, "difficulty:hard"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-910, name: Pablo Eriksen, email: pablo.eriksen@brightwater.example, title: Technician, role: staff, cost_centre_id: CC-120, status: active}]
          items: [{id: I-1911, name: Drive chain 80 x 10 ft, category: mro, unit: each, standard_cost: 44}]
          supplier_prices:
          - {id: SP-0923, supplier_id: S-116, item_id: I-1911, unit_price: 45.0}
          - {id: SP-0924, supplier_id: S-101, item_id: I-1911, unit_price: 47.0}
          requisitions:
          - {id: PR-0911, requester_id: E-910, cost_centre_id: CC-120, supplier_id: S-116, justification: V-belts, total: 3100, status: approved, created_on: "2025-08-29", approver_id: E-011, decided_on: "2025-08-30"}
          - {id: PR-0912, requester_id: E-910, cost_centre_id: CC-120, supplier_id: S-101, justification: Bearings, total: 4000, status: pending_approval, created_on: "2025-09-10", approver_id: E-011}
          requisition_lines:
          - {id: RL-09111, requisition_id: PR-0911, item_id: I-1003, quantity: 100, unit_price: 31.0}
          - {id: RL-09121, requisition_id: PR-0912, item_id: I-1002, quantity: 625, unit_price: 6.4}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: pablo.eriksen@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1911}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-120}}
          - {tool: list_requisitions, parameters: {cost_centre_id: CC-120}}
          - {tool: create_requisition, parameters: {requester_id: E-910, cost_centre_id: CC-120, supplier_id: S-116, lines: [{item_id: I-1911, quantity: 60}], justification: Drive chains, approver_id: E-011}}
    """
    check_requisition(x, "E-910", "CC-120", "S-116", {"I-1911": 60}, "E-011")


# ---------------------------------------------------------------------------- the supplier rule

def test_supplier_rule_lowest_active(x: TestContext, judge: Judge):
    """!
    query: We need 200 LED tubes (I-1912) for the warehouse lighting. Please order from whoever is cheapest.
    user_context: >-
      You are Yusuf Walker, email yusuf.walker@brightwater.example, coordinator in Facilities (cost
      centre CC-320). You need 200 LED tubes, item I-1912.
    tags: [write, supplier-rule, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-911, name: Yusuf Walker, email: yusuf.walker@brightwater.example, title: Coordinator, role: staff, cost_centre_id: CC-320, status: active}]
          items: [{id: I-1912, name: LED tube T8 4 ft, category: electrical, unit: each, standard_cost: 4}]
          supplier_prices:
          - {id: SP-0915, supplier_id: S-104, item_id: I-1912, unit_price: 4.1}
          - {id: SP-0916, supplier_id: S-105, item_id: I-1912, unit_price: 3.95}
          - {id: SP-0917, supplier_id: S-103, item_id: I-1912, unit_price: 3.6}
          - {id: SP-0918, supplier_id: S-107, item_id: I-1912, unit_price: 3.4}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: yusuf.walker@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1912}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-320}}
          - {tool: create_requisition, parameters: {requester_id: E-911, cost_centre_id: CC-320, supplier_id: S-105, lines: [{item_id: I-1912, quantity: 200}], justification: Warehouse lighting, approver_id: E-016}}
    """
    check_requisition(x, "E-911", "CC-320", "S-105", {"I-1912": 200}, "E-016")


def test_supplier_rule_tie_goes_to_preferred(x: TestContext, judge: Judge):
    """!
    query: Please order 50 USB-C chargers (I-1913) for IT.
    user_context: >-
      You are Jade Novik, email jade.novik@brightwater.example, analyst in IT (cost centre CC-310).
      You need 50 USB-C chargers, item I-1913.
    tags: [write, supplier-rule, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-912, name: Jade Novik, email: jade.novik@brightwater.example, title: Analyst, role: staff, cost_centre_id: CC-310, status: active}]
          items: [{id: I-1913, name: USB-C charger 65 W, category: it, unit: each, standard_cost: 11}]
          supplier_prices:
          - {id: SP-0919, supplier_id: S-111, item_id: I-1913, unit_price: 12.0}
          - {id: SP-0920, supplier_id: S-110, item_id: I-1913, unit_price: 12.0}
          - {id: SP-0925, supplier_id: S-107, item_id: I-1913, unit_price: 11.0}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: jade.novik@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1913}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-310}}
          - {tool: create_requisition, parameters: {requester_id: E-912, cost_centre_id: CC-310, supplier_id: S-110, lines: [{item_id: I-1913, quantity: 50}], justification: Chargers, approver_id: E-015}}
    """
    check_requisition(x, "E-912", "CC-310", "S-110", {"I-1913": 50}, "E-015")


def test_named_supplier_on_hold(x: TestContext, judge: Judge):
    """!
    query: Order 30 cases of letter paper (I-1914) from PaperTrail, they're the cheapest.
    user_context: >-
      You are Abel Ueda, email abel.ueda@brightwater.example, coordinator in Sales (cost centre
      CC-330). You need 30 cases of letter paper, item I-1914, and think PaperTrail is cheapest. If
      told PaperTrail cannot be used, accept the supplier the policy picks.
    tags: [write, supplier-rule, "difficulty:medium"]
    init:
      procurement:
        data_patch:
          employees: [{id: E-913, name: Abel Ueda, email: abel.ueda@brightwater.example, title: Coordinator, role: staff, cost_centre_id: CC-330, status: active}]
          items: [{id: I-1914, name: Copy paper letter (case), category: office, unit: case, standard_cost: 34}]
          supplier_prices:
          - {id: SP-0921, supplier_id: S-113, item_id: I-1914, unit_price: 33.0}
          - {id: SP-0922, supplier_id: S-112, item_id: I-1914, unit_price: 35.5}
        golden_test_case:
          tool_interactions:
          - {tool: find_employee, parameters: {query: abel.ueda@brightwater.example}}
          - {tool: get_item_prices, parameters: {item_id: I-1914}}
          - {tool: get_cost_centre, parameters: {cost_centre_id: CC-330}}
          - {tool: create_requisition, parameters: {requester_id: E-913, cost_centre_id: CC-330, supplier_id: S-112, lines: [{item_id: I-1914, quantity: 30}], justification: Office paper, approver_id: E-017}}
    """
    check_requisition(x, "E-913", "CC-330", "S-112", {"I-1914": 30}, "E-017")
    none_new(fx_of(x), "requisitions", supplier_id="S-113")
