"""MCP sessions for an episode: in-process, stdio-process and remote servers (docs/sandbox.md).

A `Sandbox` is one task's isolated world. Opening it, for every server of `task.world_state()`:
connect (a fresh in-process instance, a fresh process, or a new remote MCP session), list the
tools, call `__reserved__init(config, session_id)` (success: `{}` or `{"status": "ok", ...}`;
the extras become `init_result[server]`). The agent's view is the scenario's tool list
(`tasks.tool_list`), reserved tools hidden. `call_tool` returns the text the agent sees;
`effects()` returns `{server: dict}` from `__reserved__geteffects`; closing calls
`__reserved__teardown` (errors only logged) and always releases the connection. A scenario's
`search_policy` tools may be served by the sandbox itself from an embedded index over the world
state's `sources` (the registry's `kb_search` mode; trainer/env/sandbox/kb_search.py).

Two kinds of failure, never confused:
- the agent's mistakes (unknown tool, bad arguments) come back as text, and the episode goes on;
- infrastructure faults (crash, hang, unreachable, init rejected, effects not JSON) raise
  `SandboxError`, a system error naming the server, the stage and the cause.

Servers are found in a `ServerRegistry` (trainer/env/sandbox/servers.py): a ThinkingBox `servers.yaml`
(`use_internal_servers: BOOL`, `servers: {name: {type: mcp-process, command, env, cwd[, start:
spawn | fork | reuse, preload, proof_rate]} |
{type: mcp-remote, endpoint, transport: streamable-http | sse, headers}}`), plus ours:
`{type: in-process, factory: "module:callable"[, direct: false]}`, and, unless the file says
`use_internal_servers: false`, the internal servers the caller hands the registry
(`domains={name: factory}`, in-process, one fresh server per session; the CLI passes our domains,
the counterpart of the reference's built-in `tools/mcp_*.py`). The env layer imports no domain:
whoever builds the registry chooses them. Other top-level keys are ignored, as the reference
ignores them.

Remote servers speak streamable HTTP (the default) or the legacy HTTP+SSE transport
(`transport: sse`: the SDK's `sse_client`, a GET event stream plus POSTs). Both send the entry's
`headers` with every request and keep the same semantics: an unreachable or refusing endpoint is a
`SandboxError` at `connect` (the SSE stream must open within the open timeout), every call is
bounded by the call timeout, and closing ends the MCP session. The SSE stream itself has no idle
timeout, so a session may wait on the agent for as long as it likes between calls.

A process server's `start:` (ours; default `spawn`, a fresh process per session) may be `fork`
(each session's process forked from a template that did the server's imports) or `reuse` (one
process serves sessions in turn), each proven against a spawned process before use and dropped
back to spawning when the proof fails: see trainer/env/sandbox/forkserver.py and `prove_start`.

The direct in-process path: when an in-process server offers `direct_tools()` and
`direct_call(name, arguments)` (our domains' `DomainServer`), the connection calls them instead of
running `mcp.Client(server)`: same listing, same `CallToolResult`s, same teardown, no JSON-RPC.
`ServerSpec(..., direct=False)` forces the MCP path (tests compare the two); servers without the
interface always use it.

Where opening goes (`Sandbox.open_seconds`, seconds per part, `OPEN_PARTS`; episode records keep
them as `timings.open_<part>`): each server's connection by how it started (`in_process`: made
here, direct or over `mcp.Client`; `spawn`, `fork`, `reuse`: a process server's start and MCP
handshake, a fork's first session including its template's start; `remote`: an endpoint's
session), `proof` (proving a fork or reuse start against a spawned process) and `init` (the
`__reserved__init` calls). What opening spends besides (listing the agent's tools, an embedded
search index) is the rest of the episode's `open`.
"""

from __future__ import annotations

import copy
import logging
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from trainer.core.timings import OPEN_PARTS  # Sandbox.open_seconds's parts
from trainer.env.sandbox import kb_search
from trainer.env.errors import SandboxError, TaskFormatError  # noqa: F401  (SandboxError: re-exported)
from trainer.env.sandbox.connection import (DEFAULT_CALL_TIMEOUT_S, DEFAULT_OPEN_TIMEOUT_S,  # noqa: F401  (re-exported)
                                            RESERVED_PREFIX, TEARDOWN_TIMEOUT_S, ServerConnection, parse_init_reply,
                                            result_text)
from trainer.env.sandbox.forkserver import ProcessStarts, ReusedProcess, differing_keys
from trainer.env.sandbox.servers import ServerRegistry, ServerSpec  # noqa: F401  (re-exported)
from trainer.env.taskformat.tasks import Agent, Task, tool_list

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- the sandbox

_NO_AGENT = Agent("none", Path("."), "", [])
_STARTED_AS = {"in-process": "in_process", "mcp-process": "spawn", "mcp-remote": "remote"}  # a connection that failed early


class Sandbox:
    """One task's isolated world: a fresh session on every server of `task.world_state()`.

    Use as `async with Sandbox(task, registry, agent) as sb:`; `sb.tools` is the agent's view,
    `sb.init_result` maps server → init extras. `world_state` overrides the task's (golden
    replay uses it to strip sources). `tool_order`: "servers" (the framework's: builtin tools,
    then the servers' listing order) or "scenario" (the scenario's list order).
    """

    def __init__(self, task: Task, registry: ServerRegistry, agent: Agent | None = None, *,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT_S, open_timeout: float = DEFAULT_OPEN_TIMEOUT_S,
                 session_id: str | None = None, world_state: dict[str, Any] | None = None,
                 tool_order: str = "servers"):
        self.task = task
        self.tool_order = tool_order  # tasks.tool_list's order of the agent's view
        self.registry = registry
        self.agent = agent or _NO_AGENT
        self.call_timeout = call_timeout
        self.open_timeout = open_timeout
        self.session_id = session_id or uuid.uuid4().hex
        self.world_state = copy.deepcopy(world_state) if world_state is not None else task.world_state()
        self.connections: dict[str, ServerConnection] = {}
        self.init_result: dict[str, dict[str, Any]] = {}
        self.tools: list[dict[str, Any]] = []
        self._route: dict[str, str] = {}  # MCP tool name -> server
        self._owners: dict[str, list[str]] = {}  # MCP tool name -> every server offering it
        self._visible: set[str] = set()  # the MCP tools of the agent's view
        self.kb: kb_search.EmbeddedSearch | None = None  # search_policy tools served from an embedded index
        self._stack: AsyncExitStack | None = None
        self.open_seconds: dict[str, float] = dict.fromkeys(OPEN_PARTS, 0.0)  # where opening went (module docstring)

    def _spent(self, part: str, since: float) -> None:
        self.open_seconds[part] += time.perf_counter() - since

    async def __aenter__(self) -> Sandbox:
        self._stack = AsyncExitStack()
        try:
            offered: dict[str, dict[str, Any]] = {}
            also: dict[str, list[str]] = {}
            mode = self.registry.kb_search
            for server, config in self.world_state.items():
                config = kb_search.server_config(mode, config)  # embedded: no sources for the server
                spec = self.registry.get(server)
                due = self.registry.starts.proof_due(spec) if spec.type == "mcp-process" else None
                if due is not None:
                    t = time.perf_counter()
                    try:
                        await prove_start(self.registry, spec, config, self._golden(server), self.session_id,
                                          first=due == "first", call_timeout=self.call_timeout,
                                          open_timeout=self.open_timeout)
                    finally:
                        self._spent("proof", t)
                conn = ServerConnection(spec, call_timeout=self.call_timeout, open_timeout=self.open_timeout,
                                        starts=self.registry.starts)
                t = time.perf_counter()
                try:
                    await self._stack.enter_async_context(conn)
                finally:
                    self._spent(conn.started_as or _STARTED_AS.get(spec.type, "in_process"), t)
                self._stack.push_async_callback(self._teardown, server, conn)
                self.connections[server] = conn
                init = conn.tools.get(RESERVED_PREFIX + "init")
                if init is None:
                    raise SandboxError(server, "init", "the server has no __reserved__init tool")
                args: dict[str, Any] = {"config": config}
                if "session_id" in (init.input_schema or {}).get("properties", {}):
                    args["session_id"] = self.session_id
                t = time.perf_counter()
                try:
                    reply = await conn.call(init.name, args, "init")
                finally:
                    self._spent("init", t)
                self.init_result[server] = parse_init_reply(server, reply)
                for name, t in conn.tools.items():
                    if name.startswith(RESERVED_PREFIX):
                        continue
                    also[name] = also.get(name, []) + [server]
                    if name not in self._route:
                        self._route[name] = server
                        offered[name] = {"description": t.description, "input_schema": t.input_schema}
            self.kb = kb_search.embedded_search(mode, self.task, self.world_state, offered, self.registry.kb_indexes)
            offered.update(self.kb.offered() if self.kb is not None else {})
            self.tools = tool_list(self.agent, self.task.scenario, offered, order=self.tool_order)
            self._visible = {t["name"] for t in self.tools if not t["builtin"]}
            self._owners = also
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _golden(self, server: str) -> list[tuple[str, dict[str, Any]]]:
        """The golden actions of the task on `server` (what a fork proof replays)."""
        try:
            paths = self.task.golden_paths()
        except TaskFormatError:
            return []
        return [(tool, params) for s, tool, params in (paths[0] if paths else []) if s == server]

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def _teardown(self, server: str, conn: ServerConnection) -> None:
        if RESERVED_PREFIX + "teardown" not in conn.tools or conn.closed:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT_S):
            try:
                result = await conn.call(RESERVED_PREFIX + "teardown", {}, "teardown")
                if result.is_error:
                    log.warning("teardown of %s: %s", server, result_text(result)[:300])
            except SandboxError as e:
                log.warning("%s", e)

    async def call_tool(self, name: str, arguments: dict[str, Any], *, server: str | None = None) -> str:
        """Run one tool call and return the text the agent sees.

        Without `server`, only the agent's visible MCP tools may be called (anything else reads
        `Error: function 'X' does not exist`, as in the reference). With `server` (golden
        replay), the call goes to that server as written.
        """
        if server is None:
            if name not in self._visible:
                return f"Error: function '{name}' does not exist"
            if self.kb is not None and name in self.kb.names:
                return self.kb.call(name, arguments)
            owners = self._owners[name]
            if len(owners) > 1:  # the call would reach one of them by chance of order
                raise SandboxError(None, "call", f"tool {name!r} is offered by servers {' and '.join(owners)}; "
                                   "an agent's tool must have one server (golden steps name theirs)")
            server = self._route[name]
        conn = self.connections.get(server)
        if conn is None:
            raise SandboxError(server, "call", "this task's world_state has no such server")
        return result_text(await conn.call(name, arguments))

    async def effects(self) -> dict[str, dict[str, Any]]:
        """`{server: dict}` from every server's `__reserved__geteffects` (a server without the tool
        reports `{}`); a reply that is not a JSON object is a `SandboxError`."""
        out: dict[str, dict[str, Any]] = {}
        for server, conn in self.connections.items():
            if RESERVED_PREFIX + "geteffects" not in conn.tools:
                out[server] = {}
                continue
            out[server] = await conn.effects()
        return out


async def _proof_session(spec: ServerSpec, starts: ProcessStarts, start: str, config: Any,
                         actions: list[tuple[str, dict[str, Any]]], session_id: str, *,
                         call_timeout: float, open_timeout: float,
                         process: ReusedProcess | None = None) -> dict[str, Any]:
    """One session of a proof on a process started as `start`: init, actions, effects (a system
    error is recorded by its stage, so that both sides failing alike still compare)."""
    record: dict[str, Any] = {}
    try:
        async with ServerConnection(spec, call_timeout=call_timeout, open_timeout=open_timeout,
                                    starts=starts, start=start, process=process) as conn:
            init = conn.tools.get(RESERVED_PREFIX + "init")
            args: dict[str, Any] = {"config": config}
            if init is not None and "session_id" in (init.input_schema or {}).get("properties", {}):
                args["session_id"] = session_id
            record["tools"] = sorted(conn.tools)
            record["init"] = result_text(await conn.call(RESERVED_PREFIX + "init", args, "init"))
            record["calls"] = [result_text(await conn.call(tool, params)) for tool, params in actions]
            if RESERVED_PREFIX + "geteffects" in conn.tools:
                record["effects"] = await conn.effects()
            if RESERVED_PREFIX + "teardown" in conn.tools:
                with anyio.move_on_after(TEARDOWN_TIMEOUT_S):
                    await conn.call(RESERVED_PREFIX + "teardown", {}, "teardown")
    except SandboxError as e:
        record["error"] = e.stage
        record["error_cause"] = e.cause
    return record


async def prove_start(registry: ServerRegistry, spec: ServerSpec, config: Any,
                      actions: list[tuple[str, dict[str, Any]]], session_id: str, *, first: bool = False,
                      call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
                      open_timeout: float = DEFAULT_OPEN_TIMEOUT_S) -> bool:
    """Prove a `start: fork` or `start: reuse` server against a freshly spawned process on one
    task (init with `config`, `actions`, effects). fork: one session on a forked child; reuse: two
    sessions in turn on one process. Equal canonical records (hashes included) keep the server on
    its start; a difference sends it back to spawning for the rest of the run, naming the differing
    keys. Concurrent sessions wait for the first proof rather than starting unproven."""
    starts = registry.starts
    kw: dict[str, Any] = dict(call_timeout=call_timeout, open_timeout=open_timeout)
    sid = session_id + "-proof"
    async with starts.lock(spec):  # one proof of a server at a time (the first one gates all)
        stat = starts.stat(spec)
        if stat.mode == "spawn" or (first and stat.proofs):
            return stat.mode != "spawn"  # refused meanwhile, or another session's first proof decided
        stat.proofs += 1
        process = None
        if stat.mode == "fork":
            tried = [await _proof_session(spec, starts, "fork", config, actions, sid, **kw)]
            if tried[0].get("error_cause", "").startswith("fork: "):
                starts.fall_back(spec, tried[0]["error_cause"])  # the template refused or died at start
                return False
        else:
            process = await starts.take(spec)
            tried = [await _proof_session(spec, starts, "reuse", config, actions, sid, process=process, **kw)
                     for _ in range(2)]
        spawned = await _proof_session(spec, starts, "spawn", config, actions, sid, **kw)
        spawned.pop("error_cause", None)
        diff: list[str] = []
        for record in tried:
            record.pop("error_cause", None)
            diff += [k for k in differing_keys(record, spawned) if k not in diff]
        if process is not None:
            starts.give_back(spec, process, clean=not diff and "error" not in tried[-1])
    if diff:
        stat.proofs_failed += 1
        how = "forked" if stat.mode == "fork" else "reused (a second session on one process)"
        starts.fall_back(spec, f"{stat.mode} proof failed: {how} and spawned sessions differ in "
                         f"{', '.join(diff)}", diff)
        log.warning("server %s: %s", spec.name, stat.fallback)
        return False
    return True


def strip_sources(world_state: dict[str, Any]) -> dict[str, Any]:
    """`world_state` without `*.sources` (an embedded `search_policy` then reports the search
    service unavailable); nested values are shared, and `Sandbox` copies the world state it is given."""
    return {s: ({k: v for k, v in c.items() if k != "sources"} if isinstance(c, dict) else c)
            for s, c in world_state.items()}


__all__ = ["OPEN_PARTS", "Sandbox", "SandboxError", "ServerConnection", "ServerRegistry", "ServerSpec",
           "parse_init_reply", "prove_start", "result_text", "strip_sources"]
