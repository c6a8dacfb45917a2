"""The SQLite backend: private copies, data_patch upserts, canonical state, hash, diff, caches."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.env.db.backend import (
    PatchError, Snapshot, canonical_json, canonical_state, canonical_value, stable_state, state_hash,
)
from trainer.env.db.cache import ComputeCache, golden_key
from trainer.env.db.statediff import collateral_changes, diff_db_states, diff_states

SCHEMA = """
CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT NOT NULL, price REAL, qty INTEGER,
                    note, touched_at REAL);
CREATE TABLE tags (id INTEGER PRIMARY KEY, item_id TEXT REFERENCES items(id) ON DELETE CASCADE, label TEXT);
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, item_id TEXT, what TEXT);
CREATE TRIGGER items_audit AFTER UPDATE OF price ON items
BEGIN INSERT INTO audit (item_id, what) VALUES (new.id, 'price'); END;
CREATE TABLE _internal (id INTEGER PRIMARY KEY, x TEXT);
CREATE VIRTUAL TABLE _search USING fts5(body);
"""
ROWS = [("a", "apple", 1.5, 3, None), ("b", "bread", 2.0, 1, None), ("c", "cheese", 7.25, 0, None)]


def make_snapshot(order=(0, 1, 2), unstable=None) -> Snapshot:
    def load(conn: sqlite3.Connection) -> None:
        for i in order:
            conn.execute("INSERT INTO items (id, name, price, qty, note) VALUES (?, ?, ?, ?, ?)", ROWS[i])
        conn.execute("INSERT INTO tags (id, item_id, label) VALUES (1, 'a', 'fruit'), (2, 'c', 'dairy')")
        conn.execute("INSERT INTO _internal (x) VALUES ('not state')")
        conn.execute("INSERT INTO _search (body) VALUES ('not state either')")

    return Snapshot.build(SCHEMA, load, unstable if unstable is not None else {"items": ["touched_at"]})


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return make_snapshot()


# ---------------------------------------------------------------------------- canonical form

def test_canonical_value_spells_each_number_once():
    assert canonical_value(25.0) == 25 and type(canonical_value(25.0)) is int
    assert canonical_value(-0.0) == 0 and type(canonical_value(-0.0)) is int
    assert canonical_value(2.5) == 2.5
    assert canonical_value(2.0 ** 60) == 2.0 ** 60  # beyond exact ints: left a float
    assert canonical_value(b"\x01\xff") == "01ff"
    assert canonical_value("25") == "25" and canonical_value(None) is None


def test_state_covers_only_domain_tables_sorted_by_id(snap):
    state = snap.state()
    assert list(state.tables) == ["audit", "items", "tags"]  # no _internal, no FTS shadow tables
    assert [r["id"] for r in state.state["items"]] == ["a", "b", "c"]
    assert state.state["items"][1]["price"] == 2 and type(state.state["items"][1]["price"]) is int


def test_hash_is_sha256_of_canonical_stable_json(snap):
    state = snap.state()
    assert state.stable_json == canonical_json(state.stable)
    assert state.hash == state_hash(state.stable)
    assert "touched_at" in state.state["items"][0] and "touched_at" not in state.stable["items"][0]


def test_hash_stable_under_row_insert_order():
    assert make_snapshot((0, 1, 2)).state().hash == make_snapshot((2, 0, 1)).state().hash


def test_numeric_spellings_hash_equal(snap):
    a, b = snap.open(), snap.open()
    a.apply_patch({"items": [{"id": "a", "price": 25, "note": 3}]})
    b.apply_patch({"items": [{"id": "a", "price": 25.0, "note": 3.0}]})  # `note` has no affinity: stored as given
    assert a.conn.execute("SELECT typeof(note) FROM items WHERE id='a'").fetchone() == ("integer",)
    assert b.conn.execute("SELECT typeof(note) FROM items WHERE id='a'").fetchone() == ("real",)
    assert a.dump().hash == b.dump().hash
    assert canonical_state({"t": [{"id": 1, "v": 25.0}]}) == canonical_state({"t": [{"v": 25, "id": 1.0}]})


def test_read_only_calls_leave_hash_and_dirty_set_unchanged(snap):
    db = snap.open()
    before = db.dump().hash
    db.conn.execute("SELECT * FROM items JOIN tags ON tags.item_id = items.id").fetchall()
    db.conn.execute("SELECT count(*) FROM audit").fetchall()
    assert db.dirty == set() and db.dump().hash == before == snap.state().hash


def test_unstable_fields_excluded_from_hash_and_diff_but_kept_in_state(snap):
    db = snap.open()
    db.conn.execute("UPDATE items SET touched_at = 12345.5 WHERE id = 'b'")
    after = db.dump()
    assert after.hash == snap.state().hash
    assert diff_db_states(after, snap.state()) == []
    assert after.state["items"][1]["touched_at"] == 12345.5
    assert stable_state({"t": [{"id": 1, "x": 1, "y": 2}]}, {"*": ["y"]}) == {"t": [{"id": 1, "x": 1}]}


# ---------------------------------------------------------------------------- isolation, patches, dirty tables

def test_sessions_are_private_copies(snap):
    a, b = snap.open(), snap.open()
    a.conn.execute("DELETE FROM items WHERE id = 'b'")
    assert b.conn.execute("SELECT count(*) FROM items").fetchone() == (3,)
    assert snap.open().conn.execute("SELECT count(*) FROM items").fetchone() == (3,)
    a.close()
    assert b.conn.execute("SELECT count(*) FROM items").fetchone() == (3,)


def test_patch_upserts_by_id(snap):
    db = snap.open()
    db.apply_patch({"items": [{"id": "a", "qty": 9}, {"id": "z", "name": "zucchini", "price": 1}],
                    "tags": [{"id": 3, "item_id": "z", "label": {"k": [1, 2]}}]})
    items = {r["id"]: r for r in db.dump().state["items"]}
    assert items["a"]["qty"] == 9 and items["a"]["name"] == "apple" and items["a"]["price"] == 1.5
    assert items["z"]["name"] == "zucchini" and items["z"]["qty"] is None
    assert db.dump().state["tags"][-1]["label"] == '{"k":[1,2]}'  # nested values stored as canonical JSON


@pytest.mark.parametrize("patch, message", [
    ({"nope": [{"id": 1}]}, "unknown table 'nope'"),
    ({"items": [{"id": "a", "colour": "red"}]}, "unknown column"),
    ({"items": [{"name": "no id"}]}, "must be a mapping with an `id`"),
    ({"items": {"id": "a"}}, "must be a list of rows"),
    ({"items": [{"id": "q", "name": None}]}, "NOT NULL"),
    ({"tags": [{"id": 9, "item_id": "missing"}]}, "FOREIGN KEY"),
])
def test_bad_patches_raise_and_apply_nothing(snap, patch, message):
    db = snap.open()
    good_then_bad = {"items": [{"id": "a", "qty": 100}], **patch} if "items" not in patch else patch
    with pytest.raises(PatchError, match=message):
        db.apply_patch(good_then_bad)
    assert db.dump().hash == snap.state().hash


def test_writes_through_triggers_and_cascades_are_seen(snap):
    db = snap.open()
    db.conn.execute("UPDATE items SET price = 3 WHERE id = 'a'")  # trigger writes audit
    db.conn.execute("DELETE FROM items WHERE id = 'c'")  # cascade deletes tag 2
    assert {"items", "audit", "tags"} <= db.dirty
    state = db.dump().state
    assert [r["what"] for r in state["audit"]] == ["price"]
    assert [r["id"] for r in state["tags"]] == [1]


def test_patched_snapshot_shares_untouched_table_dumps(snap):
    p = snap.patched({"items": [{"id": "a", "qty": 0}]})
    assert p.seed_dump("tags") is snap.seed_dump("tags")
    assert p.seed_dump("items") is not snap.seed_dump("items")
    db = p.open()
    assert db.dirty == set() and db.dump().hash == p.state().hash != snap.state().hash
    assert snap.patched({}) is snap


# ---------------------------------------------------------------------------- diff and collateral

def test_diff_shape_and_kinds():
    golden = {"items": [{"id": "a", "qty": 1}, {"id": "b", "qty": 2}], "tags": []}
    result = {"items": [{"id": "a", "qty": 5}, {"id": "c", "qty": 0}], "tags": []}
    assert diff_states(result, golden) == [
        {"path": "items[a].qty", "type": "changed", "result": 5, "golden": 1},
        {"path": "items[b]", "type": "missing", "result": None, "golden": {"id": "b", "qty": 2}},
        {"path": "items[c]", "type": "extra", "result": {"id": "c", "qty": 0}, "golden": None},
    ]
    assert diff_states(golden, golden) == []


def test_diff_of_db_states_explains_hash_mismatch(snap):
    db = snap.open()
    db.conn.execute("UPDATE items SET qty = 4 WHERE id = 'b'")
    result = db.dump()
    assert result.hash != snap.state().hash
    assert diff_db_states(result, snap.state()) == [
        {"path": "items[b].qty", "type": "changed", "result": 4, "golden": 1}]


row = st.fixed_dictionaries({"id": st.integers(0, 5), "v": st.one_of(st.integers(-3, 3), st.sampled_from([1.0, 2.5]),
                                                                    st.none(), st.text(max_size=2))})
states = st.dictionaries(st.sampled_from(["t", "u"]), st.lists(row, max_size=5, unique_by=lambda r: r["id"]))


@settings(max_examples=150, deadline=None)
@given(states, states)
def test_diff_is_empty_exactly_when_hashes_agree(a, b):
    a, b = canonical_state(a), canonical_state(b)
    a = {t: a.get(t, []) for t in ("t", "u")}
    b = {t: b.get(t, []) for t in ("t", "u")}
    assert (diff_states(a, b) == []) == (state_hash(a) == state_hash(b))


def test_collateral_changes_respect_allowed_paths():
    initial = {"items": [{"id": "a", "qty": 1, "name": "x"}, {"id": "b", "qty": 2, "name": "y"}], "tags": []}
    result = {"items": [{"id": "a", "qty": 0, "name": "x"}, {"id": "b", "qty": 2, "name": "z"}],
              "tags": [{"id": 7, "label": "new"}]}
    paths = lambda allow: [c["path"] for c in collateral_changes(initial, result, allow)]  # noqa: E731
    assert paths([]) == ["items[a].qty", "items[b].name", "tags[7]"]
    assert paths(["tags", "items[a].qty"]) == ["items[b].name"]
    assert paths(["items[*].qty", "items[b]"]) == ["tags[7]"]
    assert paths(["tags[7]", "items"]) == []
    assert paths(["items[a].name"]) == ["items[a].qty", "items[b].name", "tags[7]"]
    with pytest.raises(ValueError):
        collateral_changes(initial, result, ["items[a"])


# ---------------------------------------------------------------------------- caches

def test_golden_key_ignores_dict_order():
    assert golden_key("d", {"a": 1, "b": [1, 2]}) == golden_key("d", {"b": [1, 2], "a": 1})
    assert golden_key("d", {"a": 1}) != golden_key("d", {"a": 1.5})


def test_compute_cache_computes_once_and_evicts_lru():
    calls = []
    cache = ComputeCache(maxsize=2)
    get = lambda k: cache.get_or_compute(k, lambda: calls.append(k) or k.upper())  # noqa: E731
    assert [get("a"), get("a"), get("b"), get("c"), get("a")] == ["A", "A", "B", "C", "A"]
    assert calls == ["a", "b", "c", "a"] and len(cache) == 2 and cache.hits == 1


def test_snapshot_dumps_are_thread_safe():
    s = make_snapshot()
    results = []
    threads = [threading.Thread(target=lambda: results.append(s.seed_dump("items"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is results[0] for r in results)
    assert json.loads(results[0].stable_json)[0]["id"] == "a"


# ---------------------------------------------------------------------------- incremental dumps

WRITE = st.one_of(
    st.tuples(st.just("INSERT INTO items (id, name, price, qty) VALUES (?, 'n', ?, ?)"),
              st.tuples(st.sampled_from("abcdefgh"), st.sampled_from([1, 2.0, 2.5, None]), st.integers(0, 3))),
    st.tuples(st.just("INSERT OR REPLACE INTO items (id, name, price) VALUES (?, 'r', ?)"),
              st.tuples(st.sampled_from("abcdefgh"), st.sampled_from([3, 4.0]))),
    st.tuples(st.just("UPDATE items SET price = ? WHERE id = ?"),  # fires the audit trigger
              st.tuples(st.sampled_from([5, 5.5, 7.0]), st.sampled_from("abcdefgh"))),
    st.tuples(st.just("UPDATE items SET id = ? WHERE id = ?"), st.tuples(st.sampled_from("xyz"), st.sampled_from("abc"))),
    st.tuples(st.just("UPDATE items SET touched_at = ? WHERE id = ?"), st.tuples(st.floats(0, 9), st.sampled_from("abc"))),
    st.tuples(st.just("DELETE FROM items WHERE id = ?"), st.tuples(st.sampled_from("abcdefgh"))),  # cascades to tags
    st.tuples(st.just("INSERT INTO tags (item_id, label) VALUES (?, ?)"), st.tuples(st.sampled_from("abc"), st.text(max_size=3))),
    st.tuples(st.just("UPDATE tags SET label = ? WHERE 1"), st.tuples(st.text(max_size=2))),
    st.tuples(st.just("DELETE FROM tags"), st.just(())),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(WRITE, max_size=8), st.lists(WRITE, max_size=8))
def test_incremental_dump_equals_full_read(writes_a, writes_b):
    """A session's dump re-reads only logged rows; it must equal reading every table again,
    and diffs of two such dumps must equal the row-by-row diff of the full states."""
    from trainer.env.db.backend import dump_table

    snap = make_snapshot()
    dbs = []
    for writes in (writes_a, writes_b):
        db = snap.open()
        for sql, params in writes:
            try:
                db.conn.execute(sql, params)
            except sqlite3.IntegrityError:
                pass
        dbs.append(db)
    dumps = [db.dump() for db in dbs]
    for db, dump in zip(dbs, dumps):
        full = {t: dump_table(db.conn, info, snap.drop_fields(t)) for t, info in snap.tables.items()}
        assert {t: d.rows for t, d in dump.tables.items()} == {t: d.rows for t, d in full.items()}
        for t, d in dump.tables.items():
            assert d.stable_json == full[t].stable_json and d.rows_json == canonical_json(full[t].rows)
    a, b = dumps
    assert diff_db_states(a, b) == diff_states(a.stable, b.stable)
    assert diff_db_states(a, snap.state()) == diff_states(a.stable, snap.state().stable)
    assert (diff_db_states(a, b) == []) == (a.hash == b.hash)


def test_incremental_dump_reads_only_changed_rows():
    big = Snapshot.build("CREATE TABLE t (id TEXT PRIMARY KEY, v INTEGER);",
                         lambda c: c.executemany("INSERT INTO t VALUES (?, ?)", [(f"r{i:05d}", i) for i in range(5000)]))
    seed = big.seed_dump("t")
    db = big.open()
    db.conn.execute("UPDATE t SET v = -1 WHERE id = 'r00007'")
    db.conn.execute("DELETE FROM t WHERE id = 'r00009'")
    db.conn.execute("INSERT INTO t VALUES ('r00008a', 3)")
    dump = db.dump().tables["t"]
    assert dump.base is seed and set(dump.delta) == {"r00007", "r00009", "r00008a"}
    assert dump.rows[7] == {"id": "r00007", "v": -1} and dump.rows[9]["id"] == "r00008a" and len(dump.rows) == 5000
    assert sum(a is b for a, b in zip(dump.rows, seed.rows)) == 4998  # untouched rows are shared objects
    assert diff_db_states(db.dump(), big.state()) == [
        {"path": "t[r00007].v", "type": "changed", "result": -1, "golden": 7},
        {"path": "t[r00008a]", "type": "extra", "result": {"id": "r00008a", "v": 3}, "golden": None},
        {"path": "t[r00009]", "type": "missing", "result": None, "golden": {"id": "r00009", "v": 9}}]


# ---------------------------------------------------------------------------- the connection pool

def test_closed_sessions_hand_back_a_pristine_connection(snap):
    from trainer.env.db.backend import POOL, CHANGE_LOG

    POOL.clear()
    a = snap.open()
    conn = a.conn
    a.conn.execute("UPDATE items SET price = 99 WHERE id = 'a'")  # also fires the audit trigger
    a.conn.execute("DELETE FROM items WHERE id = 'c'")  # and the FK cascade
    a.apply_patch({"items": [{"id": "n", "name": "new"}]})
    assert a.dump().hash != snap.state().hash
    a.close()
    assert POOL.idle == 1
    b = snap.open()
    assert b.conn is conn and POOL.idle == 0  # the same connection, schema already parsed ...
    assert b.dirty == set() and b.dump().hash == snap.state().hash  # ... holding the snapshot exactly
    assert b.conn.execute(f"SELECT count(*) FROM {CHANGE_LOG}").fetchone() == (0,)
    c = snap.open()
    assert c.conn is not conn  # a connection serves one session at a time
    b.close(), c.close()
    assert POOL.idle == 2


def test_a_session_whose_transaction_was_committed_is_not_pooled(snap):
    from trainer.env.db.backend import POOL

    POOL.clear()
    db = snap.open()
    db.conn.execute("UPDATE items SET qty = 0 WHERE id = 'a'")
    db.conn.execute("COMMIT")
    db.conn.execute("BEGIN")  # even when a new transaction was begun afterwards
    db.close()
    assert POOL.idle == 0
    db = snap.open()
    db.conn.execute("COMMIT")
    db.close()
    assert POOL.idle == 0
    assert snap.open().dump().hash == snap.state().hash


def test_pool_is_bounded_by_bytes_and_evicts_the_oldest():
    from trainer.env.db.backend import ConnectionPool

    s1, s2 = make_snapshot(), make_snapshot(order=(2, 1, 0))
    pool = ConnectionPool(budget_bytes=2 * len(s1.data))
    conns = [s1._connect(), s1._connect(), s2._connect()]
    for c, s in zip(conns, (s1, s1, s2)):
        pool.give(s, c)
    assert pool.idle == 2 and s1.idle_connections == [conns[1]] and s2.idle_connections == [conns[2]]
    with pytest.raises(sqlite3.ProgrammingError):  # the oldest was closed
        conns[0].execute("SELECT 1")
    assert pool.take(s2) is conns[2] and pool.take(s2) is None and pool.idle == 1
