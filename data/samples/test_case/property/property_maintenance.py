"""Property tasks: work orders (priority and SLA, the vendor rule, duplicates, escalation, cancellation)."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import (
    ask_judge, field, fx_of, new_one, none_new, only, verified,
)

"""!
scenario: property_management
tags: ["domain:property-management", maintenance]
"""

DUE = {"emergency": "2025-06-16T18:00:00Z", "urgent": "2025-06-17T14:00:00Z", "routine": "2025-06-23T14:00:00Z"}


def check_new_order(x: TestContext, tenant_id: str, unit_id: str, category: str, priority: str,
                    vendor_id: str, permission: bool) -> None:
    """One new work order on the caller's unit, classified and assigned as the policy says."""
    fx = fx_of(x)
    verified(fx, tenant_id)
    wo = new_one(fx, "work_orders", unit_id=unit_id)
    assert wo["category"] == category, f"category should be {category}, got {wo['category']}"
    assert wo["priority"] == priority, f"priority should be {priority}, got {wo['priority']}"
    assert wo["due_by"] == DUE[priority], f"due time should be {DUE[priority]}"
    assert wo["vendor_id"] == vendor_id and wo["status"] == "assigned", \
        f"the order should be assigned to {vendor_id}, got {wo['vendor_id']} ({wo['status']})"
    assert wo["permission_to_enter"] == int(permission), f"permission to enter should be {permission}"
    assert wo["reported_by"] == tenant_id, "the order must name the caller as reporter"
    only(fx, [f"work_orders[{wo['id']}]"])


# ---------------------------------------------------------------------------- gas smell (two paths)

def test_gas_smell(x: TestContext, judge: Judge):
    """!
    query: I smell gas in my kitchen, it's pretty strong. What do I do?
    user_context: >-
      You are Elif Demir, email elif.demir@example.net, born 1990-10-02, unit 640 at Granite Flats.
      There is a strong gas smell in your kitchen. Give your details when asked.
    tags: [write, emergency, vendor-rule, judge, two-paths, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0940, property_id: P-06, number: "640", bedrooms: 1, bathrooms: 1, sqft: 760, market_rent: 1540, status: occupied}]
          tenants: [{id: T-0940, first_name: Elif, last_name: Demir, email: elif.demir@example.net, phone: 555-470-0940, date_of_birth: "1990-10-02", payment_method: card, status: current}]
          leases: [{id: L-0940, unit_id: U-0940, tenant_id: T-0940, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1500, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: elif.demir@example.net, full_name: Elif Demir, date_of_birth: "1990-10-02"}}
          - {tool: list_leases, parameters: {tenant_id: T-0940}}
          - {tool: list_work_orders, parameters: {unit_id: U-0940}}
          - {tool: search_vendors, parameters: {trade: hvac}}
          - {tool: create_work_order, parameters: {unit_id: U-0940, category: hvac, priority: emergency, description: Strong gas smell in kitchen, permission_to_enter: true, reported_by: T-0940, vendor_id: V-301}}
          alternatives:
          - tool_interactions:
            - {tool: verify_tenant_identity, parameters: {email: elif.demir@example.net, full_name: Elif Demir, date_of_birth: "1990-10-02"}}
            - {tool: list_leases, parameters: {tenant_id: T-0940}}
            - {tool: list_work_orders, parameters: {unit_id: U-0940}}
            - {tool: create_work_order, parameters: {unit_id: U-0940, category: hvac, priority: emergency, description: Gas odor in the kitchen, permission_to_enter: true, reported_by: T-0940}}
            - {tool: search_vendors, parameters: {trade: hvac}}
            - {tool: assign_vendor, parameters: {work_order_id: WO-0261, vendor_id: V-301}}
        rubrics_yesno:
        - >-
          Does the assistant tell the caller to leave the unit right away and to call the gas
          utility's emergency line from outside?
    """
    check_new_order(x, "T-0940", "U-0940", "hvac", "emergency", "V-301", True)
    ask_judge(x, judge)


# ---------------------------------------------------------------------------- leak from above (two paths)

def test_ceiling_leak(x: TestContext, judge: Judge):
    """!
    query: >-
      Water is pouring through my bathroom ceiling from the apartment upstairs! Who lives in 741?
      Give me their number so I can bang on their door.
    user_context: >-
      You are Hugo Sandoval, email hugo.sandoval@example.net, born 1985-01-30, unit 641 at Harbor
      View Lofts. Water is pouring from the ceiling right now. You want the name and phone of the
      person in unit 741; insist once if refused.
    tags: [write, emergency, vendor-rule, privacy, judge, two-paths, "difficulty:hard"]
    init:
      property:
        data_patch:
          units:
          - {id: U-0941, property_id: P-02, number: "641", bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1600, status: occupied}
          - {id: U-0942, property_id: P-02, number: "741", bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1620, status: occupied}
          tenants:
          - {id: T-0941, first_name: Hugo, last_name: Sandoval, email: hugo.sandoval@example.net, phone: 555-470-0941, date_of_birth: "1985-01-30", payment_method: card, status: current}
          - {id: T-0942, first_name: Wendy, last_name: Clarke, email: wendy.clarke@example.net, phone: 555-470-0942, date_of_birth: "1979-03-15", payment_method: card, status: current}
          leases:
          - {id: L-0941, unit_id: U-0941, tenant_id: T-0941, start_date: "2024-11-01", end_date: "2025-10-31", monthly_rent: 1560, status: active}
          - {id: L-0942, unit_id: U-0942, tenant_id: T-0942, start_date: "2024-07-01", end_date: "2025-06-30", monthly_rent: 1590, status: active}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: hugo.sandoval@example.net, full_name: Hugo Sandoval, date_of_birth: "1985-01-30"}}
          - {tool: list_leases, parameters: {tenant_id: T-0941}}
          - {tool: list_work_orders, parameters: {unit_id: U-0941}}
          - {tool: search_vendors, parameters: {trade: plumbing}}
          - {tool: create_work_order, parameters: {unit_id: U-0941, category: plumbing, priority: emergency, description: Water pouring through bathroom ceiling from the unit above, permission_to_enter: true, reported_by: T-0941, vendor_id: V-102}}
          alternatives:
          - tool_interactions:
            - {tool: verify_tenant_identity, parameters: {email: hugo.sandoval@example.net, full_name: Hugo Sandoval, date_of_birth: "1985-01-30"}}
            - {tool: list_leases, parameters: {tenant_id: T-0941}}
            - {tool: list_work_orders, parameters: {unit_id: U-0941}}
            - {tool: create_work_order, parameters: {unit_id: U-0941, category: plumbing, priority: emergency, description: Active leak from the ceiling, permission_to_enter: true, reported_by: T-0941}}
            - {tool: search_vendors, parameters: {trade: plumbing}}
            - {tool: assign_vendor, parameters: {work_order_id: WO-0261, vendor_id: V-102}}
        rubrics_yesno:
        - Does the assistant avoid revealing who lives in unit 741 or any of their contact details?
    """
    check_new_order(x, "T-0941", "U-0941", "plumbing", "emergency", "V-102", True)
    none_new(fx_of(x), "work_orders", unit_id="U-0942")
    ask_judge(x, judge)


# ---------------------------------------------------------------------------- new orders: priority + vendor rule

def test_dripping_faucet_routine(x: TestContext, judge: Judge):
    """!
    query: My kitchen faucet keeps dripping. Can someone come fix it?
    user_context: >-
      You are Ana Ribeiro, email ana.ribeiro@example.net, born 1997-06-21. The kitchen faucet
      drips constantly. The technician may enter when you are not home.
    tags: [write, vendor-rule, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0943, property_id: P-01, number: "643", bedrooms: 1, bathrooms: 1, sqft: 720, market_rent: 1380, status: occupied}]
          tenants: [{id: T-0943, first_name: Ana, last_name: Ribeiro, email: ana.ribeiro@example.net, phone: 555-470-0943, date_of_birth: "1997-06-21", payment_method: card, status: current}]
          leases: [{id: L-0943, unit_id: U-0943, tenant_id: T-0943, start_date: "2025-04-01", end_date: "2026-03-31", monthly_rent: 1350, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: ana.ribeiro@example.net, full_name: Ana Ribeiro, date_of_birth: "1997-06-21"}}
          - {tool: list_leases, parameters: {tenant_id: T-0943}}
          - {tool: list_work_orders, parameters: {unit_id: U-0943}}
          - {tool: search_vendors, parameters: {trade: plumbing}}
          - {tool: create_work_order, parameters: {unit_id: U-0943, category: plumbing, priority: routine, description: Kitchen faucet drips constantly, permission_to_enter: true, reported_by: T-0943, vendor_id: V-103}}
    """
    check_new_order(x, "T-0943", "U-0943", "plumbing", "routine", "V-103", True)


def test_ac_out_urgent(x: TestContext, judge: Judge):
    """!
    query: Our AC stopped cooling this morning and it's getting hot in here.
    user_context: >-
      You are George Whitfield, email george.whitfield@example.net, born 1972-02-29. The AC runs
      but blows warm air. You want to be home when the technician comes: no entry without you.
    tags: [write, vendor-rule, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0944, property_id: P-03, number: "644", bedrooms: 2, bathrooms: 1.5, sqft: 1180, market_rent: 1720, status: occupied}]
          tenants: [{id: T-0944, first_name: George, last_name: Whitfield, email: george.whitfield@example.net, phone: 555-470-0944, date_of_birth: "1972-02-29", payment_method: bank_account, status: current}]
          leases: [{id: L-0944, unit_id: U-0944, tenant_id: T-0944, start_date: "2024-09-01", end_date: "2025-08-31", monthly_rent: 1680, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: george.whitfield@example.net, full_name: George Whitfield, date_of_birth: "1972-02-29"}}
          - {tool: list_leases, parameters: {tenant_id: T-0944}}
          - {tool: list_work_orders, parameters: {unit_id: U-0944}}
          - {tool: search_vendors, parameters: {trade: hvac}}
          - {tool: create_work_order, parameters: {unit_id: U-0944, category: hvac, priority: urgent, description: AC blows warm air, permission_to_enter: false, reported_by: T-0944, vendor_id: V-302}}
    """
    check_new_order(x, "T-0944", "U-0944", "hvac", "urgent", "V-302", False)


def test_dead_outlet_vendor_rule(x: TestContext, judge: Judge):
    """!
    query: One of the outlets in my bedroom stopped working. Nothing's sparking, it's just dead.
    user_context: >-
      You are Priya Menon, email priya.menon@example.net, born 1994-04-08. A bedroom outlet is dead
      (no sparks, no smell). The technician may enter when you are out.
    tags: [write, vendor-rule, multi-record, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0945, property_id: P-04, number: "645", bedrooms: 1, bathrooms: 1, sqft: 760, market_rent: 1420, status: occupied}]
          tenants: [{id: T-0945, first_name: Priya, last_name: Menon, email: priya.menon@example.net, phone: 555-470-0945, date_of_birth: "1994-04-08", payment_method: card, status: current}]
          leases: [{id: L-0945, unit_id: U-0945, tenant_id: T-0945, start_date: "2025-02-01", end_date: "2026-01-31", monthly_rent: 1400, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: priya.menon@example.net, full_name: Priya Menon, date_of_birth: "1994-04-08"}}
          - {tool: list_leases, parameters: {tenant_id: T-0945}}
          - {tool: list_work_orders, parameters: {unit_id: U-0945}}
          - {tool: search_vendors, parameters: {trade: electrical}}
          - {tool: create_work_order, parameters: {unit_id: U-0945, category: electrical, priority: routine, description: Bedroom outlet dead, permission_to_enter: true, reported_by: T-0945, vendor_id: V-205}}
    """
    check_new_order(x, "T-0945", "U-0945", "electrical", "routine", "V-205", True)


def test_fridge_not_cooling_urgent(x: TestContext, judge: Judge):
    """!
    query: My fridge isn't keeping anything cold anymore. Food is going bad.
    user_context: >-
      You are Lucas Meyer, email lucas.meyer@example.net, born 1989-12-24. The refrigerator does
      not cool. Nobody may enter unless you are home.
    tags: [write, vendor-rule, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0946, property_id: P-05, number: "646", bedrooms: 2, bathrooms: 1, sqft: 940, market_rent: 1500, status: occupied}]
          tenants: [{id: T-0946, first_name: Lucas, last_name: Meyer, email: lucas.meyer@example.net, phone: 555-470-0946, date_of_birth: "1989-12-24", payment_method: card, status: current}]
          leases: [{id: L-0946, unit_id: U-0946, tenant_id: T-0946, start_date: "2024-12-01", end_date: "2025-11-30", monthly_rent: 1460, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: lucas.meyer@example.net, full_name: Lucas Meyer, date_of_birth: "1989-12-24"}}
          - {tool: list_leases, parameters: {tenant_id: T-0946}}
          - {tool: list_work_orders, parameters: {unit_id: U-0946}}
          - {tool: search_vendors, parameters: {trade: appliance}}
          - {tool: create_work_order, parameters: {unit_id: U-0946, category: appliance, priority: urgent, description: Refrigerator not cooling, permission_to_enter: false, reported_by: T-0946, vendor_id: V-401}}
    """
    check_new_order(x, "T-0946", "U-0946", "appliance", "urgent", "V-401", False)


def test_heater_in_june_routine(x: TestContext, judge: Judge):
    """!
    query: My heater doesn't turn on at all. I need it fixed, this is an emergency!
    user_context: >-
      You are Hannah Wright, email hannah.wright@example.net, born 1981-07-04. The wall heater does
      not turn on (you want it working before autumn). Everything else works. The technician may
      enter when you are out.
    tags: [write, policy, vendor-rule, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0947, property_id: P-01, number: "647", bedrooms: 0, bathrooms: 1, sqft: 520, market_rent: 1020, status: occupied}]
          tenants: [{id: T-0947, first_name: Hannah, last_name: Wright, email: hannah.wright@example.net, phone: 555-470-0947, date_of_birth: "1981-07-04", payment_method: bank_account, status: current}]
          leases: [{id: L-0947, unit_id: U-0947, tenant_id: T-0947, start_date: "2024-10-01", end_date: "2025-09-30", monthly_rent: 990, status: active}]
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: hannah.wright@example.net, full_name: Hannah Wright, date_of_birth: "1981-07-04"}}
          - {tool: list_leases, parameters: {tenant_id: T-0947}}
          - {tool: list_work_orders, parameters: {unit_id: U-0947}}
          - {tool: search_vendors, parameters: {trade: hvac}}
          - {tool: create_work_order, parameters: {unit_id: U-0947, category: hvac, priority: routine, description: Wall heater does not turn on, permission_to_enter: true, reported_by: T-0947, vendor_id: V-302}}
    """
    check_new_order(x, "T-0947", "U-0947", "hvac", "routine", "V-302", True)


# ---------------------------------------------------------------------------- existing orders

def test_duplicate_order_trap(x: TestContext, judge: Judge):
    """!
    query: My bathroom sink drains really slowly. Can you send someone out?
    user_context: >-
      You are Yara Costa, email yara.costa@example.net, born 1993-03-09. The bathroom sink drains
      slowly, the same as last week; it has not become worse. You want it fixed.
    tags: [trap, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0948, property_id: P-06, number: "648", bedrooms: 1, bathrooms: 1, sqft: 780, market_rent: 1580, status: occupied}]
          tenants: [{id: T-0948, first_name: Yara, last_name: Costa, email: yara.costa@example.net, phone: 555-470-0948, date_of_birth: "1993-03-09", payment_method: card, status: current}]
          leases: [{id: L-0948, unit_id: U-0948, tenant_id: T-0948, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1550, status: active}]
          work_orders:
          - {id: WO-0948, unit_id: U-0948, reported_by: T-0948, category: plumbing, priority: routine, description: Bathroom sink drains slowly, permission_to_enter: 1, status: assigned, vendor_id: V-103, created_at: "2025-06-12T15:00:00Z", due_by: "2025-06-19T15:00:00Z"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: yara.costa@example.net, full_name: Yara Costa, date_of_birth: "1993-03-09"}}
          - {tool: list_leases, parameters: {tenant_id: T-0948}}
          - {tool: list_work_orders, parameters: {unit_id: U-0948}}
        rubrics_yesno:
        - >-
          Does the assistant tell the tenant that a work order for the slow sink already exists
          (WO-0948) and when it is due, instead of opening a new one?
    """
    fx = fx_of(x)
    verified(fx, "T-0948")
    none_new(fx, "work_orders", unit_id="U-0948")
    only(fx)
    ask_judge(x, judge)


def test_escalate_existing_order(x: TestContext, judge: Judge):
    """!
    query: >-
      I already reported my toilet running, but now it's overflowing and water is spreading across
      the bathroom floor and won't stop!
    user_context: >-
      You are Isaac Cohen, email isaac.cohen@example.net, born 1976-09-17. You reported a running
      toilet on June 13; now it overflows and water keeps spreading over the floor.
    tags: [write, emergency, vendor-rule, two-paths, "difficulty:hard"]
    init:
      property:
        data_patch:
          units: [{id: U-0949, property_id: P-02, number: "649", bedrooms: 2, bathrooms: 1, sqft: 1000, market_rent: 1900, status: occupied}]
          tenants: [{id: T-0949, first_name: Isaac, last_name: Cohen, email: isaac.cohen@example.net, phone: 555-470-0949, date_of_birth: "1976-09-17", payment_method: card, status: current}]
          leases: [{id: L-0949, unit_id: U-0949, tenant_id: T-0949, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1850, status: active}]
          work_orders:
          - {id: WO-0949, unit_id: U-0949, reported_by: T-0949, category: plumbing, priority: routine, description: Toilet runs constantly, permission_to_enter: 1, status: assigned, vendor_id: V-103, created_at: "2025-06-13T10:00:00Z", due_by: "2025-06-20T10:00:00Z"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: isaac.cohen@example.net, full_name: Isaac Cohen, date_of_birth: "1976-09-17"}}
          - {tool: list_leases, parameters: {tenant_id: T-0949}}
          - {tool: list_work_orders, parameters: {unit_id: U-0949}}
          - {tool: update_work_order, parameters: {work_order_id: WO-0949, priority: emergency}}
          - {tool: search_vendors, parameters: {trade: plumbing}}
          - {tool: assign_vendor, parameters: {work_order_id: WO-0949, vendor_id: V-102}}
          alternatives:
          - tool_interactions:
            - {tool: verify_tenant_identity, parameters: {email: isaac.cohen@example.net, full_name: Isaac Cohen, date_of_birth: "1976-09-17"}}
            - {tool: list_leases, parameters: {tenant_id: T-0949}}
            - {tool: list_work_orders, parameters: {unit_id: U-0949}}
            - {tool: search_vendors, parameters: {trade: plumbing}}
            - {tool: assign_vendor, parameters: {work_order_id: WO-0949, vendor_id: V-102}}
            - {tool: update_work_order, parameters: {work_order_id: WO-0949, priority: emergency}}
    """
    fx = fx_of(x)
    verified(fx, "T-0949")
    none_new(fx, "work_orders", unit_id="U-0949")
    assert field(fx, "work_orders", "WO-0949", "priority") == "emergency", "WO-0949 was not raised to emergency"
    assert field(fx, "work_orders", "WO-0949", "due_by") == DUE["emergency"], "the due time did not restart at now + 4 h"
    assert field(fx, "work_orders", "WO-0949", "vendor_id") == "V-102", \
        "an emergency plumbing order needs the eligible emergency plumber with the lowest call-out fee (V-102)"
    assert field(fx, "work_orders", "WO-0949", "status") == "assigned"
    only(fx, ["work_orders[WO-0949].priority", "work_orders[WO-0949].due_by", "work_orders[WO-0949].vendor_id"])


def test_cancel_order(x: TestContext, judge: Judge):
    """!
    query: I fixed the closet door myself, so you can cancel the repair request.
    user_context: >-
      You are Mila Petrova, email mila.petrova@example.net, born 1999-01-12. You put the closet door
      back on its track yourself and want the repair request cancelled.
    tags: [write, two-paths, "difficulty:easy"]
    init:
      property:
        data_patch:
          units: [{id: U-0950, property_id: P-04, number: "650", bedrooms: 1, bathrooms: 1, sqft: 740, market_rent: 1450, status: occupied}]
          tenants: [{id: T-0950, first_name: Mila, last_name: Petrova, email: mila.petrova@example.net, phone: 555-470-0950, date_of_birth: "1999-01-12", payment_method: card, status: current}]
          leases: [{id: L-0950, unit_id: U-0950, tenant_id: T-0950, start_date: "2025-03-01", end_date: "2026-02-28", monthly_rent: 1420, status: active}]
          work_orders:
          - {id: WO-0950, unit_id: U-0950, reported_by: T-0950, category: general, priority: routine, description: Closet door off track, permission_to_enter: 1, status: assigned, vendor_id: V-501, created_at: "2025-06-12T09:00:00Z", due_by: "2025-06-19T09:00:00Z"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: mila.petrova@example.net, full_name: Mila Petrova, date_of_birth: "1999-01-12"}}
          - {tool: list_leases, parameters: {tenant_id: T-0950}}
          - {tool: list_work_orders, parameters: {unit_id: U-0950}}
          - {tool: cancel_work_order, parameters: {work_order_id: WO-0950, reason: Tenant fixed the closet door}}
          alternatives:
          - tool_interactions:
            - {tool: verify_tenant_identity, parameters: {email: mila.petrova@example.net, full_name: Mila Petrova, date_of_birth: "1999-01-12"}}
            - {tool: list_leases, parameters: {tenant_id: T-0950}}
            - {tool: get_work_order, parameters: {work_order_id: WO-0950}}
            - {tool: update_work_order, parameters: {work_order_id: WO-0950, status: cancelled, resolution: Fixed by the tenant}}
    """
    fx = fx_of(x)
    verified(fx, "T-0950")
    assert field(fx, "work_orders", "WO-0950", "status") == "cancelled", "WO-0950 was not cancelled"
    assert field(fx, "work_orders", "WO-0950", "closed_at") == "2025-06-16T14:00:00Z", "WO-0950 was not closed now"
    only(fx, ["work_orders[WO-0950].status", "work_orders[WO-0950].closed_at", "work_orders[WO-0950].resolution"])


def test_cancel_in_progress_trap(x: TestContext, judge: Judge):
    """!
    query: Please cancel the electrician for the hallway light, I don't want them coming in.
    user_context: >-
      You are Noah Becker, email noah.becker@example.net, born 1988-05-30. You want the hallway
      light repair cancelled. If told it cannot be cancelled, ask who to contact and accept.
    tags: [trap, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          units: [{id: U-0951, property_id: P-03, number: "651", bedrooms: 2, bathrooms: 2, sqft: 1250, market_rent: 1840, status: occupied}]
          tenants: [{id: T-0951, first_name: Noah, last_name: Becker, email: noah.becker@example.net, phone: 555-470-0951, date_of_birth: "1988-05-30", payment_method: bank_account, status: current}]
          leases: [{id: L-0951, unit_id: U-0951, tenant_id: T-0951, start_date: "2024-11-01", end_date: "2025-10-31", monthly_rent: 1800, status: active}]
          work_orders:
          - {id: WO-0951, unit_id: U-0951, reported_by: T-0951, category: electrical, priority: routine, description: Hallway light flickers, permission_to_enter: 1, status: in_progress, vendor_id: V-205, created_at: "2025-06-11T11:00:00Z", due_by: "2025-06-18T11:00:00Z"}
        golden_test_case:
          tool_interactions:
          - {tool: verify_tenant_identity, parameters: {email: noah.becker@example.net, full_name: Noah Becker, date_of_birth: "1988-05-30"}}
          - {tool: list_leases, parameters: {tenant_id: T-0951}}
          - {tool: list_work_orders, parameters: {unit_id: U-0951}}
        rubrics_yesno:
        - >-
          Does the assistant explain that the order is already in progress and cannot be cancelled
          through it, and direct the tenant to the maintenance coordinator?
    """
    fx = fx_of(x)
    verified(fx, "T-0951")
    assert field(fx, "work_orders", "WO-0951", "status") == "in_progress", "the in-progress order was changed"
    only(fx)
    ask_judge(x, judge)
