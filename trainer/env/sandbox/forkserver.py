"""Process servers at in-process speed: `start: fork` in `servers.yaml` (default `start: spawn`).

A ThinkingBox-protocol server isolates sessions by process (its world lives in module globals,
built once), and a Python process spends most of its start (~1.5 s) on imports. With `start: fork`
the host starts one *template* per server (`_zygote.py`, under the server's own interpreter, env
and cwd): it imports what the server's source imports at top level, checks that no thread is
running (forking after threads is unsafe: such a server is refused with the reason), and waits.
Each session forks a child from it whose stdin/stdout/stderr are the session's pipes and which
runs the server's entry as `__main__`: a pristine process whose imports are already done. The MCP
session over those pipes is the one over a spawned process (`forked_stdio` mirrors the SDK's
`stdio_client`, shutdown included: close stdin, wait, SIGTERM then SIGKILL the child's group).
Children die with the template (PR_SET_PDEATHSIG), the template when the host closes its socket.

`preload: [module, ...]` in the entry names more modules for the template to import: those the
server imports lazily as it runs (its transport, its logging), which each child would import again.

Which commands can fork: `PYTHON SCRIPT.py ARGS...` and `PYTHON -m PKG.MOD ARGS...` (PYTHON: an
interpreter named `python*`). Anything else runs spawned, with the reason in the statistics.

**Proven exact.** A server's first session is preceded by a proof, and then a sample of them
(`proof_rate`, default 0): the same task (`__reserved__init` with the task's config, the golden
actions, `__reserved__geteffects`) on a forked child and on a freshly spawned process; the init
replies, tool replies and effects are compared as canonical JSON (sorted keys; hashes included).
A difference sends the server back to spawning for the rest of the run, with the differing keys.
A template that died is restarted; a child that crashed, hung or timed out is a `SandboxError`
for its session only (and is killed on close).

Limits: module state built *at import* by a dependency is built once, in the template, and every
child gets a copy (random's state is reseeded at fork by CPython; a dependency caching the pid,
the time or an open file at import does not): the proof is what catches such state. The server
module itself is never imported in the template. A dependency that starts a thread at import
(native ones too: the template counts /proc/self/task) makes the server refused.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

ZYGOTE = Path(__file__).with_name("_zygote.py")
START_MODES = ("spawn", "fork", "reuse")
_PYTHON = re.compile(r"python[0-9.]*$")
_TERM_GRACE_S = 2.0  # as the SDK's stdio_client: stdin closed, then SIGTERM, then SIGKILL



def file_tail(f: Any, n: int) -> str:
    """The last `n` characters of a log file a process writes into (its stderr), stripped; "" if unreadable."""
    try:
        f.flush()
        f.seek(0)
        return f.read()[-n:].strip()
    except (OSError, ValueError):
        return ""

class TemplateError(RuntimeError):
    """The template could not start, refused the server, or died."""


def fork_argv(command: list[str]) -> list[str] | None:
    """The server's argv after the interpreter when `command` can run forked, else None."""
    if len(command) < 2 or not _PYTHON.search(os.path.basename(command[0])):
        return None
    if command[1] == "-m" and len(command) > 2:
        return command[1:]
    if command[1].endswith(".py"):
        return command[1:]
    return None


class Template:
    """One template process of one server: started on demand, forks session children."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: str | None, ready_timeout: float,
                 preload: list[str] | None = None):
        argv = fork_argv(command)
        if argv is None:
            raise TemplateError("the command is not `PYTHON SCRIPT.py ...` or `PYTHON -m MODULE ...`")
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        try:
            self.proc = subprocess.Popen(
                [command[0], str(ZYGOTE), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=self._log, cwd=cwd, env={**env, "TBT_ZYGOTE_FD": str(theirs.fileno()),
                                                  "TBT_ZYGOTE_PRELOAD": ",".join(preload or [])},
                pass_fds=[theirs.fileno()], start_new_session=True)
        except OSError as e:
            ours.close()
            raise TemplateError(f"cannot start: {e}") from None
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(ready_timeout)
        try:
            hello = json.loads(ours.recv(65536) or b"null")
        except (OSError, ValueError) as e:
            hello = None
            why = f"no ready message within {ready_timeout}s" if isinstance(e, TimeoutError) else str(e)
        else:
            why = "exited before it was ready"
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.close()
            why = hello.get("refused", why) if isinstance(hello, dict) else why
            tail = self.log_tail()
            raise TemplateError(f"{why}; template stderr: {tail}" if tail else why)
        ours.settimeout(None)
        self.info = hello

    def alive(self) -> bool:
        return self.proc.poll() is None and self._sock.fileno() >= 0

    def fork(self, stdin: int, stdout: int, stderr: int) -> int:
        """A new child on these fds (blocking; a thread's work); its pid."""
        with self._lock:
            try:
                socket.send_fds(self._sock, [b"fork"], [stdin, stdout, stderr])
                reply = json.loads(self._sock.recv(4096) or b"null")
            except (OSError, ValueError) as e:
                raise TemplateError(f"the template died: {e}") from None
        if not isinstance(reply, dict) or "pid" not in reply:
            raise TemplateError(f"the template died (exit {self.proc.poll()}); {self.log_tail()}")
        return int(reply["pid"])

    def log_tail(self, n: int = 1500) -> str:
        return file_tail(self._log, n)

    def close(self) -> None:
        """Close the socket (the template exits, its children die with it) and reap it."""
        self._sock.close()
        try:
            self.proc.wait(timeout=_TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _alive(pid: int) -> bool:
    """Is `pid` running (not a zombie)? The template reaps its children."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


async def _exited(pid: int, seconds: float) -> bool:
    deadline = anyio.current_time() + seconds
    while _alive(pid):
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.005)
    return True


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the child leads its own session: its group is its tree
    except OSError:
        pass


async def _stop_child(pid: int) -> None:
    if await _exited(pid, _TERM_GRACE_S):
        return
    _kill_group(pid, signal.SIGTERM)
    if not await _exited(pid, _TERM_GRACE_S):
        _kill_group(pid, signal.SIGKILL)
        await _exited(pid, _TERM_GRACE_S)


@asynccontextmanager
async def pipe_streams(w_in: int, r_out: int, stop: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The session's (read_stream, write_stream) over a server's stdin (`w_in`) and stdout
    (`r_out`) pipes, newline-delimited JSON-RPC as the SDK's stdio transport; on exit the streams
    close and `await stop()` runs shielded. The fds stay the caller's."""
    os.set_blocking(w_in, False)
    os.set_blocking(r_out, False)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        buffer = b""
        async with read_writer:
            while True:
                await anyio.wait_readable(r_out)
                try:
                    chunk = os.read(r_out, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    try:
                        msg: SessionMessage | Exception = SessionMessage(
                            types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                    except ValueError as e:
                        msg = e
                    try:
                        await read_writer.send(msg)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async def writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
                    while data:
                        try:
                            data = data[os.write(w_in, data):]
                        except BlockingIOError:
                            await anyio.wait_writable(w_in)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server is gone: the session sees the connection end

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await stop()
            tg.cancel_scope.cancel()


@asynccontextmanager
async def forked_stdio(template: Template, errlog: TextIO,
                       on_pid: Any = None) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport, over a child forked from `template`: yields the session's
    (read_stream, write_stream); on exit closes the child's stdin, waits, then kills its group."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    try:
        pid = await anyio.to_thread.run_sync(template.fork, r_in, w_out, errlog.fileno())
    except BaseException:
        os.close(w_in)
        os.close(r_out)
        raise
    finally:
        os.close(r_in)
        os.close(w_out)
    if on_pid is not None:
        on_pid(pid)
    fds = {"w_in": w_in}

    async def stop() -> None:
        os.close(fds.pop("w_in"))  # EOF on the child's stdin: it ends, as a spawned server does
        await _stop_child(pid)

    try:
        async with pipe_streams(w_in, r_out, stop) as streams:
            yield streams
    finally:
        if "w_in" in fds:
            os.close(fds.pop("w_in"))
        os.close(r_out)
        if _alive(pid):
            _kill_group(pid, signal.SIGKILL)


class ReusedProcess:
    """A spawned server process that serves sessions in turn (`start: reuse`)."""

    def __init__(self, spec: Any):
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(spec.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     cwd=str(spec.cwd) if spec.cwd else None,
                                     env=get_default_environment() | (spec.env or {}), start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.w_in, self.r_out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.sessions = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def streams(self) -> Any:
        async def stop() -> None:
            return None
        self.sessions += 1
        return pipe_streams(self.w_in, self.r_out, stop)

    def kill(self) -> None:
        """Kill it and its tree; its log stays readable (a failed session's stderr tail)."""
        if self.alive():
            _kill_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


# ---------------------------------------------------------------------------- per-run state

@dataclass
class ServerStats:
    """What the host did for one process server over a run (`ServerRegistry.process_stats()`)."""

    start: str  # what servers.yaml asked: spawn | fork | reuse
    mode: str  # what its sessions get now: spawn | fork | reuse (after a refusal or a failed proof: spawn)
    forks: int = 0  # sessions served by a forked child (proof sessions included)
    reuses: int = 0  # start: reuse: sessions served by a process that had served one before
    spawns: int = 0  # sessions served by a freshly spawned process (proof sessions included)
    proofs: int = 0  # proofs run (fork vs spawn on one task)
    proofs_failed: int = 0
    template_starts: int = 0  # 1, plus one per restart of a template that died
    fallback: str | None = None  # why the server went back to spawning, when it did
    differing: list[str] = field(default_factory=list)  # the keys a failed proof found different
    template: dict[str, Any] = field(default_factory=dict)  # the template's ready message


class ProcessStarts:
    """How a registry's `mcp-process` servers start, for one run: templates, proofs, statistics.
    Templates are started lazily (blocking, ~the server's import time) and closed by `close()`,
    at interpreter exit at the latest (and they die with this process)."""

    def __init__(self) -> None:
        self.stats: dict[str, ServerStats] = {}
        self._templates: dict[str, Template] = {}
        self._locks: dict[str, anyio.Lock] = {}  # proofs
        self._template_locks: dict[str, anyio.Lock] = {}
        self._sessions: dict[str, int] = {}
        self.idle: dict[str, list[ReusedProcess]] = {}  # start: reuse: processes between sessions

    def stat(self, spec: Any) -> ServerStats:
        if spec.name not in self.stats:
            self.stats[spec.name] = ServerStats(spec.start, spec.start)
        return self.stats[spec.name]

    def mode(self, spec: Any) -> str:
        return self.stat(spec).mode

    def fall_back(self, spec: Any, why: str, differing: list[str] | None = None) -> None:
        s = self.stat(spec)
        s.mode, s.fallback, s.differing = "spawn", why, list(differing or [])
        t = self._templates.pop(spec.name, None)
        if t is not None:
            t.close()
        for p in self.idle.pop(spec.name, []):
            p.kill()

    def template(self, spec: Any, timeout: float) -> Template:
        """The server's live template (started, or restarted when it died)."""
        t = self._templates.get(spec.name)
        if t is not None and t.alive():
            return t
        if t is not None:
            t.close()
        env = get_default_environment() | (spec.env or {})
        t = Template(spec.command, env, str(spec.cwd) if spec.cwd else None, timeout, spec.preload)
        s = self.stat(spec)
        s.template_starts += 1
        s.template = dict(t.info)
        self._templates[spec.name] = t
        return t

    def lock(self, spec: Any) -> anyio.Lock:
        return self._locks.setdefault(spec.name, anyio.Lock())

    def template_lock(self, spec: Any) -> anyio.Lock:
        return self._template_locks.setdefault(spec.name, anyio.Lock())

    def proof_due(self, spec: Any) -> str | None:
        """"first" before the server's first forked session, "sample" for `spec.proof_rate` of the
        later ones (every 1/rate-th session, deterministically), else None."""
        if spec.start not in ("fork", "reuse"):
            return None
        n = self._sessions[spec.name] = self._sessions.get(spec.name, 0) + 1
        s = self.stat(spec)
        if s.mode == "spawn":
            return None
        if s.proofs == 0:
            return "first"
        rate = max(0.0, min(1.0, float(spec.proof_rate)))
        return "sample" if int(n * rate) != int((n - 1) * rate) else None

    async def take(self, spec: Any) -> ReusedProcess:
        """An idle live process of the server, else a new one (spawned in a worker thread)."""
        pool = self.idle.setdefault(spec.name, [])
        while pool:
            p = pool.pop()
            if p.alive():
                self.stat(spec).reuses += 1
                return p
            p.kill()
        self.stat(spec).spawns += 1
        return await anyio.to_thread.run_sync(ReusedProcess, spec)

    def give_back(self, spec: Any, process: ReusedProcess, clean: bool) -> None:
        """After a session: a clean one's live process waits for the next session (while the server
        still reuses), any other is killed."""
        if clean and process.alive() and self.mode(spec) == "reuse":
            self.idle.setdefault(spec.name, []).append(process)
        else:
            process.kill()

    def close(self) -> None:
        for t in self._templates.values():
            t.close()
        self._templates.clear()
        for pool in self.idle.values():
            for p in pool:
                p.kill()
        self.idle.clear()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def differing_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Keys (one level into `effects`) whose canonical values differ between two proof records."""
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict) and k == "effects":
            out += [f"effects.{j}" for j in sorted(set(x) | set(y)) if canonical(x.get(j)) != canonical(y.get(j))]
        elif canonical(x) != canonical(y):
            out.append(k)
    return out


__all__ = ["ProcessStarts", "ReusedProcess", "ServerStats", "Template", "TemplateError", "canonical", "differing_keys",
           "file_tail", "fork_argv", "forked_stdio", "pipe_streams"]
