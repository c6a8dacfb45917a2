"""The domain kit over real MCP sessions: a small counter-and-notes domain built in the test."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from trainer.domains import DOMAINS, domain
from trainer.domains.kit import RESERVED, Domain, DomainServer, Session, ToolError

pytestmark = pytest.mark.anyio  # async tests run on asyncio (anyio's pytest plugin)

SCHEMA = """
CREATE TABLE accounts (id TEXT PRIMARY KEY, owner TEXT NOT NULL, balance INTEGER NOT NULL CHECK (balance >= 0));
CREATE TABLE notes (id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id), text TEXT NOT NULL,
                    written_at REAL);
"""
POLICY = """Intro text about the bank.

## Withdrawals
A withdrawal may never take a balance below zero. Large withdrawals above 500 need a manager.

## Notes
Notes record what the customer asked for, in plain words.
"""


def make_domain() -> Domain:
    d = Domain("bank", schema=SCHEMA, policy=POLICY, unstable={"notes": ["written_at"]},
               seed={"accounts": [{"id": "A1", "owner": "ann", "balance": 100},
                                  {"id": "A2", "owner": "bob", "balance": 5}]})

    @d.tool("Show an account.", params={"account_id": {"type": "string"}})
    def get_account(db: Session, account_id: str) -> dict:
        return db.require("accounts", account_id, "account")

    @d.tool("Withdraw an amount.", params={"account_id": {"type": "string"},
                                           "amount": {"type": "integer", "minimum": 1}})
    def withdraw(db: Session, account_id: str, amount: int) -> dict:
        acct = db.require("accounts", account_id, "account")
        if amount > 500:
            raise ToolError("withdrawals above 500 need a manager")
        return db.update("accounts", account_id, balance=acct["balance"] - amount)  # CHECK guards >= 0

    @d.tool("Add a note.", params={"account_id": {"type": "string"}, "text": {"type": "string"},
                                   "then_fail": {"type": "boolean", "default": False}})
    def add_note(db: Session, account_id: str, text: str, then_fail: bool = False) -> dict:
        note = db.insert("notes", {"id": db.next_id("notes", "N-"), "account_id": account_id,
                                   "text": text, "written_at": 1.0 + len(text)})
        if then_fail:
            raise RuntimeError("disk on fire")  # after a write: the savepoint must undo it
        return note

    return d


@pytest.fixture(scope="module")
def bank() -> Domain:
    return make_domain()


def text(result) -> Any:
    assert result.is_error is False  # tool errors are content, never MCP errors
    return json.loads(result.content[0].text)


GOLDEN = {"tool_interactions": [{"tool": "withdraw", "parameters": {"account_id": "A1", "amount": 30}}]}


# ---------------------------------------------------------------------------- declaration and listing

async def test_tools_are_listed_with_strict_schemas(bank):
    async with Client(bank.create_server()) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {"search_policy", "get_account", "withdraw", "add_note", *RESERVED}
    schema = tools["add_note"].input_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["account_id", "text"]


def test_tool_names_are_unique_and_not_reserved(bank):
    with pytest.raises(ValueError, match="declared twice or reserved"):
        bank.tool("dup", name="withdraw")(lambda db: 1)
    with pytest.raises(ValueError, match="declared twice or reserved"):
        bank.tool("dup", name="__reserved__init")(lambda db: 1)


# ---------------------------------------------------------------------------- validation and errors

@pytest.mark.parametrize("args, message", [
    ({"account_id": "A1", "amount": 5, "memo": "x"}, "Additional properties are not allowed ('memo' was unexpected)"),
    ({"account_id": "A1"}, "'amount' is a required property"),
    ({"account_id": "A1", "amount": "5"}, "amount: '5' is not of type 'integer'"),
    ({"account_id": "A1", "amount": 0}, "amount: 0 is less than the minimum of 1"),
])
async def test_bad_arguments_come_back_as_error_text(bank, args, message):
    async with Client(bank.create_server()) as c:
        await c.call_tool("__reserved__init", {"config": {}})
        out = text(await c.call_tool("withdraw", args))
        assert set(out) == {"error"} and message in out["error"]
        fx = text(await c.call_tool("__reserved__geteffects", {}))
        assert fx["result_db_state"] == fx["initial_db_state"]


async def test_refusals_invariants_crashes_and_unknown_tools_change_nothing(bank):
    async with Client(bank.create_server()) as c:
        await c.call_tool("__reserved__init", {"config": {}})
        assert text(await c.call_tool("withdraw", {"account_id": "A1", "amount": 600})) == {
            "error": "withdrawals above 500 need a manager"}
        assert text(await c.call_tool("withdraw", {"account_id": "A2", "amount": 6}))["error"].startswith(
            "Rejected by a data invariant: CHECK constraint failed")
        assert text(await c.call_tool("get_account", {"account_id": "A9"})) == {"error": "account A9 not found"}
        assert text(await c.call_tool("add_note", {"account_id": "A1", "text": "hi", "then_fail": True})) == {
            "error": "Tool execution failed: RuntimeError: disk on fire"}
        assert text(await c.call_tool("transfer", {})) == {"error": "Unknown tool: transfer"}
        fx = text(await c.call_tool("__reserved__geteffects", {}))
    assert fx["result_db_state"] == fx["initial_db_state"] and fx["result_db_hash"] == fx["golden_db_hash"]


# ---------------------------------------------------------------------------- the reserved protocol

async def test_reserved_protocol_round_trip(bank):
    config = {"data_patch": {"accounts": [{"id": "A3", "owner": "cy", "balance": 50}]},
              "golden_test_case": GOLDEN, "rubrics": {"tone": "polite"}, "rubrics_yesno": ["Was it polite?"]}
    async with Client(bank.create_server()) as c:
        assert text(await c.call_tool("__reserved__init", {"config": config, "session_id": "s-1"})) == {
            "status": "ok", "domain": "bank"}
        assert text(await c.call_tool("withdraw", {"account_id": "A1", "amount": 30})) == {
            "id": "A1", "owner": "ann", "balance": 70}
        assert text(await c.call_tool("add_note", {"account_id": "A3", "text": "asked for cash"}))["id"] == "N-0001"
        fx = text(await c.call_tool("__reserved__geteffects", {}))
        assert text(await c.call_tool("__reserved__teardown", {})) == {"status": "ok"}
        assert text(await c.call_tool("get_account", {"account_id": "A1"})) == {"error": "Session is closed"}
    assert set(fx) == {"initial_db_state", "result_db_state", "result_db_hash", "golden_db_state",
                       "golden_db_hash", "diff", "rubrics", "rubrics_yesno", "unstable_fields"}
    assert [a["id"] for a in fx["initial_db_state"]["accounts"]] == ["A1", "A2", "A3"]
    assert fx["golden_db_state"]["accounts"][0]["balance"] == 70
    assert fx["diff"] == [{"path": "notes[N-0001]", "type": "extra", "golden": None,
                           "result": {"id": "N-0001", "account_id": "A3", "text": "asked for cash"}}]
    assert fx["result_db_state"]["notes"][0]["written_at"] == 15  # unstable: in the state, not in the diff
    assert fx["rubrics"] == {"tone": "polite"} and fx["rubrics_yesno"] == ["Was it polite?"]
    assert fx["unstable_fields"] == {"notes": ["written_at"]}


@pytest.mark.parametrize("args", [
    {"config": {"data_patch": {"ghosts": [{"id": 1}]}}},
    {"config": {"data_patch": {"accounts": [{"id": "A1", "balance": -5}]}}},
    {"config": {}, "extra": 1},
])
async def test_init_rejections_are_status_errors(bank, args):
    async with Client(bank.create_server()) as c:
        out = text(await c.call_tool("__reserved__init", args))
    assert out["status"] == "error" and out["message"]


async def test_golden_is_replayed_once_per_task_and_cached(bank):
    bank.golden_cache.clear()
    misses = bank.golden_cache.misses
    config = {"data_patch": {"accounts": [{"id": "A2", "balance": 40}]}, "golden_test_case": GOLDEN}
    hashes = []
    for _ in range(3):
        async with Client(bank.create_server()) as c:
            await c.call_tool("__reserved__init", {"config": config})
            hashes.append(text(await c.call_tool("__reserved__geteffects", {}))["golden_db_hash"])
    assert len(set(hashes)) == 1 and bank.golden_cache.misses == misses + 1 and len(bank.golden_cache) == 1
    other = {**config, "data_patch": {"accounts": [{"id": "A2", "balance": 41}]}}
    assert bank.session(other).effects()["golden_db_hash"] != hashes[0]
    assert bank.golden_cache.misses == misses + 2


def test_golden_step_refusals_are_reported(bank):
    bad = {"tool_interactions": [{"tool": "withdraw", "parameters": {"account_id": "A2", "amount": 99}},
                                 {"tool": "nope", "parameters": {}}, "garbage"]}
    fx = bank.session({"golden_test_case": bad}).effects()
    assert fx["golden_errors"] == [
        "step 0 (withdraw): Rejected by a data invariant: CHECK constraint failed: balance >= 0",
        "step 1 (nope): Unknown tool: nope", "step 2: not a {tool, parameters} mapping"]
    assert fx["golden_db_hash"] == fx["result_db_hash"]


def test_session_without_init_uses_the_seed(bank):
    s = bank.session()
    assert s.dispatch("get_account", {"account_id": "A2"}) == ({"id": "A2", "owner": "bob", "balance": 5}, None)


def test_deterministic_ids_and_clock(bank):
    s = bank.session({"data_patch": {"notes": [{"id": "N-0041", "account_id": "A1", "text": "old"},
                                               {"id": "X_9", "account_id": "A1", "text": "other"}]},
                      "now": "2030-01-01T00:00:00Z"})
    assert s.next_id("notes", "N-") == "N-0042" and s.next_id("notes", "X_", width=2) == "X_10"
    assert s.next_id("accounts", "Q") == "Q0001" and s.now == "2030-01-01T00:00:00Z"
    assert bank.session({}).now == bank.now


# ---------------------------------------------------------------------------- policy search (FTS5)

@pytest.mark.parametrize("query, section", [
    ("balance below zero", "Withdrawals"), ("withdrawing large amounts", "Withdrawals"),  # porter stemming
    ("what do notes record?", "Notes"), ('"bank" AND (', "Overview"),  # FTS syntax in the query is inert
])
def test_search_policy(bank, query, section):
    result, error = bank.session({}).dispatch("search_policy", {"query": query, "limit": 1})
    assert error is None and result["results"][0]["section"] == section


def test_search_policy_needs_words(bank):
    assert bank.session({}).dispatch("search_policy", {"query": "?!"}) == (
        None, "query must contain at least one word")


# ---------------------------------------------------------------------------- isolation at scale

async def test_1000_concurrent_sessions_see_only_their_own_writes(bank):
    config = {"data_patch": {"accounts": [{"id": "A1", "balance": 10_000}]}, "golden_test_case": GOLDEN}

    async def episode(i: int) -> dict:
        async with Client(bank.create_server()) as c:
            await c.call_tool("__reserved__init", {"config": config})
            await c.call_tool("withdraw", {"account_id": "A1", "amount": i % 500 + 1})
            await asyncio.sleep(0)  # interleave with the other sessions
            await c.call_tool("add_note", {"account_id": "A1", "text": f"session {i}"})
            return text(await c.call_tool("__reserved__geteffects", {}))

    results = []
    for start in range(0, 1000, 250):
        results += await asyncio.gather(*(episode(i) for i in range(start, start + 250)))
    for i, fx in enumerate(results):
        assert fx["result_db_state"]["accounts"][0]["balance"] == 10_000 - (i % 500 + 1)
        assert [n["text"] for n in fx["result_db_state"]["notes"]] == [f"session {i}"]
        assert fx["initial_db_state"]["accounts"][0]["balance"] == 10_000
    assert len({fx["result_db_hash"] for fx in results}) == 1000
    assert results[29]["diff"][0]["path"] == "notes[N-0001]"  # session 29 withdrew 30, as golden did


# ---------------------------------------------------------------------------- registry, stdio, cost

def test_registry_resolves_fresh_servers():
    a, b = DOMAINS["toy"](), DOMAINS["toy"]()
    assert isinstance(a, DomainServer) and a is not b and a.session is not b.session
    assert domain("toy") is a.domain
    with pytest.raises(KeyError, match="known: "):
        domain("nope")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args", [["-m", "trainer.domains.serve", "toy"], ["-m", "trainer.cli", "serve-domain", "toy"]])
async def test_stdio_server_speaks_the_protocol(args):
    params = StdioServerParameters(command=sys.executable, args=args)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as c:
        await c.initialize()
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"checkout_book", "__reserved__init"} <= names
        assert text(await c.call_tool("__reserved__init", {"config": {}})) == {"status": "ok", "domain": "toy"}
        assert text(await c.call_tool("find_member", {"email": "ben@example.org", "x": 1}))["error"].startswith(
            "Invalid arguments for find_member")
        assert text(await c.call_tool("checkout_book", {"member_id": "M-002", "book_id": "B-002"}))["loan"]["id"] == "L-0003"
        fx = text(await c.call_tool("__reserved__geteffects", {}))
        assert [d["path"] for d in fx["diff"]] == ["books[B-002].status", "loans[L-0003]"]
