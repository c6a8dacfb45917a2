"""Reading one ThinkingBox test file (docs/tasks.md, "Rules implemented") into raw test definitions.

Python files: every top-level string expression starting with `!` is YAML (strip the `!`,
dedent); they apply in file order with `dict.update`, and a test sees only those above it. A
function is a test only if the first statement of its body is such a string. A test's config is
the module config shallow-updated by the function's, with `tags` lists concatenated.

YAML files: `{test_cases: [{uid, scenario, query, test_code, ...}]}`; `test_code` is Python that
defines the test function (bound to `__tb_test_fn`, as the reference writes it, or a single
function).

Every problem becomes a `TaskFormatError` naming the file, the line and the key; one bad test
does not hide the others in the same file.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainer.env.taskformat import yamlio
from trainer.env.errors import TaskFormatError
from trainer.env.grading.testcode import TEST_FN_NAME  # noqa: F401  (re-exported)

# The closed set of keys a test may set (docs/tasks.md, "Rules implemented": allowed keys).
TEST_KEYS = frozenset(
    {
        "scenario",
        "query",
        "user_context",
        "bot_instructions",
        "init",
        "max_user_sim_turns",
        "max_agent_sim_turns",
        "format_query",
        "history",
        "tags",
    }
)
# YAML test files carry these besides the test keys.
YAML_TEST_EXTRA_KEYS = frozenset({"uid", "test_code", "metadata"})


@dataclass
class RawTest:
    """One test as written: its merged config and where it lives."""

    name: str
    lineno: int
    config: dict[str, Any]
    key_lines: dict[str, int] = field(default_factory=dict)  # config key -> line it was set on
    test_code: str | None = None  # YAML test files only: the Python source of the test
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedFile:
    path: Path
    tests: list[RawTest]
    errors: list[TaskFormatError]


def _yaml_with_lines(text: str, path: Path, first_line: int) -> tuple[Any, dict[str, int]]:
    """Load YAML; return the object and, for a top-level mapping, each key's line in the file."""
    try:
        return yamlio.load(text, lambda node: yamlio.key_lines(node, first_line))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(e, "problem", None) or str(e)
        raise TaskFormatError(path, f"invalid YAML: {problem}", line=line) from None


def _bang_yaml(
    node: ast.stmt, path: Path, where: str
) -> tuple[dict[str, Any], dict[str, int]] | None:
    """The YAML of a `!`-string statement, or None if the statement is not one."""
    if not (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.startswith("!")
    ):
        return None
    text = textwrap.dedent(node.value.value[1:])
    obj, lines = _yaml_with_lines(text, path, node.lineno)
    if obj is None:
        return {}, {}
    if not isinstance(obj, dict):
        raise TaskFormatError(
            path, f"{where} YAML must be a mapping, got {type(obj).__name__}", line=node.lineno
        )
    return obj, lines


def _check_keys(cfg: dict, lines: dict[str, int], path: Path, default_line: int,
                allowed: frozenset[str]) -> list[TaskFormatError]:
    return [
        TaskFormatError(path, f"unknown test key (allowed: {', '.join(sorted(allowed))})",
                        line=lines.get(str(k), default_line), key=str(k))
        for k in cfg
        if k not in allowed
    ]


def merge_test_config(module_cfg: dict, fn_cfg: dict) -> dict:
    """Shallow update of the module config by the function's; `tags` lists concatenate."""
    merged = {**module_cfg, **fn_cfg}
    if isinstance(module_cfg.get("tags"), list) and isinstance(fn_cfg.get("tags"), list):
        merged["tags"] = module_cfg["tags"] + fn_cfg["tags"]
    return merged


def parse_python_test_file(path: Path, source: str | None = None) -> ParsedFile:
    source = path.read_text(encoding="utf-8") if source is None else source
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        return ParsedFile(path, [], [TaskFormatError(path, f"Python syntax error: {e.msg}", line=e.lineno)])
    module_cfg: dict[str, Any] = {}
    module_lines: dict[str, int] = {}
    tests: list[RawTest] = []
    errors: list[TaskFormatError] = []
    seen: dict[str, int] = {}
    for node in tree.body:
        try:
            bang = _bang_yaml(node, path, "module-level")
        except TaskFormatError as e:
            errors.append(e)
            continue
        if bang is not None:
            cfg, lines = bang
            errors += _check_keys(cfg, lines, path, node.lineno, TEST_KEYS)
            module_cfg.update({k: v for k, v in cfg.items() if k in TEST_KEYS})
            module_lines.update(lines)
            continue
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        try:
            bang = _bang_yaml(node.body[0], path, f"test {node.name!r}")
        except TaskFormatError as e:
            errors.append(e)
            continue
        if bang is None:
            continue  # a helper, not a test
        if isinstance(node, ast.AsyncFunctionDef):
            errors.append(TaskFormatError(path, f"test {node.name!r} must be a plain def, not async def",
                                          line=node.lineno))
            continue
        fn_cfg, fn_lines = bang
        bad = _check_keys(fn_cfg, fn_lines, path, node.lineno, TEST_KEYS)
        if bad:
            errors += bad
            continue
        if node.name in seen:
            errors.append(TaskFormatError(
                path, f"test {node.name!r} defined twice (first at line {seen[node.name]})",
                line=node.lineno))
            continue
        seen[node.name] = node.lineno
        tests.append(RawTest(
            name=node.name,
            lineno=node.lineno,
            config=merge_test_config(module_cfg, fn_cfg),
            key_lines={**module_lines, **fn_lines},
        ))
    return ParsedFile(path, tests, errors)


def parse_yaml_test_file(path: Path) -> ParsedFile:
    try:
        obj, items = yamlio.load(path.read_text(encoding="utf-8"), _case_lines)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        return ParsedFile(path, [], [TaskFormatError(
            path, f"invalid YAML: {getattr(e, 'problem', None) or e}",
            line=mark.line + 1 if mark else None)])
    if not isinstance(obj, dict) or not isinstance(obj.get("test_cases"), list):
        return ParsedFile(path, [], [TaskFormatError(
            path, "a YAML test file must be a mapping with a `test_cases` list", line=1, key="test_cases")])
    tests, errors, seen = [], [], {}
    allowed = TEST_KEYS | YAML_TEST_EXTRA_KEYS
    for i, case in enumerate(obj["test_cases"]):
        line, key_lines = items[i] if i < len(items) else (None, {})
        if not isinstance(case, dict):
            errors.append(TaskFormatError(path, "each test case must be a mapping", line=line))
            continue
        bad = _check_keys(case, key_lines, path, line or 1, allowed)
        uid = case.get("uid")
        if not isinstance(uid, str) or not uid:
            bad.append(TaskFormatError(path, "missing or non-string `uid`", line=line, key="uid"))
        if not isinstance(case.get("test_code"), str):
            bad.append(TaskFormatError(path, "missing `test_code` (Python source of the test)",
                                       line=key_lines.get("test_code", line), key="test_code"))
        if bad:
            errors += bad
            continue
        if uid in seen:
            errors.append(TaskFormatError(path, f"duplicate uid {uid!r} (first at line {seen[uid]})",
                                          line=line, key="uid"))
            continue
        seen[uid] = line
        tests.append(RawTest(
            name=uid,
            lineno=line or 1,
            config={k: v for k, v in case.items() if k in TEST_KEYS},
            key_lines=key_lines,
            test_code=case["test_code"],
            metadata=dict(case.get("metadata") or {}),
        ))
    return ParsedFile(path, tests, errors)


def _case_lines(node: yaml.Node | None) -> list[tuple[int, dict[str, int]]]:
    """The line of each `test_cases` item and of each key within it (the last `test_cases` wins,
    as in the value)."""
    items: list[yaml.Node] = []
    for k, v in node.value if isinstance(node, yaml.MappingNode) else ():
        if k.value == "test_cases" and isinstance(v, yaml.SequenceNode):
            items = v.value
    return [(n.start_mark.line + 1, yamlio.key_lines(n)) for n in items]


def parse_test_file(path: Path) -> ParsedFile:
    if path.suffix == ".py":
        return parse_python_test_file(path)
    return parse_yaml_test_file(path)
