"""Check helpers of the property tasks, on top of `trainer.domains.checks`.

Every tenant-facing task requires a passed identity check for its tenant (the policy's first
rule, and the one write the database can show), reads the records the task is about, and ends
with the collateral check. Identity checks and account notes are audit rows any path may add.
"""

from __future__ import annotations

from typing import Any, Iterable

from trainer.domains import checks
from trainer.domains.checks import assert_no_collateral, field, new_one, none_new

AUDIT = ("identity_checks", "notes")


def fx_of(x: Any) -> dict[str, Any]:
    """The property server's effects of an episode."""
    return x.effects["property"]


def verified(fx: dict[str, Any], tenant_id: str) -> None:
    """A passed identity check for `tenant_id` was made in this episode."""
    checks.verified(fx, "tenant", tenant_id=tenant_id)


def never_verified(fx: dict[str, Any], tenant_id: str) -> None:
    """At least one failed attempt for `tenant_id`, and no passed one."""
    checks.never_verified(fx, "tenant", tenant_id=tenant_id)


def only(fx: dict[str, Any], allow: Iterable[str] = ()) -> None:
    """No writes outside `allow` and the audit tables."""
    assert_no_collateral(fx, allow=[*AUDIT, *allow])


def same_text(a: Any, b: str) -> bool:
    """Free text typed by a person: equal up to case, spacing and a trailing period."""
    norm = lambda s: " ".join(str(s or "").replace(",", " , ").split()).casefold().rstrip(".")  # noqa: E731
    return norm(a) == norm(b)


def ask_judge(x: Any, judge: Any) -> None:
    """Every `rubrics_yesno` question of the task must be answered yes about the visible transcript."""
    checks.ask_judge(fx_of(x), x, judge)


__all__ = ["AUDIT", "ask_judge", "field", "fx_of", "never_verified", "new_one", "none_new", "only", "same_text",
           "verified"]
