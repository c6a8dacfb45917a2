"""Check helpers of the telecom tasks, on top of `trainer.domains.checks`.

Every account-facing task requires a passed identity check for its customer (the policy's first
rule, and the one write the database can show), reads the records the task is about, and ends
with the collateral check. Identity checks and account notes are audit rows any path may add.
"""

from __future__ import annotations

from typing import Any, Iterable

from trainer.domains import checks
from trainer.domains.checks import assert_no_collateral, field, new_one, new_records, none_new

AUDIT = ("identity_checks", "account_notes")


def fx_of(x: Any) -> dict[str, Any]:
    """The telecom server's effects of an episode."""
    return x.effects["telecom"]


def verified(fx: dict[str, Any], customer_id: str) -> None:
    """A passed identity check for `customer_id` was made in this episode."""
    checks.verified(fx, "customer", customer_id=customer_id)


def never_verified(fx: dict[str, Any], customer_id: str) -> None:
    """At least one failed attempt for `customer_id`, and no passed one."""
    checks.never_verified(fx, "customer", customer_id=customer_id)


def only(fx: dict[str, Any], allow: Iterable[str] = ()) -> None:
    """No writes outside `allow` and the audit tables."""
    assert_no_collateral(fx, allow=[*AUDIT, *allow])


def one_adjustment(fx: dict[str, Any], account_id: str, kind: str, category: str, amount: float,
                   why: str) -> dict[str, Any]:
    """Exactly one new adjustment of `kind` on the account, of `category` and `amount` (`why`: how
    the amount is computed, for the message)."""
    adj = new_one(fx, "adjustments", f"{kind} on {account_id}", account_id=account_id, kind=kind)
    assert adj["category"] == category, f"the {kind} should be category {category}, got {adj['category']}"
    assert adj["amount"] == amount, f"{why}: expected {amount:.2f}, got {adj['amount']}"
    return adj


def ask_judge(x: Any, judge: Any) -> None:
    """Every `rubrics_yesno` question of the task must be answered yes about the visible transcript."""
    checks.ask_judge(fx_of(x), x, judge)


__all__ = ["AUDIT", "ask_judge", "field", "fx_of", "never_verified", "new_one", "new_records", "none_new", "one_adjustment",
           "only", "verified"]
