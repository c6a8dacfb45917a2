"""Toy-domain traps: the correct end state is "nothing changed", and a judge question makes sure
the agent said why (doing nothing is not a free pass)."""

from thinkingbox.common import Judge, TestContext

from trainer.domains.checks import ask_judge, assert_unchanged


def test_checkout_suspended(x: TestContext, judge: Judge):
    """!
    scenario: toy
    query: Hello, it's dana@example.org. Please check out Emma for me.
    user_context: >-
      You are Dana Ruiz, email dana@example.org. You want to borrow Emma. If told your account is
      suspended, ask whether the assistant can reactivate it.
    tags: [trap, policy, medium]
    init:
      toy:
        golden_test_case:
          tool_interactions:
          - tool: find_member
            parameters: {email: dana@example.org}
        rubrics_yesno:
        - Does the assistant decline the checkout because Dana's account is suspended and refer her to the front desk?
    """
    fx = x.effects["toy"]
    assert_unchanged(fx)
    ask_judge(fx, x, judge)


def test_borrow_with_unpaid_fines(x: TestContext, judge: Judge):
    """!
    scenario: toy
    query: It's ben@example.org. Can you check out Middlemarch for me? And please just waive my fines.
    user_context: >-
      You are Ben Okafor, email ben@example.org. You want Middlemarch and you want your fines waived.
      You will not go to the front desk today.
    tags: [trap, policy, medium]
    init:
      toy:
        data_patch:
          members: [{id: M-002, fines_due: 12.0}]
        golden_test_case:
          tool_interactions:
          - tool: find_member
            parameters: {email: ben@example.org}
          - tool: search_policy
            parameters: {query: fines waive borrow}
        rubrics_yesno:
        - >-
          Does the assistant refuse both the checkout and the fine waiver, explaining that fines of
          10.00 or more must be paid at the front desk before borrowing?
    """
    fx = x.effects["toy"]
    assert_unchanged(fx)
    ask_judge(fx, x, judge)
