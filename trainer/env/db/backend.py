"""The SQLite backend: a seed snapshot, a private in-memory copy per session, canonical state.

A domain's seed database is a `Snapshot` (the bytes of a serialized SQLite database). Each
session opens a `Database`, a private in-memory copy made with `Connection.deserialize`
(tens of microseconds; nothing is shared, so sessions cannot see each other's writes). A
test's `data_patch` (`{table: [rows]}`) is applied as an upsert by `id`.

Canonical state (docs/sandbox.md, "The backend"): `{table: [row, ...]}` over the domain's tables (names not
starting with `_` or `sqlite_`; FTS indexes and shadow tables are not state), rows sorted by
`str(id)`, numbers canonical (`25.0` is written `25`, so REAL/INTEGER/NUMERIC spellings agree),
and the hash is SHA-256 of `json.dumps(stable_state, sort_keys=True, separators=(",", ":"))`
where the stable state drops the fields a domain declares unstable (e.g. wall-clock stamps).

Speed: sessions of one task share a patched snapshot (`Snapshot.patched`, cached by the caller),
so opening one is a `deserialize`. Each snapshot carries a change log: triggers on every state
table with an `id` append `(table, id)` to `_tbt_changes` for each row an INSERT, UPDATE or
DELETE touches (a tool's own writes, other triggers', FK cascades', REPLACE's deletions). A dump
re-reads only the logged rows and splices them into the snapshot's cached dump (per-row JSON
fragments included), so effects on a 5k-row database after one write read one row; two dumps of
the same snapshot are diffed on the rows either one wrote. Tables without an `id` fall back to
an authorizer that notes write statements, and are re-read whole.

Diffs of two states (what explains a failed check) are in trainer/env/db/statediff.py.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

from trainer.env.db.sqlpool import ConnectionPool

State = dict[str, list[dict[str, Any]]]
_SEP = (",", ":")
_WRITE_ACTIONS = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE)
_MAX_EXACT_INT = 2 ** 53


class PatchError(ValueError):
    """A `data_patch` names a table or column the database does not have, or a row lacks `id`."""


# ---------------------------------------------------------------------------- canonical values

def quote_ident(name: str) -> str:
    """An SQL identifier, double-quoted (names come from schemas and patches, never from SQL text)."""
    return '"' + name.replace('"', '""') + '"'


def insert_row(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> None:
    """INSERT one row given as {column: value}."""
    cols = list(row)
    conn.execute(f"INSERT INTO {quote_ident(table)} ({', '.join(map(quote_ident, cols))}) "
                 f"VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])


def canonical_value(v: Any) -> Any:
    """One JSON spelling per value: integral floats become ints (`25.0` → `25`, `-0.0` → `0`),
    bytes become hex text; everything else is returned as is."""
    if type(v) is float:
        return int(v) if v.is_integer() and abs(v) < _MAX_EXACT_INT else v
    if isinstance(v, (bytes, memoryview)):
        return bytes(v).hex()
    return v


def canonical_json(obj: Any) -> str:
    """The hashing spelling: sorted keys, no spaces (docs/sandbox.md, "The backend")."""
    return json.dumps(obj, sort_keys=True, separators=_SEP)


def state_hash(stable_state: Mapping[str, Any]) -> str:
    """SHA-256 hex of `canonical_json(stable_state)`."""
    return hashlib.sha256(canonical_json(stable_state).encode("utf-8")).hexdigest()


def row_key(row: Mapping[str, Any]) -> str:
    return str(row["id"]) if "id" in row else canonical_json(row)


def canonical_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with canonical values, sorted by `str(id)`."""
    out = [{k: canonical_value(v) for k, v in r.items()} for r in rows]
    out.sort(key=row_key)
    return out


def canonical_state(state: Mapping[str, Iterable[Mapping[str, Any]]]) -> State:
    """A state dict from any source (e.g. JSON) in canonical form, so states compare with `==`."""
    return {t: canonical_rows(rows) for t, rows in state.items()}


def stable_state(state: Mapping[str, list[dict[str, Any]]],
                 unstable: Mapping[str, Iterable[str]] | None = None) -> State:
    """`state` without the fields declared unstable (`{table: [field, ...]}`, `"*"` = every table)."""
    unstable = unstable or {}
    everywhere = set(unstable.get("*", ()))
    out: State = {}
    for t, rows in state.items():
        drop = everywhere | set(unstable.get(t, ()))
        out[t] = [{k: v for k, v in r.items() if k not in drop} for r in rows] if drop else list(rows)
    return out


# ---------------------------------------------------------------------------- table dumps

@dataclass(frozen=True)
class TableDump:
    """One table at one moment: canonical rows, and its stable part as a JSON fragment.

    A dump derived from a snapshot's dump by a session's writes (`Database.dump`) keeps `base`
    (that dump) and `delta` (row key -> stable row now, or None when deleted; only the rows the
    session wrote), so a diff against another dump of the same base reads only those rows.
    """

    name: str
    rows: list[dict[str, Any]]  # canonical, sorted, all fields
    stable_rows: list[dict[str, Any]]  # without unstable fields
    stable_json: str  # canonical_json(stable_rows)
    base: TableDump | None = None
    delta: dict[str, dict[str, Any] | None] | None = None
    _frags: tuple[list[str], list[str] | None] | None = None  # per-row JSON (stable, all fields)

    @cached_property
    def rows_json(self) -> str:
        """canonical_json(rows): the table's part of a `*_db_state` text."""
        if self.rows is self.stable_rows:
            return self.stable_json
        if self._frags is not None and self._frags[1] is not None:
            return "[" + ",".join(self._frags[1]) + "]"
        return canonical_json(self.rows)

    @property
    def root(self) -> TableDump:
        return self.base if self.base is not None else self

    @cached_property
    def keys(self) -> list[str]:
        """Each row's key (`str(id)`), in row order."""
        return [row_key(r) for r in self.rows]

    @cached_property
    def index(self) -> dict[str, int] | None:
        """Key -> position, or None when keys repeat (ids not unique, or identical id-less rows)."""
        index = {k: i for i, k in enumerate(self.keys)}
        return index if len(index) == len(self.keys) else None

    @cached_property
    def frags(self) -> tuple[list[str], list[str] | None]:
        """Per-row canonical JSON: stable rows, and all-field rows when fields are dropped."""
        if self._frags is not None:
            return self._frags
        stable = [canonical_json(r) for r in self.stable_rows]
        return stable, None if self.rows is self.stable_rows else [canonical_json(r) for r in self.rows]

    def stable_row(self, key: str) -> dict[str, Any] | None:
        """The stable row with this key, or None (needs a unique-key root)."""
        if self.delta is not None and key in self.delta:
            return self.delta[key]
        root = self.root
        i = root.index.get(key) if root.index is not None else None
        return None if i is None else root.stable_rows[i]


def _canonical_sql(col: str) -> str:
    # canonical_value in SQL: integral REALs as INTEGER, BLOBs as lower-case hex
    q = quote_ident(col)
    return (f"CASE typeof({q}) WHEN 'real' THEN (CASE WHEN {q} = CAST({q} AS INTEGER) "
            f"AND abs({q}) < {_MAX_EXACT_INT} THEN CAST({q} AS INTEGER) ELSE {q} END) "
            f"WHEN 'blob' THEN lower(hex({q})) ELSE {q} END")


def dump_table(conn: sqlite3.Connection, info: TableInfo, drop: frozenset[str]) -> TableDump:
    cols = info.columns
    rows = [dict(zip(cols, r)) for r in conn.execute(info.select_sql)]
    if "id" not in cols:  # no id: order by each row's canonical spelling, in Python (`row_key`)
        rows.sort(key=row_key)
    stable = [{k: v for k, v in r.items() if k not in drop} for r in rows] if drop else rows
    return TableDump(info.name, rows, stable, canonical_json(stable))


def _dump_changed(conn: sqlite3.Connection, info: TableInfo, base: TableDump, drop: frozenset[str]) -> TableDump | None:
    """`base` with the rows this connection's change log names re-read: O(changed rows), not
    O(table). None when the fast path does not apply (keys not unique, many changes): the
    caller then dumps the whole table."""
    index = base.index
    if index is None:
        return None
    logged = {str(canonical_value(i)) for (i,) in conn.execute(_LOGGED_IDS_SQL, (info.name,))}
    if not logged:
        return base
    if 4 * len(logged) > len(base.rows) + 64:
        return None
    fetched = conn.execute(info.changed_sql, (info.name,)).fetchall()
    cols = info.columns
    new = [dict(zip(cols, r)) for r in fetched]
    new_keys = [str(r["id"]) for r in new]
    if len(set(new_keys)) != len(new_keys) or not set(new_keys) <= logged:
        return None  # ids repeat, or a row changed without being logged: read it all
    stable_new = [{k: v for k, v in r.items() if k not in drop} for r in new] if drop else new
    rows, keys = list(base.rows), list(base.keys)
    stable = list(base.stable_rows) if drop else rows
    sfr, rfr = base.frags
    sfr = list(sfr)
    rfr = list(rfr) if rfr is not None else None
    for pos in sorted((index[k] for k in logged if k in index), reverse=True):
        del rows[pos], keys[pos], sfr[pos]
        if drop:
            del stable[pos]
        if rfr is not None:
            del rfr[pos]
    for key, row, srow in sorted(zip(new_keys, new, stable_new), key=lambda x: x[0]):
        pos = bisect.bisect_left(keys, key)
        keys.insert(pos, key)
        rows.insert(pos, row)
        if drop:
            stable.insert(pos, srow)
        sfr.insert(pos, canonical_json(srow))
        if rfr is not None:
            rfr.insert(pos, canonical_json(row))
    delta: dict[str, dict[str, Any] | None] = {k: None for k in logged}
    delta.update(zip(new_keys, stable_new))
    dump = TableDump(info.name, rows, stable, "[" + ",".join(sfr) + "]", base=base, delta=delta,
                     _frags=(sfr, rfr))
    dump.__dict__["keys"] = keys
    return dump


@dataclass
class DbState:
    """The canonical state of a database: per-table dumps, with the views the protocol needs."""

    tables: dict[str, TableDump]  # sorted by table name

    @property
    def state(self) -> State:
        """All fields (`*_db_state` in effects)."""
        return {t: d.rows for t, d in self.tables.items()}

    @property
    def stable(self) -> State:
        """Unstable fields removed (what the hash and the diff read)."""
        return {t: d.stable_rows for t, d in self.tables.items()}

    @cached_property
    def stable_json(self) -> str:
        """Equals `canonical_json(self.stable)`, assembled from the per-table fragments."""
        return "{" + ",".join(f"{json.dumps(t)}:{d.stable_json}" for t, d in self.tables.items()) + "}"

    @cached_property
    def state_json(self) -> str:
        """Equals `canonical_json(self.state)` (all fields), assembled from per-table fragments."""
        return "{" + ",".join(f"{json.dumps(t)}:{d.rows_json}" for t, d in self.tables.items()) + "}"

    @cached_property
    def hash(self) -> str:
        """`state_hash(self.stable)`: the protocol's `*_db_hash`."""
        return hashlib.sha256(self.stable_json.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- snapshot and sessions

@dataclass(frozen=True)
class TableInfo:
    """A state table: its columns (sorted) and the query that reads it in canonical form."""

    name: str
    columns: tuple[str, ...]

    @cached_property
    def select_sql(self) -> str:
        # ids sort as text (SQLite's binary order of UTF-8 = Python's order of str)
        order = " ORDER BY CAST(id AS TEXT)" if "id" in self.columns else ""
        return f"SELECT {', '.join(map(_canonical_sql, self.columns))} FROM {quote_ident(self.name)}{order}"

    @cached_property
    def changed_sql(self) -> str:
        # the rows (still present) whose ids the change log names
        return (f"SELECT {', '.join(map(_canonical_sql, self.columns))} FROM {quote_ident(self.name)} "
                f"WHERE id IN (SELECT id FROM {CHANGE_LOG} WHERE tbl = ?)")


def _state_tables(conn: sqlite3.Connection) -> dict[str, TableInfo]:
    out = {}
    for _schema, name, kind, *_ in conn.execute("PRAGMA main.table_list"):
        if kind != "table" or name.startswith(("_", "sqlite_")):
            continue
        cols = tuple(sorted(r[1] for r in conn.execute(f"PRAGMA main.table_info({quote_ident(name)})")))
        out[name] = TableInfo(name, cols)
    return dict(sorted(out.items()))


CHANGE_LOG = "_tbt_changes"
_LOGGED_IDS_SQL = f"SELECT DISTINCT id FROM {CHANGE_LOG} WHERE tbl = ?"
_ANY_LOGGED_SQL = f"SELECT EXISTS (SELECT 1 FROM {CHANGE_LOG})"


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _install_change_log(conn: sqlite3.Connection, tables: Mapping[str, TableInfo]) -> None:
    """A `_tbt_changes(tbl, id)` table and, on every state table with an `id`, triggers that log
    the ids an INSERT, UPDATE or DELETE touches (its own writes, other triggers', FK cascades')."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {CHANGE_LOG} (tbl TEXT NOT NULL, id)")
    for name, info in tables.items():
        if "id" not in info.columns:
            continue
        q, lit = quote_ident(name), _sql_text(name)
        log = f"INSERT INTO {CHANGE_LOG} (tbl, id) VALUES"
        for event, body in (("INSERT", f"{log} ({lit}, NEW.id);"),
                            ("UPDATE", f"{log} ({lit}, OLD.id), ({lit}, NEW.id);"),
                            ("DELETE", f"{log} ({lit}, OLD.id);")):
            trigger = quote_ident(f"_tbt_{event.lower()}_{name}")
            conn.execute(f"CREATE TRIGGER IF NOT EXISTS {trigger} AFTER {event} ON {q} BEGIN {body} END")


POOL = ConnectionPool(int(float(os.environ.get("TBT_POOL_MB", "256")) * 2 ** 20))


class Snapshot:
    """An immutable seed database. `open()` gives each session its own in-memory copy.

    `unstable` maps table → fields left out of hash and diff (`"*"` applies to every table).
    Dumps of the seed's tables are computed once and shared by every session (read-only).
    """

    def __init__(self, data: bytes, unstable: Mapping[str, Iterable[str]] | None = None,
                 _base: Snapshot | None = None, _patched: Iterable[str] = ()):
        self.data = bytes(data)
        self.unstable = {t: frozenset(f) for t, f in (unstable or {}).items()}
        if _base is not None:
            self.tables = _base.tables
        else:
            conn = self._connect()
            try:
                self.tables = _state_tables(conn)
                _install_change_log(conn, self.tables)
                conn.execute(f"DELETE FROM {CHANGE_LOG}")
                self.data = conn.serialize()
            finally:
                conn.close()
        self.fingerprint = hashlib.sha256(self.data).hexdigest()
        # a patched snapshot borrows its base's dumps of the tables the patch did not touch
        self._base = _base
        self._patched = frozenset(_patched)
        self._dumps: dict[str, TableDump] = {}
        self._lock = threading.Lock()
        self.idle_connections: list[sqlite3.Connection] = []  # pooled connections at this state (see POOL)

    @classmethod
    def from_connection(cls, conn: sqlite3.Connection,
                        unstable: Mapping[str, Iterable[str]] | None = None) -> Snapshot:
        return cls(conn.serialize(), unstable)

    @classmethod
    def build(cls, schema_sql: str, load: Callable[[sqlite3.Connection], None] | None = None,
              unstable: Mapping[str, Iterable[str]] | None = None) -> Snapshot:
        """Create the schema in a fresh database, let `load` fill it, and freeze the result."""
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            conn.executescript(schema_sql)
            if load is not None:
                conn.execute("BEGIN")
                load(conn)
                conn.execute("COMMIT")
            return cls.from_connection(conn, unstable)
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.deserialize(self.data)
        return conn

    def drop_fields(self, table: str) -> frozenset[str]:
        return self.unstable.get(table, frozenset()) | self.unstable.get("*", frozenset())

    def seed_dump(self, table: str) -> TableDump:
        """This snapshot's dump of `table`, computed once and shared (treat it as read-only)."""
        if self._base is not None and table not in self._patched:
            return self._base.seed_dump(table)
        dump = self._dumps.get(table)
        if dump is None:
            with self._lock:
                dump = self._dumps.get(table)
                if dump is None:
                    conn = self._connect()
                    try:
                        dump = self._dumps[table] = dump_table(conn, self.tables[table], self.drop_fields(table))
                    finally:
                        conn.close()
        return dump

    def state(self) -> DbState:
        """The snapshot's own canonical state (shared dumps)."""
        return DbState({t: self.seed_dump(t) for t in self.tables})

    def open(self, *, pooled: bool = True) -> Database:
        """A private in-memory copy for one session. `pooled`: the session runs in a transaction
        that closing rolls back, and the connection is reused (see `ConnectionPool`)."""
        return Database(self, pooled=pooled)

    def patched(self, patch: Mapping[str, Any] | None) -> Snapshot:
        """A new snapshot: this one with `data_patch` applied (see `Database.apply_patch`).
        Sessions of the same task then open the patched bytes directly (no per-session patch)."""
        if not patch:
            return self
        db = self.open(pooled=False)  # its committed state is serialized
        try:
            db.apply_patch(patch)
            patched = db.dirty
            db.conn.execute(f"DELETE FROM {CHANGE_LOG}")  # the patched state is the new baseline
            return Snapshot(db.conn.serialize(), {t: list(f) for t, f in self.unstable.items()},
                            _base=self, _patched=patched)
        finally:
            db.close()


class Database:
    """One session's private database. `conn` is its own until `close()`."""

    def __init__(self, snapshot: Snapshot, *, pooled: bool = True):
        self.snapshot = snapshot
        self.pooled = pooled
        conn = POOL.take(snapshot) if pooled else None
        if conn is None:
            conn = snapshot._connect()
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA recursive_triggers = ON")  # REPLACE's deletions are logged too
        self.conn = conn
        # Tables with an `id` are tracked by the change log; only the others need the authorizer
        # (it costs a Python call per column of every statement compiled).
        self._untracked = frozenset(t for t, info in snapshot.tables.items() if "id" not in info.columns)
        self._written: set[str] = set()  # untracked tables a write statement was compiled against
        conn.set_authorizer(self._authorize if self._untracked else None)
        if pooled:
            conn.execute("BEGIN")  # the whole session is one transaction, rolled back at close

    def _authorize(self, action: int, arg1: str | None, _a2: Any, _db: Any, _src: Any) -> int:
        if action in _WRITE_ACTIONS and arg1 in self._untracked:
            self._written.add(arg1)
        return sqlite3.SQLITE_OK

    @property
    def dirty(self) -> set[str]:
        """State tables this session may have changed: those with logged row changes, and
        untracked tables (no `id`) that a write statement was compiled against."""
        logged = {t for (t,) in self.conn.execute(f"SELECT DISTINCT tbl FROM {CHANGE_LOG}")}
        return (logged & self.snapshot.tables.keys()) | self._written

    def apply_patch(self, patch: Mapping[str, Any] | None) -> None:
        """Upsert `{table: [rows]}` by `id`: an existing row gets the given columns updated,
        a new id is inserted. Dict/list values are stored as canonical JSON text. All or nothing."""
        if not patch:
            return
        if not isinstance(patch, Mapping):
            raise PatchError(f"data_patch must map table -> list of rows, got {type(patch).__name__}")
        conn = self.conn
        conn.execute("SAVEPOINT patch")
        try:
            for table, rows in patch.items():
                info = self.snapshot.tables.get(table)
                if info is None:
                    raise PatchError(f"data_patch: unknown table {table!r} "
                                     f"(tables: {', '.join(self.snapshot.tables)})")
                if not isinstance(rows, list):
                    raise PatchError(f"data_patch.{table}: must be a list of rows")
                for i, row in enumerate(rows):
                    self._upsert(info, row, f"data_patch.{table}[{i}]")
        except BaseException:
            conn.execute("ROLLBACK TO patch")
            conn.execute("RELEASE patch")
            raise
        conn.execute("RELEASE patch")

    def _upsert(self, info: TableInfo, row: Any, where: str) -> None:
        if not isinstance(row, Mapping) or "id" not in row:
            raise PatchError(f"{where}: each row must be a mapping with an `id`")
        unknown = [k for k in row if k not in info.columns]
        if unknown:
            raise PatchError(f"{where}: unknown column(s) {unknown} in table {info.name!r}")
        values = {k: canonical_json(v) if isinstance(v, (dict, list)) else v for k, v in row.items()}
        cols = list(values)
        exists = self.conn.execute(f"SELECT 1 FROM {quote_ident(info.name)} WHERE id = ?", (values["id"],)).fetchone()
        try:
            if exists:
                sets = ", ".join(f"{quote_ident(c)} = ?" for c in cols if c != "id")
                if sets:
                    self.conn.execute(f"UPDATE {quote_ident(info.name)} SET {sets} WHERE id = ?",
                                      [values[c] for c in cols if c != "id"] + [values["id"]])
            else:
                insert_row(self.conn, info.name, values)
        except sqlite3.Error as e:
            raise PatchError(f"{where}: {e}") from None

    def dump(self) -> DbState:
        """The canonical state now. Tables never written in this session reuse the seed's dump;
        written ones re-read only the rows the change log names (whole table as a fallback)."""
        snap = self.snapshot
        dirty = self.dirty
        out: dict[str, TableDump] = {}
        for t, info in snap.tables.items():
            if t not in dirty:
                out[t] = snap.seed_dump(t)
                continue
            drop = snap.drop_fields(t)
            dump = _dump_changed(self.conn, info, snap.seed_dump(t), drop) if "id" in info.columns else None
            out[t] = dump if dump is not None else dump_table(self.conn, info, drop)
        return DbState(out)

    def close(self) -> None:
        """End the session: roll its writes back and pool the connection (or close it)."""
        conn = self.conn
        if conn is None:
            return
        self.conn = None  # type: ignore[assignment]
        if self.pooled and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
                conn.set_authorizer(None)
                # a write committed mid-session (COMMIT, then BEGIN again) would survive: never pool it
                clean = not self._written and not conn.execute(_ANY_LOGGED_SQL).fetchone()[0]
            except sqlite3.Error:
                clean = False
            if clean:
                POOL.give(self.snapshot, conn)
            else:
                conn.close()
        else:  # not pooled, or the session's transaction was committed by someone: not reusable
            conn.close()


__all__ = [
    "CHANGE_LOG", "POOL", "ConnectionPool", "Database", "DbState", "PatchError", "Snapshot",
    "State", "TableDump",
    "canonical_json", "canonical_rows", "canonical_state", "canonical_value", "row_key",
    "insert_row", "quote_ident", "stable_state", "state_hash",
]
