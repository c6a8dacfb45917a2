"""Diffs of two canonical states: what explains a failed check, and the writes a task did not allow.

`diff_states` explains every mismatch row by row: `[{path, type, result, golden}]` with
`path` = `table[id]` (a whole row `missing` from or `extra` in the result) or
`table[id].field` (`changed`). `diff_db_states` does the same on two `DbState`s of one snapshot,
reading only the rows either one wrote. `collateral_changes` reuses it to list writes a task
did not allow.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from trainer.env.db.backend import DbState, TableDump, row_key


def _row_changes(result: Mapping[str, list[dict]], golden: Mapping[str, list[dict]]):
    """Yield `(table, id, field|None, type, result_value, golden_value)` for every mismatch."""
    for t in sorted(set(result) | set(golden)):
        a, b = result.get(t) or [], golden.get(t) or []
        if a == b:
            continue
        ka, kb = [row_key(r) for r in a], [row_key(r) for r in b]
        if ka == kb:  # same rows, some fields differ: compare in step (the common case, fast)
            for rid, x, y in zip(ka, a, b):
                if x != y:
                    yield from _field_changes(t, rid, x, y)
            continue
        ra, rb = dict(zip(ka, a)), dict(zip(kb, b))
        for rid in sorted(set(ra) | set(rb)):
            yield from _pair_changes(t, rid, ra.get(rid), rb.get(rid))


def _pair_changes(t: str, rid: str, x: Mapping[str, Any] | None, y: Mapping[str, Any] | None):
    """The changes between one row of the result (`x`) and of golden (`y`); None = no such row."""
    if x is None:
        if y is not None:
            yield t, rid, None, "missing", None, y
    elif y is None:
        yield t, rid, None, "extra", x, None
    elif x != y:
        yield from _field_changes(t, rid, x, y)


def _field_changes(t: str, rid: str, x: Mapping[str, Any], y: Mapping[str, Any]):
    for f in sorted(set(x) | set(y)):
        if x.get(f) != y.get(f) or (f in x) != (f in y):
            yield t, rid, f, "changed", x.get(f), y.get(f)


def _path(table: str, rid: str, field: str | None) -> str:
    return f"{table}[{rid}]" + (f".{field}" if field is not None else "")


def _entries(changes: Iterable[tuple]) -> list[dict[str, Any]]:
    """`_row_changes` tuples as diff entries `{path, type, result, golden}`."""
    return [{"path": _path(t, rid, f), "type": kind, "result": va, "golden": vb}
            for t, rid, f, kind, va, vb in changes]


def diff_states(result: Mapping[str, list[dict]], golden: Mapping[str, list[dict]]) -> list[dict[str, Any]]:
    """Row-level diff of two canonical (stable) states: `[{path, type, result, golden}]`.

    `missing`: a row golden has and result lacks; `extra`: the reverse; `changed`: one field.
    Empty iff the states are equal, so it explains every hash mismatch.
    """
    return _entries(_row_changes(result, golden))


def _dump_changes(t: str, a: TableDump, b: TableDump):
    """`_row_changes` of one table for two dumps of the same root: only rows either one wrote."""
    for rid in sorted(set(a.delta or ()) | set(b.delta or ())):
        yield from _pair_changes(t, rid, a.stable_row(rid), b.stable_row(rid))


def diff_db_states(result: DbState, golden: DbState) -> list[dict[str, Any]]:
    """`diff_states` on the stable parts, skipping tables whose fragments are identical; two
    dumps derived from the same snapshot dump compare only the rows they wrote."""
    out: list[dict[str, Any]] = []
    for t in sorted(set(result.tables) | set(golden.tables)):
        a, b = result.tables.get(t), golden.tables.get(t)
        if a is not None and b is not None:
            if a is b or a.stable_json == b.stable_json:
                continue
            if a.root is b.root and a.root.index is not None:
                changes = _dump_changes(t, a, b)
            else:
                changes = _row_changes({t: a.stable_rows}, {t: b.stable_rows})
        else:
            changes = _row_changes({t: a.stable_rows} if a else {}, {t: b.stable_rows} if b else {})
        out += _entries(changes)
    return out


_ALLOW = re.compile(r"^(?P<table>[^\[\].]+)(?:\[(?P<id>[^\]]*)\])?(?:\.(?P<field>.+))?$")


def _parse_allow(spec: str) -> tuple[str, str | None, str | None]:
    m = _ALLOW.match(spec)
    if not m:
        raise ValueError(f"allowed change {spec!r} must read 'table', 'table[id]' or 'table[id].field' "
                         "('*' matches any id)")
    return m["table"], m["id"], m["field"]


def collateral_changes(initial: Mapping[str, list[dict]], result: Mapping[str, list[dict]],
                       allow: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Changes from `initial` to `result` that `allow` does not cover, as diff entries
    (`result` = the value now, `golden` = the value before).

    `allow` entries: `"loans"` (any change in the table), `"loans[L-0004]"` (that row, created,
    deleted or changed), `"books[B-2].status"` (one field), `"books[*].status"` (that field of
    any row). Empty result: no writes outside what the task allows.
    """
    rules = [_parse_allow(s) for s in allow]

    def allowed(t: str, rid: str, f: str | None) -> bool:
        for rt, rr, rf in rules:
            if rt != t or (rr is not None and rr not in ("*", rid)):
                continue
            if rf is None or (f is not None and rf == f):
                return True
        return False

    return _entries(c for c in _row_changes(result, initial) if not allowed(*c[:3]))


__all__ = ["collateral_changes", "diff_db_states", "diff_states"]
