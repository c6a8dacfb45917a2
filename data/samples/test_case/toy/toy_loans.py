"""Toy-domain tasks: look-ups and writes that reach a required end state by any tool path."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.checks import assert_no_collateral, new_one, record

"""!
scenario: toy
"""


def test_fine_correction(x: TestContext, judge: Judge):
    """!
    query: Hi, this is ada@example.org. I returned Emma on time last month but I was charged a fine. Can you fix it?
    user_context: >-
      You are Ada Byron, email ada@example.org. You returned Emma on its due date, 2025-02-24, and
      see a fine of 0.75 on your account. You want that fine removed.
    tags: [lookup-then-write, policy, easy]
    init:
      toy:
        data_patch:
          members: [{id: M-001, fines_due: 0.75}]
          loans:
          - {id: L-0050, member_id: M-001, book_id: B-002, checked_out: "2025-02-10", due: "2025-02-24", returned: "2025-02-24", fine: 0.75}
        golden_test_case:
          tool_interactions:
          - tool: find_member
            parameters: {email: ada@example.org}
          - tool: list_loans
            parameters: {member_id: M-001, include_returned: true}
          - tool: adjust_fines
            parameters: {member_id: M-001, amount: -0.75, reason: Emma (L-0050) was returned on time but fined}
    """
    fx = x.effects["toy"]
    fines = record(fx, "members", "M-001")["fines_due"]
    assert fines == 0, f"the 0.75 fine recorded in error on an on-time return was not removed (fines due {fines})"
    assert_no_collateral(fx, allow=["members[M-001].fines_due"])


def test_checkout_book(x: TestContext, judge: Judge):
    """!
    query: I'd like to borrow "The Left Hand of Darkness", please. My email is ben@example.org.
    user_context: You are Ben Okafor, email ben@example.org. You want to borrow The Left Hand of Darkness.
    tags: [write, easy]
    init:
      toy:
        data_patch:
          members: [{id: M-002, fines_due: 2.5}]
        golden_test_case:
          tool_interactions:
          - tool: find_member
            parameters: {email: ben@example.org}
          - tool: search_books
            parameters: {query: left hand of darkness}
          - tool: checkout_book
            parameters: {member_id: M-002, book_id: B-004}
    """
    fx = x.effects["toy"]
    loan = new_one(fx, "loans", "loan of B-004 to M-002", member_id="M-002", book_id="B-004")
    assert loan["due"] == "2025-03-17" and loan["returned"] is None, "the loan is not a 14-day open loan"
    assert record(fx, "books", "B-004")["status"] == "on_loan", "the book is not marked on loan"
    assert_no_collateral(fx, allow=[f"loans[{loan['id']}]", "books[B-004].status"])


def test_return_then_borrow(x: TestContext, judge: Judge):
    """!
    query: >-
      I'm chen@example.org. I'm bringing back Beloved today, and then I'd like to take out Kindred.
    user_context: >-
      You are Chen Li, email chen@example.org. You return Beloved today and want to borrow Kindred.
      You have three books out; you know Beloved is late.
    tags: [write, multi-step, medium]
    init:
      toy:
        data_patch:
          books:
          - {id: B-002, status: on_loan}
          - {id: B-005, status: on_loan}
          loans:
          - {id: L-0101, member_id: M-003, book_id: B-002, checked_out: "2025-02-28", due: "2025-03-14"}
          - {id: L-0102, member_id: M-003, book_id: B-005, checked_out: "2025-02-28", due: "2025-03-14"}
        golden_test_case:
          tool_interactions:
          - tool: find_member
            parameters: {email: chen@example.org}
          - tool: list_loans
            parameters: {member_id: M-003}
          - tool: return_book
            parameters: {loan_id: L-0002}
          - tool: search_books
            parameters: {query: kindred}
          - tool: checkout_book
            parameters: {member_id: M-003, book_id: B-006}
    """
    fx = x.effects["toy"]
    returned = record(fx, "loans", "L-0002")
    assert returned["returned"] == "2025-03-03", "Beloved (loan L-0002) was not returned today"
    assert returned["fine"] == 1.75, f"a 7-day late return owes 1.75, recorded {returned['fine']}"
    assert record(fx, "members", "M-003")["fines_due"] == 3.25, "the fine was not added to the member (1.50 + 1.75)"
    loan = new_one(fx, "loans", "loan of Kindred (B-006) to Chen", member_id="M-003", book_id="B-006")
    assert_no_collateral(fx, allow=["loans[L-0002]", f"loans[{loan['id']}]", "members[M-003].fines_due",
                                    "books[B-003].status", "books[B-006].status"])
