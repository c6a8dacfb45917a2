"""Where a task's servers live: `servers.yaml` (the reference's registry format, plus our keys)
read into `ServerSpec`s, and the `ServerRegistry` a sandbox asks by name.

Entry types: `mcp-process` (a command started per session over stdio; `start: spawn | fork |
reuse`, see trainer/env/sandbox/forkserver.py), `mcp-remote` (an endpoint over streamable HTTP or SSE),
and ours, `in-process` (`factory: module:callable`). The internal servers (our domains) are handed
in by the caller as `domains`: env imports nothing above it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from trainer.env.sandbox import kb_search as kb
from trainer.env.taskformat import yamlio
from trainer.env.db.cache import ComputeCache
from trainer.env.errors import SandboxError, TaskFormatError
from trainer.env.sandbox.forkserver import START_MODES, ProcessStarts

REMOTE_TRANSPORTS = {"streamable-http": "streamable-http", "http": "streamable-http", "sse": "sse"}


@dataclass
class ServerSpec:
    """How to reach one server (one entry of `servers.yaml`)."""

    name: str
    type: Literal["in-process", "mcp-process", "mcp-remote"]
    factory: Callable[[], Any] | None = None  # in-process: returns a fresh MCPServer
    command: list[str] = field(default_factory=list)  # mcp-process: argv, `{python}` substituted
    env: dict[str, str] = field(default_factory=dict)  # mcp-process: merged over the SDK's safe env
    cwd: Path | None = None  # mcp-process: working directory
    endpoint: str | None = None  # mcp-remote: URL
    transport: str = "streamable-http"  # mcp-remote: "streamable-http" or "sse" (REMOTE_TRANSPORTS)
    headers: dict[str, str] = field(default_factory=dict)  # mcp-remote: sent with every request
    mode: str = "legacy"  # external servers: "legacy" (initialize, 2025-11-25; the reference generation) or "auto"
    direct: bool = True  # in-process: call the server's `direct_call` when it has one; False forces mcp.Client
    start: str = "spawn"  # mcp-process: "spawn" (a process per session), "fork" or "reuse" (trainer/env/sandbox/forkserver.py)
    proof_rate: float = 0.0  # mcp-process, start: fork / reuse: share of later sessions proven again (the first always is)
    preload: list[str] = field(default_factory=list)  # mcp-process, start: fork: more modules for the template


def _load_factory(ref: str, base: Path) -> Callable[[], Any]:
    """`"package.module:callable"`, or `"path/to/file.py:callable"` (relative to `base`)."""
    module, _, attr = ref.rpartition(":")
    if not module or not attr:
        raise ValueError(f"factory must read 'module:callable' or 'file.py:callable', got {ref!r}")
    if module.endswith(".py"):
        path = (base / module).resolve()
        spec = importlib.util.spec_from_file_location(f"tb_servers.{path.stem}", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ValueError(f"no such file: {path}")
        obj: Any = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(obj)
    else:
        obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """A YAML file's value and its node tree (for line numbers), from one parse; unreadable or
    invalid YAML is a `TaskFormatError` naming the file (and the line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        why = "no such file" if isinstance(e, FileNotFoundError) else getattr(e, "strerror", None) or str(e)
        raise TaskFormatError(path, f"cannot read: {why}") from None
    try:
        return yamlio.load(text, lambda node: node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise TaskFormatError(path, f"invalid YAML: {getattr(e, 'problem', None) or e}",
                              line=mark.line + 1 if mark else None) from None


def _key_lines(node: yaml.Node | None, *keys: str) -> dict[str, int]:
    """Line (1-based) of every key of the mapping at `keys` in a composed YAML tree."""
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return {}
        node = next((v for k, v in node.value if k.value == key), None)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _ in node.value}


def _strings(entry: dict[str, Any], key: str) -> dict[str, str]:
    """`entry[key]`, a mapping of scalars (env, headers), as strings."""
    value = entry.get(key) or {}
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be a mapping, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _spec(name: str, e: dict[str, Any], path: Path, python: str) -> ServerSpec:
    """One `servers.yaml` entry; a bad one raises `ValueError` saying what is wrong."""
    kind = e.get("type")
    if kind == "mcp-process":
        cmd = e.get("command")
        cmd = cmd.split() if isinstance(cmd, str) else cmd
        if not isinstance(cmd, list) or not cmd:
            raise ValueError("needs a command (a string or a list of strings)")
        cwd = None
        if e.get("cwd"):
            cwd = Path(str(e["cwd"]))
            if not cwd.is_absolute() and (path.parent / cwd).is_dir():
                cwd = path.parent / cwd
        start = str(e.get("start", "spawn"))
        if start not in START_MODES:
            raise ValueError(f"start {start!r} is not supported ({' or '.join(START_MODES)})")
        rate = e.get("proof_rate", 0.0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise ValueError(f"proof_rate must be a number in [0, 1], got {rate!r}")
        preload = e.get("preload") or []
        if not isinstance(preload, list) or not all(isinstance(m, str) and m for m in preload):
            raise ValueError(f"preload must be a list of module names, got {preload!r}")
        return ServerSpec(name, "mcp-process", command=[str(c).replace("{python}", python) for c in cmd],
                          env=_strings(e, "env"), cwd=cwd, mode=e.get("mode", "legacy"), start=start,
                          proof_rate=float(rate), preload=preload)
    if kind == "mcp-remote":
        transport = REMOTE_TRANSPORTS.get(str(e.get("transport", "streamable-http")))
        if transport is None:
            raise ValueError(f"transport {e.get('transport')!r} is not supported (streamable-http or sse)")
        if not e.get("endpoint"):
            raise ValueError("needs an endpoint")
        return ServerSpec(name, "mcp-remote", endpoint=str(e["endpoint"]), transport=transport,
                          headers=_strings(e, "headers"), mode=e.get("mode", "legacy"))
    if kind == "in-process":
        ref = e.get("factory")
        if not isinstance(ref, str) or not ref:
            raise ValueError("needs a factory ('module:callable' or 'file.py:callable')")
        try:
            factory = _load_factory(ref, path.parent)
        except ValueError:
            raise
        except Exception as err:  # the factory's module is user code: any failure is a bad entry
            raise ValueError(f"cannot load factory {ref!r}: {type(err).__name__}: {err}") from None
        return ServerSpec(name, "in-process", factory=factory, direct=bool(e.get("direct", True)))
    raise ValueError(f"unknown type {kind!r} (mcp-process, mcp-remote, in-process)")


class ServerRegistry:
    """Server name → `ServerSpec`: declared servers first, then the internal servers the caller
    passed as `domains` (name → factory of a fresh in-process server), unless
    `use_internal_servers` is false. Without `domains` there are no internal servers."""

    def __init__(self, specs: Mapping[str, ServerSpec] | None = None,
                 domains: Mapping[str, Callable[[], Any]] | None = None, *,
                 use_internal_servers: bool = True, kb_search: str = kb.DEFAULT_MODE):
        self.specs = dict(specs or {})
        self.domains = dict(domains or {})
        # False: only the declared servers exist (no fallback to the domains by name)
        self.use_internal_servers = use_internal_servers
        # which `search_policy` tools the sandbox serves from an embedded index (trainer/env/sandbox/kb_search.py)
        self.kb_search = kb.check_mode(kb_search)
        self.kb_indexes = ComputeCache(maxsize=64)  # one index per distinct set of sources
        self.starts = ProcessStarts()  # templates, idle processes, proofs, statistics (start: fork / reuse)

    def process_stats(self) -> dict[str, dict[str, Any]]:
        """`{server: ServerStats as a dict}` for the process servers that opened sessions."""
        return {name: dataclasses.asdict(s) for name, s in sorted(self.starts.stats.items())}

    def uses_fork(self) -> bool:
        """Does a declared process server start other than by spawning (`start: fork` / `reuse`)?"""
        return any(s.type == "mcp-process" and s.start != "spawn" for s in self.specs.values())

    def close(self) -> None:
        """Stop the templates and idle reused processes (they also die with this process)."""
        self.starts.close()

    @classmethod
    def from_yaml(cls, path: Path | str, python: str | None = None,
                  domains: Mapping[str, Callable[[], Any]] | None = None) -> ServerRegistry:
        """Read a ThinkingBox `servers.yaml`. `{python}` in commands becomes `python` (default:
        this interpreter). A relative `cwd` is taken from the YAML's folder when it exists there,
        else from the current directory (the reference's reading). `use_internal_servers` (a bool,
        default true, as in the reference) says whether names not declared here fall back to
        `domains`; `kb_search` (ours: auto, embedded or server) says which `search_policy` tools
        the sandbox serves itself (trainer/env/sandbox/kb_search.py); other top-level keys are ignored.
        Any problem with the file is a `TaskFormatError` naming it, the line and the entry
        (`servers.NAME`)."""
        path = Path(path)
        doc, node = _read_yaml(path)
        doc = {} if doc is None else doc
        servers = doc.get("servers") if isinstance(doc, dict) else None
        if not isinstance(servers, dict):
            raise TaskFormatError(path, "must hold `servers: {name: {type, ...}}`",
                                  line=_key_lines(node).get("servers"), key="servers")
        internal = doc.get("use_internal_servers", True)
        if not isinstance(internal, bool):
            raise TaskFormatError(path, f"must be true or false, got {internal!r}",
                                  line=_key_lines(node).get("use_internal_servers"), key="use_internal_servers")
        mode = doc.get("kb_search", kb.DEFAULT_MODE)
        if mode not in kb.MODES:
            raise TaskFormatError(path, f"must be one of {', '.join(kb.MODES)}, got {mode!r}",
                                  line=_key_lines(node).get("kb_search"), key="kb_search")
        lines = _key_lines(node, "servers")
        specs = {}
        for name, entry in servers.items():
            try:
                if not isinstance(entry, dict):
                    raise ValueError(f"must be a mapping ({{type: ...}}), got {entry!r}")
                specs[str(name)] = _spec(str(name), entry, path, python or sys.executable)
            except ValueError as err:
                raise TaskFormatError(path, str(err), line=lines.get(str(name)), key=f"servers.{name}") from None
        return cls(specs, domains, use_internal_servers=internal, kb_search=mode)

    def get(self, name: str) -> ServerSpec:
        if name in self.specs:
            return self.specs[name]
        if not self.use_internal_servers:
            raise SandboxError(name, "connect", "no such server: not in servers.yaml, and "
                               "use_internal_servers is false (internal servers are not offered by name)")
        if name in self.domains:
            return ServerSpec(name, "in-process", factory=self.domains[name])
        raise SandboxError(name, "connect", "no such server: not in servers.yaml and not an internal "
                           f"server (internal: {', '.join(sorted(self.domains)) or 'none'})")
