"""Knowledge bases without a search server: `search_policy` served by the sandbox from an embedded
SQLite FTS5 index over the scenario's `sources` (docs/sandbox.md, "Knowledge bases without a search server").

The reference benchmark servers index `world_state.<server>.sources: [{name, snippets: [str]}]`
into a Typesense server at `__reserved__init` and answer `search_policy` (or, in a namespaced
toolset, `<namespace>_search_policy`, e.g. `knowledge_base_search_policy`) from it with a hybrid
vector + text search. Here the sandbox itself can serve that tool: same name, same input schema,
same reply text, from an in-memory FTS5 index (BM25) over the same snippets, with nothing else
running. Which tools, by the registry's `kb_search` mode (`servers.yaml`: top-level
`kb_search: auto | embedded | server`, default `auto`):

- `auto`: a scenario tool named `search_policy` / `*_search_policy` that no server offers is served
  from the index when the task's world state has `sources` (else, as before, a listed tool no
  server offers is a `TaskFormatError`). Servers still receive their `sources`.
- `embedded`: every such scenario tool is served from the index, also when a server offers it
  (the server's own is hidden), and `sources` are left out of every server's `__reserved__init`
  config, so that a reference server does not try to reach Typesense.
- `server`: never (the reference's behaviour).

The reply, as the reference servers write it (`json.dumps` of the tool's output):
`{"snippets": [{"source": NAME, "score": INT, "vector_distance": 2.0, "text": SNIPPET}, ...]}`,
best first, at most `max_results` (default 3, values below 1 read as 3, above 10 as 10), at most
3 snippets of one source, 10 sources. Errors read `{"error": "Tool execution failed: ...",
"tool": NAME}`: invalid arguments (`Input validation failed: query: Field required`), or, when
the world state has no sources (`--strip-sources`), `Search service is not available`.

Ranking (documented in docs/sandbox.md): words of the query (lowercased `\\w+` runs) OR-ed, Porter
stemmed (`porter unicode61`), ranked by FTS5's BM25 (`score` = -bm25 x 10^6, rounded; ties in
source order). No vectors: `vector_distance` is 2.0, the reference's value for a hit without
one, and a query that shares no stemmed word with a snippet finds nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from trainer.env.db.cache import ComputeCache
from trainer.env.errors import TaskFormatError

MODES = ("auto", "embedded", "server")
DEFAULT_MODE = "auto"
_KB_TOOL = re.compile(r"(?:^|_)search_policy$")
DEFAULT_RESULTS, MAX_RESULTS = 3, 10
PER_SOURCE, MAX_SOURCES = 3, 10  # the reference groups hits by source: 3 a group, 10 groups
NO_VECTOR_DISTANCE = 2.0  # the reference's vector_distance of a hit that has none
UNAVAILABLE = "Search service is not available"

DESCRIPTION = ("Search the policy knowledge base with a natural language query. "
               "Returns the best-matching policy articles: source, relevance score and full text.")
INPUT_SCHEMA: dict[str, Any] = {
    "additionalProperties": False,
    "description": "Input for search_policy tool.",
    "properties": {
        "query": {"description": "Natural language search query to find relevant articles",
                  "examples": ["how to return a product", "shipping costs and delivery time"],
                  "title": "Query", "type": "string"},
        "max_results": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": DEFAULT_RESULTS,
                        "description": "Maximum number of articles to return (default: 3, max: 10)",
                        "examples": [3, 5], "title": "Max Results"},
    },
    "required": ["query"],
    "title": "SearchPolicyInput",
    "type": "object",
}


class _Input(BaseModel):
    """The arguments, validated as the reference validates them (pydantic, extra fields forbidden)."""

    model_config = ConfigDict(extra="forbid")
    query: str
    max_results: int | None = DEFAULT_RESULTS


def is_kb_tool(name: str) -> bool:
    """Is `name` a knowledge-base search tool (`search_policy` or `<namespace>_search_policy`)?"""
    return bool(_KB_TOOL.search(name))


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise ValueError(f"kb_search must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def server_config(mode: str, config: Any) -> Any:
    """The config a server's `__reserved__init` receives: in `embedded` mode without `sources`."""
    if mode == "embedded" and isinstance(config, dict) and "sources" in config:
        return {k: v for k, v in config.items() if k != "sources"}
    return config


def sources_in(world_state: dict[str, Any], task: Any = None) -> list[dict[str, Any]]:
    """Every server's `sources`, in world-state order, checked: `[{name: str, snippets: [str]}]`.
    A wrong shape is a `TaskFormatError` naming the file (the test file when its `init` sets the
    server's sources, else the scenario) and the field (`world_state.SERVER.sources[i].snippets`)."""
    out: list[dict[str, Any]] = []
    for server, config in world_state.items():
        if not isinstance(config, dict) or config.get("sources") is None:
            continue
        init = getattr(task, "init", None) or {}
        file = (task.file if isinstance(init.get(server), dict) and "sources" in init[server]
                else task.scenario.path) if task is not None else "world_state"
        key = f"world_state.{server}.sources"
        sources = config["sources"]
        if not isinstance(sources, list):
            raise TaskFormatError(file, f"must be a list of {{name, snippets}}, got {type(sources).__name__}", key=key)
        for i, s in enumerate(sources):
            if not isinstance(s, dict) or not isinstance(s.get("name"), str):
                raise TaskFormatError(file, "must be a mapping with a string `name`", key=f"{key}[{i}]")
            snippets = s.get("snippets")
            if not isinstance(snippets, list) or not all(isinstance(x, str) for x in snippets):
                raise TaskFormatError(file, "must be a list of strings", key=f"{key}[{i}].snippets")
            out.append({"name": s["name"], "snippets": list(snippets)})
    return out


def has_sources(world_state: dict[str, Any]) -> bool:
    return any(isinstance(c, dict) and c.get("sources") for c in world_state.values())


class KnowledgeBase:
    """An in-memory FTS5 index over `sources` (one row per snippet). Read-only once built; safe to
    share between sessions and threads (one lock around the connection)."""

    def __init__(self, sources: list[dict[str, Any]]):
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("CREATE VIRTUAL TABLE kb USING fts5(source UNINDEXED, text, "
                         "tokenize='porter unicode61')")
        self._db.executemany("INSERT INTO kb (source, text) VALUES (?, ?)",
                             [(s["name"], text) for s in sources for text in s["snippets"]])
        self.snippets = sum(len(s["snippets"]) for s in sources)

    def search(self, query: str, max_results: int = DEFAULT_RESULTS) -> list[dict[str, Any]]:
        """The best `max_results` snippets for `query` (at most `PER_SOURCE` of one source and
        `MAX_SOURCES` sources), each `{source, score, vector_distance, text}`."""
        words = re.findall(r"\w+", query.lower())
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        with self._lock:
            rows = self._db.execute("SELECT source, text, bm25(kb) FROM kb WHERE kb MATCH ? "
                                    "ORDER BY bm25(kb), rowid", (match,)).fetchall()
        out: list[dict[str, Any]] = []
        per: dict[str, int] = {}
        seen: set[tuple[str, str]] = set()
        for source, text, rank in rows:
            if (source, text) in seen or per.get(source, 0) >= PER_SOURCE:
                continue
            if source not in per and len(per) >= MAX_SOURCES:
                continue
            seen.add((source, text))
            per[source] = per.get(source, 0) + 1
            out.append({"source": source, "score": int(round(-rank * 1_000_000)),
                        "vector_distance": NO_VECTOR_DISTANCE, "text": text})
        return out[:max_results]


def index_key(sources: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(sources, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class EmbeddedSearch:
    """The knowledge-base tools one sandbox serves itself. `kb` is None when the world state has
    no sources: every call then reports the search service unavailable, as the reference does."""

    names: list[str]
    kb: KnowledgeBase | None

    def offered(self) -> dict[str, dict[str, Any]]:
        return {n: {"description": DESCRIPTION, "input_schema": json.loads(json.dumps(INPUT_SCHEMA))}
                for n in self.names}

    def call(self, name: str, arguments: Any) -> str:
        """The reply text of one call (the reference's: `json.dumps` of the output or the error)."""
        try:
            args = _Input.model_validate(arguments if isinstance(arguments, dict) else {})
        except ValidationError as e:
            details = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'unknown'}: {err['msg']}"
                                for err in e.errors())
            return _error(name, f"Input validation failed: {details}")
        if self.kb is None:
            return _error(name, UNAVAILABLE)
        n = args.max_results or DEFAULT_RESULTS
        n = DEFAULT_RESULTS if n < 1 else min(n, MAX_RESULTS)
        return json.dumps({"snippets": self.kb.search(args.query, n)})


def _error(name: str, message: str) -> str:
    return json.dumps({"error": f"Tool execution failed: {message}", "tool": name})


def embedded_search(mode: str, task: Any, world_state: dict[str, Any], offered: dict[str, Any],
                    cache: ComputeCache | None = None) -> EmbeddedSearch | None:
    """The tools this session serves from the index (None: none), by `mode` (module docstring).
    `world_state` is what the sandbox opened (sources may be stripped); in `auto` mode the task's
    own world state decides whether the scenario has a knowledge base at all. `cache` (the
    registry's) keeps one index per distinct set of sources."""
    if mode == "server":
        return None
    names = [t.name for t in task.scenario.tools if is_kb_tool(t.name)
             and (mode == "embedded" or t.name not in offered)]
    if not names or (mode == "auto" and not has_sources(task.world_state())):
        return None
    sources = sources_in(world_state, task)
    if not any(s["snippets"] for s in sources):
        return EmbeddedSearch(names, None)
    if cache is None:
        return EmbeddedSearch(names, KnowledgeBase(sources))
    return EmbeddedSearch(names, cache.get_or_compute(index_key(sources), lambda: KnowledgeBase(sources)))


__all__ = ["DEFAULT_MODE", "DESCRIPTION", "INPUT_SCHEMA", "MODES", "EmbeddedSearch", "KnowledgeBase",
           "check_mode", "embedded_search", "has_sources", "is_kb_tool", "server_config", "sources_in"]
