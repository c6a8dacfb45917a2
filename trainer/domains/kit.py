"""The domain kit: what every business domain shares, so a new domain is schema, seed, tools, policy.

A domain is one `Domain` object:

    toy = Domain("toy", schema=SCHEMA_SQL, seed=SEED_ROWS, policy=POLICY_MD, unstable={"loans": ["recorded_at"]})

    @toy.tool("Look up a member by email.", params={"email": {"type": "string"}})
    def find_member(db: Session, email: str) -> dict:
        return db.require_one("SELECT * FROM members WHERE email = ?", (email,), "member")

Tools are declared once per domain (JSON schema, `additionalProperties: false`, validated with
`jsonschema` before the function runs). A tool refuses with `ToolError`; the agent then reads
`{"error": "..."}` as ordinary text content, the way ThinkingBox servers answer, never an MCP
protocol error. Each call runs in a savepoint, so a refused or failed write leaves nothing behind,
and SQLite constraints (CHECK, FOREIGN KEY, UNIQUE) enforce invariants a tool forgot.
Determinism: ids come from `Session.next_id` (max existing + 1) and time from `Session.now`
(the domain's fixed clock, or `now` in the server config), so a golden replay and an agent run
that make the same writes produce the same rows. A field stamped with real time
(`Session.wall_clock()`, declared `unstable`) is the one exception; `TBT_WALL_CLOCK` pins it
(`tbt warm-start` does, so its golden trajectories are the same tokens on every run).

Sessions speak the reserved-tool protocol (docs/sandbox.md, "The server protocol"):
- `__reserved__init(config, session_id=None)`: fresh private database, `data_patch` upserted by
  id, `golden_test_case` / `rubrics` / `rubrics_yesno` stored → `{"status": "ok", "domain": name}`
  (a bad patch → `{"status": "error", "message": ...}`, which fails session creation);
- `__reserved__geteffects()` → `{initial_db_state, result_db_state, result_db_hash,
  golden_db_state, golden_db_hash, diff, rubrics, rubrics_yesno, unstable_fields}` (+
  `golden_errors` when a golden step was refused). The golden state is computed once per
  (domain, seed, now, data_patch, golden actions) by replaying the golden actions, then cached;
- `__reserved__teardown()` closes the database.

`Domain.create_server()` returns a fresh `DomainServer` (an `MCPServer` of the official SDK) with
its own `Session`; it costs ~0.1 ms because tool schemas, validators and the seed snapshot are
built once per domain. The same server runs over stdio (`tbt serve-domain NAME`), in memory
through `mcp.Client(server)`, and, in our sandboxes, through its direct-call interface
(`direct_tools` / `direct_call`: the same listing and results without JSON-RPC; see
docs/sandbox.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping

import jsonschema
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from mcp.types import Tool as MCPTool

from trainer.env.db.backend import Database, DbState, PatchError, Snapshot, insert_row, quote_ident
from trainer.env.db.cache import ComputeCache, golden_key
from trainer.env.db.statediff import diff_db_states

log = logging.getLogger(__name__)

DEFAULT_NOW = "2025-03-03T09:00:00Z"
RESERVED_INIT = "__reserved__init"
RESERVED_GETEFFECTS = "__reserved__geteffects"
RESERVED_TEARDOWN = "__reserved__teardown"
RESERVED = (RESERVED_INIT, RESERVED_GETEFFECTS, RESERVED_TEARDOWN)
ID = {"type": "string", "minLength": 1}  # the JSON schema of an id argument; add a "description"


class ToolError(Exception):
    """A tool refuses (not found, not allowed by policy, bad state): the agent reads the message."""


def parse_date(text: str, what: str) -> date:
    """A YYYY-MM-DD argument as a date; anything else is a `ToolError` naming the argument."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{what} must be a real date YYYY-MM-DD, got {text!r}") from None


WALL_CLOCK_ENV = "TBT_WALL_CLOCK"  # pins Session.wall_clock() (epoch seconds, or "session")


@contextlib.contextmanager
def pinned_wall_clock() -> Iterator[None]:
    """Inside the block, our domains' wall-clock fields (the toy loans' `recorded_at`) are stamped
    with each session's fixed clock (`tbt warm-start`'s golden episodes: the same tool results,
    so the same trained tokens, on every run). A `TBT_WALL_CLOCK` the caller set is kept."""
    if os.environ.get(WALL_CLOCK_ENV):
        yield
        return
    os.environ[WALL_CLOCK_ENV] = "session"
    try:
        yield
    finally:
        os.environ.pop(WALL_CLOCK_ENV, None)


def now_stamp(db: Session) -> str:
    """The session's clock as YYYY-MM-DDTHH:MM:SSZ."""
    return db.now[:19] + "Z"


@dataclass(frozen=True)
class ToolDef:
    """A tool as declared once per domain; `fn(db, **arguments)` runs it on a session."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    validator: Any  # a compiled jsonschema validator


@dataclass(frozen=True)
class Golden:
    """The golden end state of one task and any golden step the tools refused."""

    state: DbState
    errors: tuple[str, ...]


def _schema_error(e: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in e.absolute_path)
    return f"{where}: {e.message}" if where else e.message


def _rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


_POLICY_SECTION = re.compile(r"^#{1,3} +(.+)$", re.M)


def _policy_sections(text: str) -> list[tuple[str, str]]:
    """Split markdown policy text at headings; text before the first heading is 'Overview'."""
    parts, heads = _POLICY_SECTION.split(text), []
    if parts[0].strip():
        heads.append(("Overview", parts[0].strip()))
    heads += [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]
    return heads


# ---------------------------------------------------------------------------- the per-episode session

class Session:
    """One episode's world: a private database, the init config, the clock. Tools get it as `db`."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.database: Database | None = None
        self.initial: DbState | None = None
        self.config: dict[str, Any] = {}
        self.session_id: str | None = None
        self.closed = False

    # -- helpers for tool authors
    @property
    def conn(self) -> sqlite3.Connection:
        if self.database is None:
            self.init({})
        assert self.database is not None
        return self.database.conn

    @property
    def now(self) -> str:
        """The session's clock (fixed: `now` in config, else the domain's)."""
        return str(self.config.get("now") or self.domain.now)

    @property
    def today(self) -> date:
        """The date of the session's clock."""
        return date.fromisoformat(self.now[:10])

    def wall_clock(self) -> float:
        """Real time in epoch seconds, for a field a tool stamps with it (declare it `unstable`:
        it is left out of hashes and diffs). `TBT_WALL_CLOCK` pins it: epoch seconds, or `session`
        for the session's fixed clock (`now`); unset, it is `time.time()`."""
        pinned = os.environ.get(WALL_CLOCK_ENV, "").strip()
        if not pinned:
            return time.time()
        if pinned == "session":
            at = datetime.fromisoformat(self.now.replace("Z", "+00:00"))
            return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()
        try:
            return float(pinned)
        except ValueError:
            raise ValueError(f"{WALL_CLOCK_ENV}={pinned!r}: expected epoch seconds or 'session'") from None

    def all(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        return _rows(self.conn.execute(sql, tuple(params)))

    def one(self, sql: str, params: Iterable[Any] = ()) -> dict[str, Any] | None:
        rows = self.all(sql, params)
        return rows[0] if rows else None

    def get(self, table: str, id: Any) -> dict[str, Any] | None:
        return self.one(f"SELECT * FROM {quote_ident(table)} WHERE id = ?", (id,))

    def require(self, table: str, id: Any, what: str | None = None) -> dict[str, Any]:
        """The row, or `ToolError("<what> <id> not found")`."""
        row = self.get(table, id)
        if row is None:
            raise ToolError(f"{what or table.rstrip('s')} {id} not found")
        return row

    def insert(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        insert_row(self.conn, table, row)
        return self.get(table, row["id"]) or dict(row)

    def update(self, table: str, id: Any, **fields: Any) -> dict[str, Any]:
        sets = ", ".join(f"{quote_ident(c)} = ?" for c in fields)
        self.conn.execute(f"UPDATE {quote_ident(table)} SET {sets} WHERE id = ?", [*fields.values(), id])
        return self.require(table, id)

    def next_id(self, table: str, prefix: str, width: int = 4) -> str:
        """`prefix` + (largest existing numeric suffix + 1), zero-padded: deterministic, so the
        golden replay and an agent making the same creations get the same ids."""
        n = self.conn.execute(
            f"SELECT MAX(CAST(SUBSTR(id, ?) AS INTEGER)) FROM {quote_ident(table)} "
            "WHERE id LIKE ? ESCAPE '\\'",
            (len(prefix) + 1, prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"),
        ).fetchone()[0]
        return f"{prefix}{(n or 0) + 1:0{width}d}"

    # -- the protocol
    def init(self, config: Mapping[str, Any] | None, session_id: str | None = None) -> dict[str, Any]:
        """Fresh private database with the config's `data_patch`; raises `PatchError` on a bad patch."""
        if self.database is not None:
            self.database.close()
        self.config = dict(config or {})
        self.session_id = session_id
        self.closed = False
        self.database = None
        snapshot = self.domain.snapshot_for(self.config.get("data_patch"))  # PatchError: bad patch
        self.database = snapshot.open()
        self.initial = snapshot.state()
        return {"status": "ok", "domain": self.domain.name}

    def dispatch(self, name: str, arguments: Mapping[str, Any] | None) -> tuple[Any, str | None]:
        """Run one domain tool: `(result, None)` or `(None, error message)`. Never raises."""
        tool = self.domain.tools.get(name)
        if tool is None:
            return None, f"Unknown tool: {name}"
        args = dict(arguments or {})
        errors = sorted(tool.validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            return None, f"Invalid arguments for {name}: " + "; ".join(_schema_error(e) for e in errors)
        if self.closed:
            return None, "Session is closed"
        conn = self.conn
        conn.execute("SAVEPOINT tool_call")
        try:
            result = tool.fn(self, **args)
        except Exception as e:
            conn.execute("ROLLBACK TO tool_call")
            conn.execute("RELEASE tool_call")
            if isinstance(e, ToolError):
                return None, str(e)
            if isinstance(e, sqlite3.IntegrityError):
                return None, f"Rejected by a data invariant: {e}"
            log.exception("tool %s of domain %s crashed", name, self.domain.name)
            return None, f"Tool execution failed: {type(e).__name__}: {e}"
        conn.execute("RELEASE tool_call")
        return result, None

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """A tool call as MCP text content: the result's JSON, or `{"error": ...}`."""
        if name == RESERVED_INIT:
            args = dict(arguments or {})
            extra = set(args) - {"config", "session_id"}
            if extra:
                return json.dumps({"status": "error", "message": f"unexpected arguments {sorted(extra)}"})
            try:
                return json.dumps(self.init(args.get("config"), args.get("session_id")))
            except PatchError as e:
                return json.dumps({"status": "error", "message": str(e)})
        if name == RESERVED_GETEFFECTS:
            return self.effects_json()
        if name == RESERVED_TEARDOWN:
            self.teardown()
            return json.dumps({"status": "ok"})
        result, error = self.dispatch(name, arguments)
        return json.dumps({"error": error} if error is not None else result, default=str)

    def _effects_parts(self) -> tuple[DbState, DbState, Golden, dict[str, Any]]:
        if self.database is None:
            self.init({})
        assert self.database is not None and self.initial is not None
        result = self.database.dump()
        golden = self.domain.golden(self.config)
        rest = {
            "result_db_hash": result.hash,
            "golden_db_hash": golden.state.hash,
            "diff": diff_db_states(result, golden.state),
            "rubrics": self.config.get("rubrics") or {},
            "rubrics_yesno": self.config.get("rubrics_yesno") or [],
            "unstable_fields": {t: sorted(f) for t, f in self.domain.snapshot.unstable.items()},
        }
        if golden.errors:
            rest["golden_errors"] = list(golden.errors)
        return self.initial, result, golden, rest

    def effects(self) -> dict[str, Any]:
        """What `__reserved__geteffects` returns (see the module docstring), as a dict: the
        in-process fast path (no JSON). Rows are shared with the domain's caches: read them,
        do not mutate them."""
        initial, result, golden, rest = self._effects_parts()
        return {"initial_db_state": initial.state, "result_db_state": result.state,
                "golden_db_state": golden.state.state, **rest}

    def effects_json(self) -> str:
        """`effects()` as the protocol's JSON text, assembled from cached per-table fragments
        (only tables this session wrote are serialised again)."""
        initial, result, golden, rest = self._effects_parts()
        return (f'{{"initial_db_state":{initial.state_json},"result_db_state":{result.state_json},'
                f'"golden_db_state":{golden.state.state_json},' + json.dumps(rest)[1:])

    def teardown(self) -> None:
        if self.database is not None:
            self.database.close()
            self.database = None
        self.closed = True


# ---------------------------------------------------------------------------- the MCP server

class DomainServer(MCPServer):
    """An `MCPServer` whose tools are its domain's, dispatched to this server's own `Session`.

    Tool listing and calls bypass the SDK's per-function pydantic models: the domain's JSON
    schemas are the contract (validated in `Session.dispatch`), and errors stay text content.
    `direct_tools()` / `direct_call()` offer the same listing and results without JSON-RPC: the
    in-process host (`trainer.env.sandbox.mcp_host`) uses them instead of `mcp.Client(server)`.
    """

    def __init__(self, domain: Domain):
        super().__init__(name=domain.name, instructions=domain.instructions, log_level="WARNING")
        self.domain = domain
        self.session = Session(domain)

    async def list_tools(self) -> list[MCPTool]:
        return self.domain.mcp_tools()

    def effects(self) -> dict[str, Any]:
        """In-process fast path: this session's effects as a dict, equal to the parsed
        `__reserved__geteffects` text (read-only rows)."""
        return self.session.effects()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=self.session.call(name, arguments))])

    # -- the direct in-process interface (used by `trainer.env.sandbox.mcp_host` instead of `mcp.Client`)
    def direct_tools(self) -> list[MCPTool]:
        """What `list_tools` returns over MCP (the domain's tools, then the reserved ones)."""
        return list(self.domain.mcp_tools())

    def direct_call(self, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
        """`call_tool` without JSON-RPC: the same result, synchronously. An unexpected exception
        becomes an error result with its message, as the SDK's `tools/call` handler makes it."""
        try:
            text = self.session.call(name, arguments or {})
        except Exception as e:
            log.exception("tool %r of domain %s raised", name, self.domain.name)
            return CallToolResult(content=[TextContent(type="text", text=str(e))], is_error=True)
        return CallToolResult(content=[TextContent(type="text", text=text)])


# ---------------------------------------------------------------------------- the domain

SeedRows = Mapping[str, Iterable[Mapping[str, Any]]]


class Domain:
    """A business domain: schema + seed + policy + tools, and the golden cache of its tasks.

    `seed` is `{table: [rows]}` or a function filling a connection. `unstable` names fields
    left out of hash and diff. `now` is the fixed clock of every session (ISO 8601 text).
    A non-empty `policy` (markdown; `#`/`##`/`###` headings make sections) adds the tool
    `policy_tool` (default `search_policy`), backed by SQLite FTS5 inside the snapshot; domains
    meant to share a scenario give it distinct names.
    """

    def __init__(self, name: str, *, schema: str, seed: SeedRows | Callable[[sqlite3.Connection], None] | None = None,
                 policy: str = "", unstable: Mapping[str, Iterable[str]] | None = None,
                 now: str = DEFAULT_NOW, instructions: str | None = None, policy_tool: str = "search_policy"):
        self.name = name
        self.schema = schema
        self.seed = seed
        self.policy = policy
        self.unstable = {t: list(f) for t, f in (unstable or {}).items()}
        self.now = now
        self.instructions = instructions
        self.tools: dict[str, ToolDef] = {}
        self.golden_cache = ComputeCache()
        self.patched_cache = ComputeCache(maxsize=256)
        self._snapshot: Snapshot | None = None
        self._mcp_tools: list[MCPTool] | None = None
        self._lock = threading.Lock()
        if policy:
            self.tool("Search the written policy. Returns the best-matching sections.",
                      params={"query": {"type": "string", "minLength": 1, "description": "Words to look for."},
                              "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3,
                                        "description": "How many sections to return."}},
                      name=policy_tool)(_search_policy)

    # -- declaring tools
    def tool(self, description: str, params: Mapping[str, Mapping[str, Any]] | None = None,
             required: Iterable[str] | None = None, name: str | None = None) -> Callable:
        """Decorator: declare `fn(db, **params)` as a tool. `params` maps argument → JSON schema;
        `required` defaults to every argument without a `"default"`."""
        props = {k: dict(v) for k, v in (params or {}).items()}
        req = list(required) if required is not None else [k for k, v in props.items() if "default" not in v]
        schema = {"type": "object", "properties": props, "required": req, "additionalProperties": False}
        jsonschema.Draft202012Validator.check_schema(schema)

        def register(fn: Callable) -> Callable:
            tool_name = name or fn.__name__
            if tool_name in self.tools or tool_name in RESERVED:
                raise ValueError(f"domain {self.name}: tool {tool_name!r} declared twice or reserved")
            self.tools[tool_name] = ToolDef(tool_name, description, schema, fn,
                                            jsonschema.Draft202012Validator(schema))
            self._mcp_tools = None
            return fn

        return register

    # -- built once
    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            with self._lock:
                if self._snapshot is None:
                    self._snapshot = Snapshot.build(self.schema, self._load, self.unstable)
        return self._snapshot

    def snapshot_for(self, data_patch: Mapping[str, Any] | None) -> Snapshot:
        """The seed with `data_patch` applied, built once per distinct patch (LRU of 256)."""
        if not data_patch:
            return self.snapshot
        return self.patched_cache.get_or_compute(golden_key(data_patch),
                                                 lambda: self.snapshot.patched(data_patch))

    def _load(self, conn: sqlite3.Connection) -> None:
        if callable(self.seed):
            self.seed(conn)
        elif self.seed:
            for table, rows in self.seed.items():
                for row in rows:
                    insert_row(conn, table, row)
        if self.policy:
            conn.execute("CREATE VIRTUAL TABLE _policy USING fts5(section, body, tokenize='porter unicode61')")
            conn.executemany("INSERT INTO _policy (section, body) VALUES (?, ?)", _policy_sections(self.policy))

    def mcp_tools(self) -> list[MCPTool]:
        """The tool list a client sees: the domain's tools, then the three reserved tools."""
        if self._mcp_tools is None:
            tools = [MCPTool(name=t.name, description=t.description, input_schema=t.input_schema)
                     for t in self.tools.values()]
            tools += [
                MCPTool(name=RESERVED_INIT, description="Reserved: start a session from a world-state config.",
                        input_schema={"type": "object", "properties": {"config": {"type": "object"},
                                      "session_id": {"type": ["string", "null"]}}, "required": ["config"]}),
                MCPTool(name=RESERVED_GETEFFECTS, description="Reserved: database effects of the session.",
                        input_schema={"type": "object", "properties": {}}),
                MCPTool(name=RESERVED_TEARDOWN, description="Reserved: end the session.",
                        input_schema={"type": "object", "properties": {}}),
            ]
            self._mcp_tools = tools
        return self._mcp_tools

    # -- sessions and servers
    def session(self, config: Mapping[str, Any] | None = None) -> Session:
        """A protocol session without MCP (for replays and tests); initialised when `config` is given."""
        s = Session(self)
        if config is not None:
            s.init(config)
        return s

    def create_server(self) -> DomainServer:
        """A fresh MCP server with its own session: the in-process factory (one per episode)."""
        return DomainServer(self)

    def golden(self, config: Mapping[str, Any]) -> Golden:
        """The golden end state for this init config: replayed once, then cached."""
        actions = ((config.get("golden_test_case") or {}).get("tool_interactions")) or []
        key = golden_key(self.name, self.snapshot.fingerprint, config.get("now") or self.now,
                         config.get("data_patch") or {}, actions)
        return self.golden_cache.get_or_compute(key, lambda: self._replay(config, actions))

    def _replay(self, config: Mapping[str, Any], actions: list[Mapping[str, Any]]) -> Golden:
        s = self.session({"data_patch": config.get("data_patch"), "now": config.get("now")})
        errors = []
        try:
            for i, step in enumerate(actions):
                name = step.get("tool") if isinstance(step, Mapping) else None
                if not isinstance(name, str):
                    errors.append(f"step {i}: not a {{tool, parameters}} mapping")
                    continue
                _, error = s.dispatch(name, step.get("parameters") or {})
                if error is not None:
                    errors.append(f"step {i} ({name}): {error}")
            assert s.database is not None
            return Golden(s.database.dump(), tuple(errors))
        finally:
            s.teardown()


def _search_policy(db: Session, query: str, limit: int = 3) -> dict[str, Any]:
    words = re.findall(r"\w+", query.lower())
    if not words:
        raise ToolError("query must contain at least one word")
    match = " OR ".join(f'"{w}"' for w in words)
    rows = db.all("SELECT section, body FROM _policy WHERE _policy MATCH ? "
                  "ORDER BY bm25(_policy), rowid LIMIT ?", (match, limit))
    return {"results": [{"section": r["section"], "text": r["body"]} for r in rows]}


__all__ = [
    "DEFAULT_NOW", "ID", "RESERVED", "Domain", "DomainServer", "Golden", "Session", "ToolDef", "ToolError",
    "now_stamp", "parse_date",
]
