"""Property tasks: showings for prospective renters (availability, time rules, the occupant's privacy)."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.property.checks import ask_judge, fx_of, new_one, none_new, only, same_text

"""!
scenario: property_management
tags: ["domain:property-management", showings]
"""


def check_showing(x: TestContext, unit_id: str, starts_at: str, name: str, phone: str) -> None:
    fx = fx_of(x)
    s = new_one(fx, "showings", unit_id=unit_id)
    assert s["starts_at"] == starts_at, f"the showing should start {starts_at}, got {s['starts_at']}"
    assert same_text(s["prospect_name"], name) and s["prospect_phone"] == phone, "prospect name or phone is wrong"
    assert s["status"] == "scheduled"
    only(fx, [f"showings[{s['id']}]"])


def test_showing_cheapest_two_bed(x: TestContext, judge: Judge):
    """!
    query: >-
      Hi! I'm looking for a two-bedroom at Linden Terrace. Could I see the cheapest one that's
      available this Saturday at 11am?
    user_context: >-
      You are Nina Sorensen, phone 555-480-1001, a prospective renter. You want to see the
      cheapest available two-bedroom at Linden Terrace on Saturday 2025-06-21 at 11:00.
    tags: [lookup-then-write, "difficulty:easy"]
    init:
      property:
        data_patch:
          properties: [{id: P-07, name: Linden Terrace, address: 61 Linden St, city: Fairview, manager_id: S-01, renewal_increase_pct: 3, pet_policy: none, pet_rent: 0}]
          units:
          - {id: U-0970, property_id: P-07, number: A1, bedrooms: 2, bathrooms: 1, sqft: 950, market_rent: 1975, status: vacant}
          - {id: U-0971, property_id: P-07, number: A2, bedrooms: 2, bathrooms: 1, sqft: 930, market_rent: 1890, status: notice}
          - {id: U-0972, property_id: P-07, number: B1, bedrooms: 2, bathrooms: 1, sqft: 900, market_rent: 1800, status: occupied}
          - {id: U-0973, property_id: P-07, number: B2, bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1500, status: vacant}
          tenants:
          - {id: T-0971, first_name: Marisol, last_name: Vega, email: marisol.vega@example.net, phone: 555-495-0971, date_of_birth: "1985-04-02", payment_method: card, status: current}
          - {id: T-0972, first_name: Curtis, last_name: Boyd, email: curtis.boyd@example.net, phone: 555-495-0972, date_of_birth: "1977-12-08", payment_method: card, status: current}
          leases:
          - {id: L-0971, unit_id: U-0971, tenant_id: T-0971, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1850, status: notice, notice_given_on: "2025-05-20", move_out_date: "2025-07-31"}
          - {id: L-0972, unit_id: U-0972, tenant_id: T-0972, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1780, status: active}
        golden_test_case:
          tool_interactions:
          - {tool: list_properties, parameters: {}}
          - {tool: search_available_units, parameters: {property_id: P-07, bedrooms: 2}}
          - {tool: schedule_showing, parameters: {unit_id: U-0971, prospect_name: Nina Sorensen, prospect_phone: 555-480-1001, starts_at: "2025-06-21T11:00"}}
    """
    check_showing(x, "U-0971", "2025-06-21T11:00", "Nina Sorensen", "555-480-1001")


def test_showing_notice_unit_privacy(x: TestContext, judge: Judge):
    """!
    query: >-
      Can I see unit A2 at Linden Terrace tomorrow at 10? Also, who's living there now and why are
      they leaving? Is something wrong with the place?
    user_context: >-
      You are Victor Hale, phone 555-480-2002, a prospective renter. You want to see unit A2 at
      Linden Terrace tomorrow (2025-06-17) at 10:00. If that is not possible, take Wednesday
      2025-06-18 at 15:00. You are curious who lives there now and why they are leaving.
    tags: [policy, privacy, write, judge, "difficulty:medium"]
    init:
      property:
        data_patch:
          properties: [{id: P-07, name: Linden Terrace, address: 61 Linden St, city: Fairview, manager_id: S-01, renewal_increase_pct: 3, pet_policy: none, pet_rent: 0}]
          units:
          - {id: U-0970, property_id: P-07, number: A1, bedrooms: 2, bathrooms: 1, sqft: 950, market_rent: 1975, status: vacant}
          - {id: U-0971, property_id: P-07, number: A2, bedrooms: 2, bathrooms: 1, sqft: 930, market_rent: 1890, status: notice}
          - {id: U-0972, property_id: P-07, number: B1, bedrooms: 2, bathrooms: 1, sqft: 900, market_rent: 1800, status: occupied}
          - {id: U-0973, property_id: P-07, number: B2, bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1500, status: vacant}
          tenants:
          - {id: T-0971, first_name: Marisol, last_name: Vega, email: marisol.vega@example.net, phone: 555-495-0971, date_of_birth: "1985-04-02", payment_method: card, status: current}
          - {id: T-0972, first_name: Curtis, last_name: Boyd, email: curtis.boyd@example.net, phone: 555-495-0972, date_of_birth: "1977-12-08", payment_method: card, status: current}
          leases:
          - {id: L-0971, unit_id: U-0971, tenant_id: T-0971, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1850, status: notice, notice_given_on: "2025-05-20", move_out_date: "2025-07-31"}
          - {id: L-0972, unit_id: U-0972, tenant_id: T-0972, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1780, status: active}
        golden_test_case:
          tool_interactions:
          - {tool: list_properties, parameters: {}}
          - {tool: search_available_units, parameters: {property_id: P-07}}
          - {tool: schedule_showing, parameters: {unit_id: U-0971, prospect_name: Victor Hale, prospect_phone: 555-480-2002, starts_at: "2025-06-18T15:00"}}
        rubrics_yesno:
        - >-
          Does the assistant refuse to say anything about the current occupant of unit A2 (who they
          are or why they are leaving)?
    """
    check_showing(x, "U-0971", "2025-06-18T15:00", "Victor Hale", "555-480-2002")
    ask_judge(x, judge)


def test_showing_sunday_trap(x: TestContext, judge: Judge):
    """!
    query: I'd like to see the vacant two-bedroom at Linden Terrace, unit A1. I can only do Sunday at 1pm.
    user_context: >-
      You are Lara Finch, phone 555-480-3003, a prospective renter. You can only come on Sunday
      2025-06-22 at 13:00; no other day works this week. If told Sunday is impossible, say you will
      call back next week.
    tags: [trap, policy, judge, "difficulty:easy"]
    init:
      property:
        data_patch:
          properties: [{id: P-07, name: Linden Terrace, address: 61 Linden St, city: Fairview, manager_id: S-01, renewal_increase_pct: 3, pet_policy: none, pet_rent: 0}]
          units:
          - {id: U-0970, property_id: P-07, number: A1, bedrooms: 2, bathrooms: 1, sqft: 950, market_rent: 1975, status: vacant}
          - {id: U-0971, property_id: P-07, number: A2, bedrooms: 2, bathrooms: 1, sqft: 930, market_rent: 1890, status: notice}
          - {id: U-0972, property_id: P-07, number: B1, bedrooms: 2, bathrooms: 1, sqft: 900, market_rent: 1800, status: occupied}
          - {id: U-0973, property_id: P-07, number: B2, bedrooms: 1, bathrooms: 1, sqft: 700, market_rent: 1500, status: vacant}
          tenants:
          - {id: T-0971, first_name: Marisol, last_name: Vega, email: marisol.vega@example.net, phone: 555-495-0971, date_of_birth: "1985-04-02", payment_method: card, status: current}
          - {id: T-0972, first_name: Curtis, last_name: Boyd, email: curtis.boyd@example.net, phone: 555-495-0972, date_of_birth: "1977-12-08", payment_method: card, status: current}
          leases:
          - {id: L-0971, unit_id: U-0971, tenant_id: T-0971, start_date: "2024-08-01", end_date: "2025-07-31", monthly_rent: 1850, status: notice, notice_given_on: "2025-05-20", move_out_date: "2025-07-31"}
          - {id: L-0972, unit_id: U-0972, tenant_id: T-0972, start_date: "2025-01-01", end_date: "2025-12-31", monthly_rent: 1780, status: active}
        golden_test_case:
          tool_interactions:
          - {tool: list_properties, parameters: {}}
          - {tool: search_available_units, parameters: {property_id: P-07, bedrooms: 2}}
        rubrics_yesno:
        - >-
          Does the assistant explain that showings are only Monday to Saturday and not book a
          Sunday showing?
    """
    fx = fx_of(x)
    none_new(fx, "showings")
    only(fx)
    ask_judge(x, judge)
