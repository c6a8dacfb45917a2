"""One MCP connection to one server for one session (`ServerConnection`), the part of a sandbox
(trainer/env/sandbox/mcp_host.py) that talks to a server: in-process (direct or over
`mcp.Client`), a stdio process (spawned, forked from a template or reused:
trainer/env/sandbox/forkserver.py) or a remote endpoint (streamable HTTP or SSE), every open and
call bounded by its timeout; a transport fault is a `SandboxError` naming the server, the stage
and the cause, a JSON-RPC error the server chose to send is an error result the agent sees.
`result_text` is the text an agent sees of a tool result.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult

from trainer.env.errors import SandboxError
from trainer.env.sandbox.forkserver import ProcessStarts, ReusedProcess, Template, TemplateError, file_tail, forked_stdio
from trainer.env.sandbox.servers import REMOTE_TRANSPORTS, ServerSpec

log = logging.getLogger(__name__)

RESERVED_PREFIX = "__reserved__"
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_OPEN_TIMEOUT_S = 60.0  # a stdio server may import a lot before it answers
TEARDOWN_TIMEOUT_S = 5.0
_TRANSPORT_CODES = (CONNECTION_CLOSED, REQUEST_TIMEOUT)
# `transport:` of an mcp-remote entry -> the transport used ("http" is an old spelling of ours)


@asynccontextmanager
async def _opened_within(transport: AbstractAsyncContextManager[Any], seconds: float) -> AsyncIterator[Any]:
    """`transport`, whose opening must finish within `seconds` (else `TimeoutError`).

    The scope spans the transport's whole life, so that it nests with the transport's own task
    group; once the transport is open, its deadline is lifted.
    """
    with anyio.fail_after(seconds) as scope:
        async with transport as streams:
            scope.deadline = math.inf
            yield streams


def result_text(result: CallToolResult) -> str:
    """The text an agent sees: the text parts joined; other content as JSON."""
    parts = []
    for c in result.content:
        text = getattr(c, "text", None)
        parts.append(text if isinstance(text, str) else json.dumps(c.model_dump(mode="json")))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _as_json(value: Any) -> Any:
    """`value` as it arrives after a JSON round trip (dates and datetimes as ISO text)."""
    def encode(x: Any) -> Any:
        return x.isoformat() if hasattr(x, "isoformat") else str(x)
    return json.loads(json.dumps(value, default=encode))


def _json_object(result: CallToolResult, empty_ok: bool = False) -> tuple[str, dict[str, Any] | None]:
    """A reserved tool's reply: its text, and the JSON object it holds (None if it is not one,
    or the result is an error). `empty_ok`: an empty reply reads as `{}`."""
    text = result_text(result)
    if empty_ok and not text.strip():
        return text, {} if not result.is_error else None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text, None
    return text, value if isinstance(value, dict) and not result.is_error else None


def parse_init_reply(server: str, result: CallToolResult) -> dict[str, Any]:
    """`{}` or `{"status": "ok", ...extras}` → extras; anything else is a `SandboxError`."""
    text, reply = _json_object(result, empty_ok=True)
    if reply is None or (reply and reply.get("status") != "ok"):
        raise SandboxError(server, "init", f"rejected: {text[:500]}")
    return {k: v for k, v in reply.items() if k != "status"}


class ServerConnection:
    """One MCP connection to one server, for one session. An async context manager.

    An in-process server that offers `direct_tools()` and `direct_call(name, arguments)` (our
    domains' `DomainServer`) is called directly, without `mcp.Client` and JSON-RPC, unless its
    spec says `direct=False`; its listing and results are the ones the MCP path gives.
    """

    def __init__(self, spec: ServerSpec, *, call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
                 open_timeout: float = DEFAULT_OPEN_TIMEOUT_S, starts: ProcessStarts | None = None,
                 start: str | None = None, process: ReusedProcess | None = None):
        self.spec = spec
        self.starts = starts  # the registry's process starts (None: spawn)
        self.start = start  # force "spawn", "fork" or "reuse" (proofs); None: what `starts` says
        self._template: Template | None = None
        self._reused = process  # start: reuse: the process this session runs on
        self._owns_process = process is None  # False: the caller (a proof) gives the process back
        self._faulted = False  # a system error happened: a reused process is not given back
        self.pid: int | None = None  # a forked child's pid
        self.call_timeout = call_timeout
        self.open_timeout = open_timeout
        self.tools: dict[str, Any] = {}  # name -> mcp Tool, reserved ones included
        self._client: Client | None = None
        self._direct: Callable[[str, dict[str, Any]], CallToolResult] | None = None  # the direct path
        self._stack: AsyncExitStack | None = None
        self._errlog: Any = None
        self.server: Any = None  # the in-process server object, when there is one
        self._read_timeout = max(open_timeout, call_timeout)
        self.started_as: str | None = None  # set on opening: one of OPEN_PARTS but proof and init

    @property
    def closed(self) -> bool:
        """True before opening and after closing: calls then raise `SandboxError`."""
        return self._client is None and self._direct is None

    @property
    def direct(self) -> bool:
        """True while the connection calls its in-process server directly (no `mcp.Client`)."""
        return self._direct is not None

    def _make_client(self) -> Client:
        s = self.spec
        if s.type == "in-process":
            return Client(self.server, cache=None, read_timeout_seconds=self._read_timeout)
        if s.type == "mcp-process":
            # stderr goes to a file so that a crash can be explained with its last lines
            if self._reused is not None:  # stderr is the process's own log, over its sessions
                self._errlog = self._reused.log
                return Client(self._reused.streams(), mode=s.mode, cache=None,
                              read_timeout_seconds=self._read_timeout)
            self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
            if self._template is not None:
                return Client(forked_stdio(self._template, self._errlog, on_pid=self._set_pid), mode=s.mode,
                              cache=None, read_timeout_seconds=self._read_timeout)
            params = StdioServerParameters(command=s.command[0], args=s.command[1:], env=s.env or None,
                                           cwd=str(s.cwd) if s.cwd else None)
            return Client(stdio_client(params, errlog=self._errlog), mode=s.mode, cache=None,
                          read_timeout_seconds=self._read_timeout)
        transport = REMOTE_TRANSPORTS.get(s.transport)
        if transport == "sse":
            from mcp.client.sse import sse_client

            # `timeout` bounds connect/write/pool; the event stream itself has no read timeout (it
            # is idle while the agent thinks): calls are bounded by `call_timeout`, and opening the
            # stream by `open_timeout` (`_opened_within`).
            sse = sse_client(s.endpoint, headers=s.headers or None, timeout=self.call_timeout,
                             sse_read_timeout=None)  # type: ignore[arg-type]  # httpx2: None = no limit
            return Client(_opened_within(sse, self.open_timeout), mode=s.mode, cache=None,
                          read_timeout_seconds=self._read_timeout)
        if transport != "streamable-http":
            raise ValueError(f"transport {s.transport!r} is not supported (streamable-http or sse)")
        import httpx2  # the mcp SDK's HTTP client (headers are set on it)
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=s.headers, timeout=self.call_timeout)
        return Client(streamable_http_client(s.endpoint, http_client=http), mode=s.mode, cache=None,
                      read_timeout_seconds=self._read_timeout)

    def _set_pid(self, pid: int) -> None:
        self.pid = pid

    async def _choose_start(self) -> None:
        """How this session's process starts. `start: fork`: take (or start) the server's template;
        a template that cannot start or refuses the server sends the server back to spawning for
        the rest of the run. `start: reuse`: an idle process of the server, else a new one."""
        st, s = self.starts, self.spec
        start = self.start or (st.mode(s) if st is not None else "spawn")
        if s.type == "mcp-process" and st is not None and start == "reuse":
            if self._reused is None:
                self._reused = await st.take(s)
            return
        if s.type != "mcp-process" or st is None or start != "fork":
            if s.type == "mcp-process" and st is not None:
                st.stat(s).spawns += 1
            return
        try:
            async with st.template_lock(s):
                self._template = await anyio.to_thread.run_sync(st.template, s, self.open_timeout)
        except TemplateError as e:
            if self.start == "fork":
                raise SandboxError(s.name, "connect", f"fork: {e}") from None
            st.fall_back(s, f"template: {e}")
            log.warning("server %s: start: fork refused, spawning: %s", s.name, e)
            st.stat(s).spawns += 1
            return
        st.stat(s).forks += 1

    def stderr_tail(self, n: int = 2000) -> str:
        return "" if self._errlog is None else file_tail(self._errlog, n)

    def _cause(self, e: BaseException) -> str:
        """The exception (every leaf of a group), then the server's stderr tail once."""
        def leaves(x: BaseException) -> str:
            if isinstance(x, BaseExceptionGroup):
                return "; ".join(leaves(y) for y in x.exceptions)
            return f"{type(x).__name__}: {x}" if str(x) else type(x).__name__

        msg, tail = leaves(e), self.stderr_tail()
        return f"{msg}; server stderr: {tail}" if tail else msg

    async def effects(self) -> dict[str, Any]:
        """`__reserved__geteffects` as a dict. On the direct path a server with an in-process
        `effects()` (our domains) gives the same dict without a JSON round trip (read-only rows)."""
        fast = getattr(self.server, "effects", None) if self._direct is not None else None
        if callable(fast):
            try:
                return fast()
            except Exception as e:
                raise SandboxError(self.spec.name, "effects", self._cause(e)) from e
        text, value = _json_object(await self.call(RESERVED_PREFIX + "geteffects", {}, "effects"))
        if value is None:
            self._faulted = True
            raise SandboxError(self.spec.name, "effects", f"not a JSON object: {text[:300]!r}")
        return value

    def _open_direct(self) -> bool:
        """In-process: make the server; use its direct interface when it has one (and may)."""
        assert self.spec.factory is not None
        self.server = self.spec.factory()
        call = getattr(self.server, "direct_call", None)
        listing = getattr(self.server, "direct_tools", None)
        if not (self.spec.direct and callable(call) and callable(listing)):
            return False
        self.tools = {t.name: t for t in listing()}
        self._direct = call
        return True

    async def __aenter__(self) -> ServerConnection:
        if self.spec.type == "in-process":
            self.started_as = "in_process"
            try:
                if self._open_direct():
                    return self
            except Exception as e:
                self._direct = None
                raise SandboxError(self.spec.name, "connect", self._cause(e)) from e
        await self._choose_start()
        if self.spec.type == "mcp-process":
            self.started_as = "fork" if self._template is not None else "reuse" if self._reused is not None else "spawn"
        elif self.spec.type == "mcp-remote":
            self.started_as = "remote"
        self._stack = AsyncExitStack()
        try:
            # The handshake is bounded by the client's read timeout: a `fail_after` scope cannot
            # wrap it, because the client's task group outlives this block.
            client = self._make_client()
            self._client = await self._stack.enter_async_context(client)
            with anyio.fail_after(self.open_timeout):
                self.tools = {t.name: t for t in (await self._client.list_tools()).tools}
        except BaseException as e:
            await self._close_quietly(keep_log=True)  # the process is gone: its stderr is complete
            cause = f"no answer within {self.open_timeout}s" if isinstance(e, TimeoutError) else self._cause(e)
            self._close_log()
            if isinstance(e, Exception):
                raise SandboxError(self.spec.name, "connect", cause) from e
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._close_quietly()

    async def _close_quietly(self, keep_log: bool = False) -> None:
        stack, self._stack, self._client, self._direct = self._stack, None, None, None
        if stack is not None:
            # No shield here: the client's own scopes were opened outside this frame and must
            # close in order; the stdio transport shields its own process shutdown.
            try:
                await stack.aclose()
            except Exception as e:  # a dead server may fail its own shutdown
                log.debug("closing %s: %s", self.spec.name, e)
        if not keep_log:
            self._close_log()
        process, self._reused = self._reused, None
        if process is not None and self._owns_process and self.starts is not None:
            self.starts.give_back(self.spec, process, clean=not self._faulted and not keep_log)

    def _close_log(self) -> None:
        if self._reused is not None and self._errlog is self._reused.log:
            self._errlog = None  # the process's log, not this session's
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None

    async def call(self, tool: str, arguments: dict[str, Any], stage: str = "call") -> CallToolResult:
        """Call a tool. Transport faults and timeouts raise `SandboxError`; a JSON-RPC error that
        the server chose to send (bad params, unknown tool) comes back as an error result."""
        try:
            return await self._call(tool, arguments, stage)
        except SandboxError:
            self._faulted = True
            raise

    async def _call(self, tool: str, arguments: dict[str, Any], stage: str) -> CallToolResult:
        if self._direct is not None:
            try:
                # synchronous (runs on the event loop, as in memory); the arguments as JSON would
                # carry them (a YAML date becomes its ISO text), so both paths see the same values
                return self._direct(tool, _as_json(arguments))
            except MCPError as e:
                return self._mcp_error(tool, stage, e)
            except Exception as e:  # the interface promises a result: anything else is a fault
                raise SandboxError(self.spec.name, stage, f"{tool}: {self._cause(e)}") from e
        if self._client is None:
            raise SandboxError(self.spec.name, stage, "the connection is closed")
        try:
            with anyio.fail_after(self.call_timeout):
                return await self._client.call_tool(tool, arguments)
        except TimeoutError:
            raise SandboxError(self.spec.name, stage, f"{tool}: no answer within {self.call_timeout}s") from None
        except MCPError as e:
            return self._mcp_error(tool, stage, e)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as e:
            raise SandboxError(self.spec.name, stage, f"{tool}: {self._cause(e)}") from e

    def _mcp_error(self, tool: str, stage: str, e: MCPError) -> CallToolResult:
        """A JSON-RPC error the server chose to send is an error result; a transport one a fault."""
        if e.code in _TRANSPORT_CODES:
            raise SandboxError(self.spec.name, stage, f"{tool}: {self._cause(e)}") from e
        return CallToolResult(content=[{"type": "text", "text": f"Error: {e.message}"}], is_error=True)


__all__ = ["DEFAULT_CALL_TIMEOUT_S", "DEFAULT_OPEN_TIMEOUT_S", "RESERVED_PREFIX", "TEARDOWN_TIMEOUT_S",
           "ServerConnection", "parse_init_reply", "result_text"]
