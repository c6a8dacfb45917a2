"""The ThinkingBox-format task loader (docs/tasks.md: "Layout", "Agents and scenarios", "Rules implemented").

A dataset is a folder:

    DATASET/agent/<name>.yaml       system prompt + builtin tools
    DATASET/scenario/<name>.yaml    world_state (per-server init config) + the agent's tool list
    DATASET/test_case/**.py|.yaml   tests (see `trainer.env.taskformat.testfile`)

`load_dataset(root)` reads everything, collecting every error (file, line, key) instead of
stopping at the first; `load_dataset(root, strict=True)` raises `DatasetError` with all of them.
A `Task` is one test joined to its scenario: uid `<file basename>:<function>`, the merged
per-server init config (`Task.world_state()`), the golden actions, and the compiled test function.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from trainer.env.taskformat import yamlio
from trainer.env.grading.tb_shim import install_thinkingbox_shim
from trainer.env.errors import DatasetError, TaskFormatError
from trainer.env.grading.testcode import CompiledFile, exec_source, failure_line, resolve_test_code  # noqa: F401  (failure_line, resolve_test_code: re-exported)
from trainer.env.taskformat.testfile import RawTest, parse_test_file

DEFAULT_MAX_USER_SIM_TURNS = 10
TOOL_KEYS = frozenset({"name", "override_description", "override_arg_description",
                       "direct_response", "is_end_turn"})


# ---------------------------------------------------------------------------- agent, scenario

@dataclass
class ToolSpec:
    """A tool the agent may see, as a scenario (or agent, for builtins) declares it."""

    name: str
    description: str | None = None  # builtin tools carry their own; MCP tools get the server's
    input_schema: dict[str, Any] | None = None
    override_description: str | None = None
    override_arg_description: dict[str, str] | None = None
    direct_response: str | None = None
    is_end_turn: bool = False


@dataclass
class Agent:
    name: str
    path: Path
    system_instructions: str
    builtin_tools: list[ToolSpec]


@dataclass
class Scenario:
    name: str
    path: Path
    world_state: dict[str, Any]
    tools: list[ToolSpec]
    bot_instructions: str | None = None
    tags: list[str] = field(default_factory=list)
    fixtures: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def _read_yaml_mapping(path: Path) -> tuple[dict, dict[str, int]]:
    try:
        obj, lines = yamlio.load(path.read_text(encoding="utf-8"), yamlio.key_lines)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise TaskFormatError(path, f"invalid YAML: {getattr(e, 'problem', None) or e}",
                              line=mark.line + 1 if mark else None) from None
    if not isinstance(obj, dict):
        raise TaskFormatError(path, f"must be a YAML mapping, got {type(obj).__name__}", line=1)
    return obj, lines


def _tool_specs(raw: Any, path: Path, key: str, line: int | None, builtin: bool) -> list[ToolSpec]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TaskFormatError(path, "must be a list of tools", line=line, key=key)
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise TaskFormatError(path, f"entry {i} must be a mapping with a string `name`",
                                  line=line, key=f"{key}[{i}]")
        oad = t.get("override_arg_description")
        if oad is not None and not isinstance(oad, dict):
            raise TaskFormatError(path, "override_arg_description must map argument -> text",
                                  line=line, key=f"{key}[{i}].override_arg_description")
        if builtin and not isinstance(t.get("input_schema", {}), dict):
            raise TaskFormatError(path, "input_schema must be a mapping", line=line,
                                  key=f"{key}[{i}].input_schema")
        out.append(ToolSpec(
            name=t["name"],
            description=t.get("description"),
            input_schema=t.get("input_schema") if builtin else None,
            override_description=t.get("override_description"),
            override_arg_description=oad,
            direct_response=t.get("direct_response"),
            is_end_turn=bool(t.get("is_end_turn", False)),
        ))
    return out


def load_agent(path: Path) -> Agent:
    obj, lines = _read_yaml_mapping(path)
    si = obj.get("system_instructions")
    if not isinstance(si, str):
        raise TaskFormatError(path, "required string", line=lines.get("system_instructions", 1),
                              key="system_instructions")
    tools = _tool_specs(obj.get("builtin_tools"), path, "builtin_tools", lines.get("builtin_tools"), True)
    return Agent(path.stem, path, si, tools)


def load_scenario(path: Path) -> Scenario:
    obj, lines = _read_yaml_mapping(path)
    ws = obj.get("world_state")
    if not isinstance(ws, dict):
        raise TaskFormatError(path, "required mapping {server_name: config}",
                              line=lines.get("world_state", 1), key="world_state")
    if "tools" not in obj:
        raise TaskFormatError(path, "required list of the agent's MCP tools", line=1, key="tools")
    tools = _tool_specs(obj["tools"], path, "tools", lines.get("tools"), False)
    tags = obj.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskFormatError(path, "must be a list of strings", line=lines.get("tags"), key="tags")
    bi = obj.get("bot_instructions")
    if bi is not None and not isinstance(bi, str):
        raise TaskFormatError(path, "must be a string", line=lines.get("bot_instructions"),
                              key="bot_instructions")
    return Scenario(path.stem, path, ws, tools, bi, tags,
                    dict(obj.get("fixtures") or {}), dict(obj.get("metadata") or {}))


# ---------------------------------------------------------------------------- merge rules

def recursive_merge(a: Any, b: Any) -> Any:
    """Merge b into a without mutating either: dicts merge key-wise (b wins on scalars),
    lists concatenate (a first), anything else is replaced by b."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = copy.deepcopy(a)
        for k, vb in b.items():
            out[k] = recursive_merge(out[k], vb) if k in out else copy.deepcopy(vb)
        return out
    if isinstance(a, list) and isinstance(b, list):
        return copy.deepcopy(a) + copy.deepcopy(b)
    return copy.deepcopy(b)


def merge_init(world_state: dict[str, Any], init: dict[str, Any] | None) -> dict[str, Any]:
    """Per server: a falsy scenario value is replaced by the test's; otherwise merged
    recursively; a server present only in `init` is added."""
    out = copy.deepcopy(world_state)
    for server, value in (init or {}).items():
        out[server] = recursive_merge(out[server], value) if out.get(server) else copy.deepcopy(value)
    return out


# ---------------------------------------------------------------------------- tasks

@dataclass
class Task:
    """One test joined to its scenario. The fields are the test keys of docs/tasks.md, "Rules implemented"."""

    uid: str  # "<file basename>:<test name>"
    name: str  # test function name (or YAML uid)
    file: Path
    lineno: int
    scenario: Scenario
    query: str
    user_context: str | None  # empty/None: no simulated user
    bot_instructions: str | None  # the test's own; see `system_messages` for the merge
    init: dict[str, Any]  # per-server test init, before merging with the scenario
    max_user_sim_turns: int
    max_agent_sim_turns: int | None  # None: unlimited
    format_query: bool
    history: Any
    tags: list[str]  # scenario tags + test tags
    config: dict[str, Any]  # the merged raw test config, as written
    metadata: dict[str, Any] = field(default_factory=dict)
    _compiled: CompiledFile | None = field(default=None, repr=False, compare=False)
    _test_code: str | None = field(default=None, repr=False, compare=False)
    _fn: Callable | None = field(default=None, repr=False, compare=False)

    # -- derived views
    @property
    def skip(self) -> bool:
        return any(t.lower() == "skip" for t in self.tags)

    def fingerprint(self) -> str:
        """SHA-256 of what the task asks (query, user context, test init) as canonical JSON: the
        same for a renamed copy of a task, different once its content changes."""
        body = json.dumps({"query": self.query, "user_context": self.user_context or "", "init": self.init},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def world_state(self) -> dict[str, Any]:
        """Per-server config passed to each server's `__reserved__init` (scenario ⊕ init)."""
        return merge_init(self.scenario.world_state, self.init)

    def golden_actions(self) -> list[tuple[str, str, dict[str, Any]]]:
        """`(server, tool, parameters)` from every server's `golden_test_case.tool_interactions`."""
        return self.golden_paths()[0]

    def golden_paths(self) -> list[list[tuple[str, str, dict[str, Any]]]]:
        """The golden actions, then each alternative path to the same required end state.

        An alternative is written (our extension; servers ignore it) as
        `golden_test_case.alternatives: [{tool_interactions: [...]}, ...]`. Path k takes each
        server's k-th alternative, or that server's main `tool_interactions` when it has fewer.
        """
        main: list[tuple[str, str, dict[str, Any]]] = []
        alts: dict[str, list[list[tuple[str, str, dict[str, Any]]]]] = {}
        per_server: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        for server, cfg in self.world_state().items():
            gtc = cfg.get("golden_test_case") if isinstance(cfg, dict) else None
            if gtc is None:
                continue
            key = f"init.{server}.golden_test_case"
            if not isinstance(gtc, dict):
                raise self._golden_error("golden_test_case must be {tool_interactions: [{tool, parameters}]}", key)
            per_server[server] = self._steps(server, gtc, key)
            main += per_server[server]
            extra = gtc.get("alternatives")
            if extra is None:
                continue
            if not isinstance(extra, list) or not all(isinstance(a, dict) for a in extra):
                raise self._golden_error("alternatives must be a list of {tool_interactions: [...]}",
                                         f"{key}.alternatives")
            alts[server] = [self._steps(server, a, f"{key}.alternatives[{j}]") for j, a in enumerate(extra)]
        n = max((len(a) for a in alts.values()), default=0)
        paths = [main]
        for k in range(n):
            paths.append([step for server, steps in per_server.items()
                          for step in (alts[server][k] if k < len(alts.get(server, ())) else steps)])
        return paths

    def _golden_error(self, message: str, key: str) -> TaskFormatError:
        return TaskFormatError(self.file, f"test {self.name!r}: {message}", line=self.lineno, key=key)

    def _steps(self, server: str, gtc: dict[str, Any], key: str) -> list[tuple[str, str, dict[str, Any]]]:
        steps = gtc.get("tool_interactions")
        if not isinstance(steps, (list, type(None))):
            raise self._golden_error("golden_test_case must be {tool_interactions: [{tool, parameters}]}", key)
        out = []
        for i, step in enumerate(steps or []):
            params = step.get("parameters") if isinstance(step, dict) else None
            if not (isinstance(step, dict) and isinstance(step.get("tool"), str)
                    and isinstance(params, (dict, type(None)))):
                raise self._golden_error("each golden step needs a string `tool` and a mapping `parameters`",
                                         f"{key}.tool_interactions[{i}]")
            out.append((server, step["tool"], dict(params or {})))
        return out

    def formatted(self, init_result: dict[str, Any] | None) -> tuple[str, str | None, str | None]:
        """`(query, user_context, bot_instructions)`, with `.format(init=...)` if `format_query`."""
        if not self.format_query:
            return self.query, self.user_context, self.bot_instructions

        def fmt(s: str | None) -> str | None:
            try:
                return s.format(init=init_result or {}) if s else s
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
                raise TaskFormatError(self.file, f"test {self.name!r}: cannot format {s!r} with the "
                                      f"init result: {type(e).__name__}: {e}", line=self.lineno,
                                      key="format_query") from None

        return fmt(self.query), fmt(self.user_context), fmt(self.bot_instructions)

    def system_messages(self, agent: Agent, init_result: dict[str, Any] | None = None) -> list[str]:
        """System message 1: the agent's instructions; 2: scenario + test bot instructions
        joined by a newline (omitted when both are empty)."""
        _, _, test_bi = self.formatted(init_result)
        parts = [s for s in (self.scenario.bot_instructions, test_bi) if s is not None]
        out = [agent.system_instructions]
        if parts and "\n".join(parts):
            out.append("\n".join(parts))
        return out

    def prompt(self, agent: Agent, init_result: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """The opening messages: the system messages, any history, then the query."""
        query, _, _ = self.formatted(init_result)
        msgs = [{"role": "system", "content": s} for s in self.system_messages(agent, init_result)]
        if isinstance(self.history, list):
            msgs += [m for m in self.history if isinstance(m, dict)]
        msgs.append({"role": "user", "content": query})
        return msgs

    # -- the test function
    def test_function(self) -> Callable:
        """The compiled test function (the file is executed once, then cached)."""
        if self._fn is None:
            if self._test_code is not None:
                install_thinkingbox_shim()
                ns = exec_source(self._test_code, self.file, f"tb_tests.{self.file.stem}.{self.name}")
                fn = resolve_test_code(ns, self.file, self.name, self.lineno)
            else:
                assert self._compiled is not None
                fn = self._compiled.namespace().get(self.name)
            self._fn = fn
        return self._fn


def tool_list(agent: Agent, scenario: Scenario, server_tools: dict[str, dict[str, Any]], *,
              order: str = "servers") -> list[dict]:
    """The agent's whole tool view: builtin tools first, then the scenario's MCP tools, with
    description overrides applied.

    `server_tools` maps tool name -> `{"description", "input_schema"}` as the servers offer
    them, in the servers' listing order (the task's servers in `world_state` order, each server's
    tools in the order its `list_tools` gives them). `order="servers"` (the ThinkingBox
    framework's) keeps that order, leaving out the tools the scenario does not list;
    `order="scenario"` follows the scenario's list. A listed tool that no server offers is a
    `TaskFormatError` (the reference fails session creation on it).
    """
    if order not in ("servers", "scenario"):
        raise ValueError(f"tool order {order!r}: expected 'servers' or 'scenario'")
    out = []
    for t in agent.builtin_tools:
        out.append({"name": t.name, "description": t.description or "",
                    "input_schema": copy.deepcopy(t.input_schema or {"type": "object", "properties": {}}),
                    "direct_response": t.direct_response, "is_end_turn": t.is_end_turn, "builtin": True})
    listed = {t.name: t for t in scenario.tools}
    for t in scenario.tools:
        if t.name not in server_tools:
            raise TaskFormatError(scenario.path, f"tool {t.name!r} is listed but no server offers it",
                                  key="tools")
    names = [n for n in server_tools if n in listed] if order == "servers" else list(listed)
    for name in names:
        t, offered = listed[name], server_tools[name]
        schema = copy.deepcopy(offered.get("input_schema") or {"type": "object", "properties": {}})
        for arg, desc in (t.override_arg_description or {}).items():
            if arg in schema.get("properties", {}):
                schema["properties"][arg]["description"] = desc
        out.append({"name": t.name,
                    "description": t.override_description if t.override_description is not None
                    else offered.get("description") or "",
                    "input_schema": schema, "direct_response": t.direct_response,
                    "is_end_turn": t.is_end_turn, "builtin": False})
    return out


# ---------------------------------------------------------------------------- validation of a test config

def _check_types(raw: RawTest, path: Path) -> list[TaskFormatError]:
    cfg, errs = raw.config, []

    def bad(key: str, msg: str) -> None:
        errs.append(TaskFormatError(path, msg, line=raw.key_lines.get(key, raw.lineno), key=key))

    if not isinstance(cfg.get("scenario"), str):
        bad("scenario", "required: the name of a scenario/<name>.yaml")
    if not isinstance(cfg.get("query"), str):
        bad("query", "required string (the first user message)")
    for key in ("user_context", "bot_instructions"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            bad(key, "must be a string")
    for key in ("max_user_sim_turns", "max_agent_sim_turns"):
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            bad(key, "must be a non-negative integer")
    if "format_query" in cfg and not isinstance(cfg["format_query"], bool):
        bad("format_query", "must be true or false")
    init = cfg.get("init")
    if init is not None and not (isinstance(init, dict) and all(isinstance(v, dict) for v in init.values())):
        bad("init", "must map server name -> mapping")
    tags = cfg.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        bad("tags", "must be a list of strings")
    return errs


# ---------------------------------------------------------------------------- the dataset

@dataclass
class Dataset:
    root: Path
    agents: dict[str, Agent]
    scenarios: dict[str, Scenario]
    tasks: dict[str, Task]  # uid -> Task, in load order
    errors: list[TaskFormatError]

    def agent(self, name: str | None = None) -> Agent:
        """The named agent; with no name, the only one (or `think` / `default` if several)."""
        if name is not None:
            if name not in self.agents:
                raise TaskFormatError(self.root / "agent", f"no agent {name!r} "
                                      f"(have: {', '.join(sorted(self.agents)) or 'none'})", key="agent")
            return self.agents[name]
        if len(self.agents) == 1:
            return next(iter(self.agents.values()))
        if not self.agents:
            raise TaskFormatError(self.root / "agent", "no agent (one YAML file per agent)", key="agent")
        for preferred in ("think", "default"):
            if preferred in self.agents:
                return self.agents[preferred]
        raise TaskFormatError(self.root / "agent", f"several agents ({', '.join(sorted(self.agents))}) "
                              "and none named think or default: pass --agent NAME", key="agent")

    def by_scenario(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in self.tasks.values():
            counts[t.scenario.name] = counts.get(t.scenario.name, 0) + 1
        return counts

    def compile_all(self) -> list[TaskFormatError]:
        """Execute every test file once and find every test function; return the errors."""
        errs: list[TaskFormatError] = []
        bad_files: set[Path] = set()
        for t in self.tasks.values():
            if t.file in bad_files:
                continue
            try:
                fn = t.test_function()
                if not callable(fn):
                    raise TaskFormatError(t.file, f"test {t.name!r} is not a function after executing "
                                          "the file", line=t.lineno)
            except TaskFormatError as e:
                errs.append(e)
                if t._test_code is None:
                    bad_files.add(t.file)
        return errs


def find_test_file(root: Path, filename: str) -> Path | None:
    """Name lookup of `a_b_c.py`: test_case/a_b_c.py, then test_case/a_b/a_b_c.py, then
    test_case/a/a_b_c.py (longest underscore prefix first, one directory level)."""
    tc = root / "test_case"
    if (tc / filename).is_file():
        return tc / filename
    stem_parts = Path(filename).stem.split("_")
    for k in range(len(stem_parts) - 1, 0, -1):
        p = tc / "_".join(stem_parts[:k]) / filename
        if p.is_file():
            return p
    return None


def read_test_list(path: Path) -> tuple[list[tuple[str, str, int]], list[TaskFormatError]]:
    """A test list: YAML list of "file.py:test_fn". Returns (file, test, line) entries + errors."""
    try:
        obj, lines = yamlio.load(path.read_text(encoding="utf-8"), _item_lines)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        return [], [TaskFormatError(path, f"invalid YAML: {getattr(e, 'problem', None) or e}",
                                    line=mark.line + 1 if mark else None)]
    if obj is None:
        return [], []
    if not isinstance(obj, list):
        return [], [TaskFormatError(path, "a test list must be a YAML list of 'file.py:test_name'", line=1)]
    entries, errors = [], []
    for item, line in zip(obj, lines):
        if not isinstance(item, str) or item.count(":") != 1 or not all(item.split(":")):
            errors.append(TaskFormatError(path, f"entry {item!r} must read 'file.py:test_name'", line=line))
            continue
        f, t = item.split(":")
        entries.append((f, t, line))
    return entries, errors


def _item_lines(node: yaml.Node | None) -> list[int]:
    return [n.start_mark.line + 1 for n in node.value] if isinstance(node, yaml.SequenceNode) else []


def _iter_test_files(root: Path) -> list[Path]:
    tc = root / "test_case"
    out = []
    for dirpath, dirnames, filenames in os.walk(tc):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        for f in sorted(filenames):
            if f.endswith(".py") or (f.endswith((".yaml", ".yml")) and not f.endswith((".meta.yaml", ".meta.yml"))
                                      and f not in ("conftest.yaml", "conftest.yml")):
                out.append(Path(dirpath) / f)
    return out


def load_dataset(root: str | Path, test_list: str | Path | None = None, strict: bool = False) -> Dataset:
    """Load a ThinkingBox dataset. Every error is collected in `Dataset.errors`
    (`strict=True` raises `DatasetError` with all of them instead).

    With `test_list`, only the listed tests are loaded, in list order; an entry that does not
    resolve is an error naming the list file and line.
    """
    root = Path(root)
    errors: list[TaskFormatError] = []
    if not (root / "test_case").is_dir() and not (root / "scenario").is_dir():
        raise DatasetError([TaskFormatError(root, "not a ThinkingBox dataset (no test_case/ or scenario/)")])

    agents: dict[str, Agent] = {}
    for p in sorted((root / "agent").glob("*.yaml")) if (root / "agent").is_dir() else []:
        try:
            agents[p.stem] = load_agent(p)
        except TaskFormatError as e:
            errors.append(e)
    scenarios: dict[str, Scenario] = {}
    scenario_errors: dict[str, TaskFormatError] = {}
    for p in sorted((root / "scenario").glob("*.yaml")) if (root / "scenario").is_dir() else []:
        try:
            scenarios[p.stem] = load_scenario(p)
        except TaskFormatError as e:
            errors.append(e)
            scenario_errors[p.stem] = e

    # which files, and which tests in them
    wanted: dict[Path, list[tuple[str, int]]] | None = None
    list_order: list[tuple[Path, str]] = []
    if test_list is not None:
        test_list = Path(test_list)
        entries, list_errors = read_test_list(test_list)
        errors += list_errors
        wanted = {}
        for fname, tname, line in entries:
            path = find_test_file(root, fname)
            if path is None:
                errors.append(TaskFormatError(test_list, f"test file {fname!r} not found under "
                                              f"{root / 'test_case'}", line=line))
                continue
            wanted.setdefault(path, []).append((tname, line))
            list_order.append((path, tname))
        files = list(wanted)
    else:
        files = _iter_test_files(root)

    tasks: dict[str, Task] = {}
    basenames: dict[str, Path] = {}
    for path in files:
        if path.name in basenames and basenames[path.name] != path:
            errors.append(TaskFormatError(path, f"duplicate test file basename (also {basenames[path.name]}); "
                                          "uids would collide"))
            continue
        basenames[path.name] = path
        parsed = parse_test_file(path)
        errors += parsed.errors
        by_name = {r.name: r for r in parsed.tests}
        if wanted is not None:
            for tname, line in wanted[path]:
                if tname not in by_name:
                    errors.append(TaskFormatError(test_list, f"test {path.name}:{tname} not found in {path}",
                                                  line=line))
        compiled = CompiledFile(path) if path.suffix == ".py" else None
        for raw in parsed.tests:
            if wanted is not None and raw.name not in {n for n, _ in wanted[path]}:
                continue
            bad = _check_types(raw, path)
            if bad:
                errors += bad
                continue
            sname = raw.config["scenario"]
            scenario = scenarios.get(sname)
            if scenario is None:
                why = "is malformed" if sname in scenario_errors else "does not exist"
                errors.append(TaskFormatError(path, f"test {raw.name!r}: scenario {sname!r} {why} "
                                              f"(looked for {root / 'scenario' / (sname + '.yaml')})",
                                              line=raw.key_lines.get("scenario", raw.lineno), key="scenario"))
                continue
            cfg = raw.config
            uid = f"{path.name}:{raw.name}"
            tasks[uid] = Task(
                uid=uid, name=raw.name, file=path, lineno=raw.lineno, scenario=scenario,
                query=cfg["query"], user_context=cfg.get("user_context"),
                bot_instructions=cfg.get("bot_instructions"), init=dict(cfg.get("init") or {}),
                max_user_sim_turns=cfg.get("max_user_sim_turns") if cfg.get("max_user_sim_turns") is not None
                else DEFAULT_MAX_USER_SIM_TURNS,
                max_agent_sim_turns=cfg.get("max_agent_sim_turns"),
                format_query=bool(cfg.get("format_query", False)), history=cfg.get("history"),
                tags=list(dict.fromkeys([*scenario.tags, *(cfg.get("tags") or [])])), config=cfg,  # each tag once
                metadata={"scenario": sname, **raw.metadata},
                _compiled=compiled, _test_code=raw.test_code,
            )
    if wanted is not None:  # list order, not file order
        tasks = {f"{p.name}:{n}": tasks[f"{p.name}:{n}"] for p, n in list_order if f"{p.name}:{n}" in tasks}
    ds = Dataset(root, agents, scenarios, tasks, errors)
    if strict and errors:
        raise DatasetError(errors)
    return ds


__all__ = [
    "Agent", "Dataset", "Scenario", "Task", "ToolSpec", "failure_line", "find_test_file", "load_dataset",
    "merge_init", "read_test_list", "recursive_merge", "resolve_test_code", "tool_list",
]
