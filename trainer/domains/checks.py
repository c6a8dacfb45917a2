"""Helpers for task checks: read specific records from a server's effects, and the collateral check.

A check should accept every tool path that reaches the correct end state, so it reads the
records that must be right and then asserts nothing else changed:

    from trainer.domains.checks import assert_no_collateral, new_one, record

    def test_checkout(x, judge):
        fx = x.effects["toy"]
        loan = new_one(fx, "loans", member_id="M-002", book_id="B-004")
        assert loan["due"] == "2025-03-17"
        assert record(fx, "books", "B-004")["status"] == "on_loan"
        assert_no_collateral(fx, allow=[f"loans[{loan['id']}]", "books[B-004].status"])

A trap task (nothing may change) ends with `assert_unchanged(fx)` and `ask_judge(fx, x, judge)`.

`fx` is the dict a server's `__reserved__geteffects` returned (docs/sandbox.md, "The server protocol"). Ids compare
as text, so `7` and `"7"` find the same row. Fields the domain declares unstable
(`fx["unstable_fields"]`) are ignored by the collateral check.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from trainer.env.db.backend import stable_state
from trainer.env.db.statediff import collateral_changes

Effects = Mapping[str, Any]
_WHICH = ("initial", "result", "golden")


def table(fx: Effects, name: str, which: str = "result") -> list[dict[str, Any]]:
    """All rows of a table in the `initial`, `result` (default) or `golden` state."""
    if which not in _WHICH:
        raise ValueError(f"which must be one of {_WHICH}")
    return list((fx.get(f"{which}_db_state") or {}).get(name) or [])


def record(fx: Effects, name: str, id: Any, which: str = "result") -> dict[str, Any] | None:
    """The row with this id, or None."""
    return next((r for r in table(fx, name, which) if str(r.get("id")) == str(id)), None)


def records(fx: Effects, name: str, which: str = "result", **where: Any) -> list[dict[str, Any]]:
    """Rows whose fields equal every `where` value."""
    return [r for r in table(fx, name, which) if all(r.get(k) == v for k, v in where.items())]


def new_records(fx: Effects, name: str, **where: Any) -> list[dict[str, Any]]:
    """Rows present in the result but not in the initial state, filtered by `where`."""
    before = {str(r.get("id")) for r in table(fx, name, "initial")}
    return [r for r in records(fx, name, **where) if str(r.get("id")) not in before]


def new_one(fx: Effects, name: str, what: str | None = None, /, **where: Any) -> dict[str, Any]:
    """Exactly one new row of `name` matching `where` (AssertionError otherwise). `what` names the
    row for the message ("expected one new <what>, found 0"); by default the table and `where`."""
    rows = new_records(fx, name, **where)
    assert len(rows) == 1, f"expected one new {what or f'{name} row with {where}'}, found {len(rows)}"
    return rows[0]


def none_new(fx: Effects, name: str, **where: Any) -> None:
    """No new row of `name` matches `where` (AssertionError listing them otherwise)."""
    rows = new_records(fx, name, **where)
    assert not rows, f"no new {name} row with {where} was expected, found {[r['id'] for r in rows]}"


def field(fx: Effects, name: str, id: Any, column: str) -> Any:
    """One field of one row in the result state (AssertionError when the row is gone)."""
    row = record(fx, name, id)
    assert row is not None, f"{name} {id} is missing"
    return row[column]


def verified(fx: Effects, who: str, **person: Any) -> None:
    """A passed identity check (table `identity_checks`) for `person` in this episode; `who` names
    the person in the message ("tenant", "customer")."""
    (key, value), = person.items()
    assert new_records(fx, "identity_checks", **person, result="passed"), \
        f"{who} {value} was never verified (no passed identity check)"


def never_verified(fx: Effects, who: str, **person: Any) -> None:
    """At least one failed identity check for `person`, and no passed one."""
    (key, value), = person.items()
    assert not new_records(fx, "identity_checks", **person, result="passed"), \
        f"{who} {value} was verified although the caller's details do not match"
    assert new_records(fx, "identity_checks", **person, result="failed"), \
        f"no verification of {who} {value} was attempted"


def ask_judge(fx: Effects, x: Any, judge: Any) -> None:
    """Every `rubrics_yesno` question of the server's task must be answered yes about the visible
    transcript (`x` is the test's context, `judge` its judge)."""
    for question in fx.get("rubrics_yesno") or []:
        assert judge.text_yesno(x.transcript(), question), f"judge: no to {question!r}"


def changes(fx: Effects, allow: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Initial → result changes not covered by `allow` (see `trainer.env.db.backend.collateral_changes`)."""
    unstable = fx.get("unstable_fields") or {}
    return collateral_changes(stable_state(fx.get("initial_db_state") or {}, unstable),
                              stable_state(fx.get("result_db_state") or {}, unstable), allow)


def assert_no_collateral(fx: Effects, allow: Iterable[str] = ()) -> None:
    """AssertionError listing every write outside `allow` (`table`, `table[id]`, `table[id].field`,
    `table[*].field`)."""
    extra = changes(fx, allow)
    if extra:
        lines = "; ".join(f"{c['path']} ({c['type']}: {c['golden']!r} -> {c['result']!r})" for c in extra[:10])
        more = f" and {len(extra) - 10} more" if len(extra) > 10 else ""
        raise AssertionError(f"unexpected changes: {lines}{more}")


def assert_unchanged(fx: Effects) -> None:
    """The database is exactly as it started (a trap task's correct end state)."""
    assert_no_collateral(fx, allow=())


__all__ = ["ask_judge", "assert_no_collateral", "assert_unchanged", "changes", "field", "never_verified", "new_one",
           "new_records", "none_new", "verified",
           "record", "records", "table"]
