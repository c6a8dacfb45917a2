"""Layers point one way: core <- env <- formats <- (domains, rollout) <- (data, verl, eval, serve) <- cli.

Every `trainer.*` import in every module of trainer/ is read from its syntax tree (module level and
inside functions alike) and must go to a lower layer or stay inside its own package; the four
packages of the upper middle layer do not import each other. Inside `trainer/env/` the concerns
point one way too: errors <- (db, grading) <- taskformat <- sandbox <- golden. And no module
imports another module's private (`_`-prefixed) names. And no import cycle among trainer/'s
modules, typing-only imports included (`test_no_import_cycle`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "trainer"
LAYER = {"core": 0, "env": 1, "formats": 2, "domains": 3, "rollout": 3, "data": 4, "verl": 4, "eval": 4, "serve": 4}
CLI = 5  # trainer/cli.py and trainer/*_cli.py


def unit(first: str) -> tuple[str, int]:
    """(package or CLI module, layer) of what `trainer.<first>` names."""
    name = first.removesuffix(".py")
    if name in LAYER:
        return name, LAYER[name]
    assert name == "cli" or name.endswith("_cli"), f"trainer/{first}: a top-level module that is not a CLI module"
    return name, CLI


def import_statements(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every `trainer.*` import in `path`, at module level, inside
    functions and under `if TYPE_CHECKING:` alike: `from trainer.x import a, b` is
    (line, "trainer.x", ("a", "b")), `import trainer.x.y` is (line, "trainer.x.y", ())."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("trainer."):
            out.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names if a.name.startswith("trainer.")]
    return out


def imports(path: Path) -> list[tuple[int, str]]:
    return [(line, module) for line, module, _ in import_statements(path)]


def module_name(path: Path) -> str:
    """`trainer.a.b` for trainer/a/b.py, `trainer.a` for trainer/a/__init__.py (a package's
    `__init__` is a module of its own)."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


ALL_MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every module of trainer/ that `path` imports (`import_statements`):
    `from trainer.x import y` imports the module `trainer.x.y` where y is a submodule, else
    `trainer.x` (a package being its `__init__`)."""
    out = []
    for line, module, names in import_statements(path):
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in ALL_MODULES]
        out += [(line, m) for m in subs] + ([(line, module)] if len(subs) < len(names) or not names else [])
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One cycle ("a -> b -> a") for every edge that closes one in a depth-first walk of `graph`:
    none when the graph has no cycle."""
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    return cycles


ENV_LAYER = {"errors": 0, "db": 1, "grading": 1, "taskformat": 2, "sandbox": 3, "golden": 4}


MODULES = sorted(p for p in ROOT.rglob("*.py") if p.name != "__init__.py" or p.parent != ROOT)


def test_every_package_has_a_layer():
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(LAYER), "a new package under trainer/: give it a layer here (and in README.md's Layers section)"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path):
    src, level = unit(path.relative_to(ROOT).parts[0])
    wrong = []
    for line, mod in imports(path):
        dst, dst_level = unit(mod.split(".")[1])
        if dst == src:
            continue
        if dst_level > level or (dst_level == level and level != CLI):
            wrong.append(f"{path.relative_to(ROOT.parent)}:{line}: {src} (layer {level}) imports {mod} (layer {dst_level})")
    assert not wrong, "\n".join(wrong)


ENV = ROOT / "env"
ENV_MODULES = sorted(p for p in ENV.rglob("*.py") if p.parent != ENV or p.name != "__init__.py")


def test_every_env_concern_has_a_layer():
    found = {p.stem if p.is_file() else p.name for p in ENV.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}
    assert found == set(ENV_LAYER), "a new concern under trainer/env/: give it a layer in ENV_LAYER"


@pytest.mark.parametrize("path", ENV_MODULES, ids=lambda p: str(p.relative_to(ENV)))
def test_env_concerns_point_down(path):
    src = path.relative_to(ENV).parts[0].removesuffix(".py")
    wrong = []
    for line, mod in imports(path):
        parts = mod.split(".")
        if parts[1] != "env" or len(parts) < 3:
            continue
        dst = parts[2]
        if dst != src and ENV_LAYER[dst] >= ENV_LAYER[src]:
            wrong.append(f"{path.relative_to(ROOT.parent)}:{line}: env/{src} (layer {ENV_LAYER[src]}) imports {mod} "
                         f"(layer {ENV_LAYER[dst]})")
    assert not wrong, "\n".join(wrong)


SOURCES = sorted(p for d in ("trainer", "tests", "bench", "scripts", "data")
                 for p in (ROOT.parent / d).rglob("*.py") if "fixtures" not in p.parts)


def test_no_private_imports():
    """`from trainer.x import _name` reaches into another module's insides: make the name public
    (or test through the public one)."""
    wrong = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainer"):
                wrong += [f"{path.relative_to(ROOT.parent)}:{node.lineno}: from {node.module} import {a.name}"
                          for a in node.names if a.name.startswith("_")]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    """No module of trainer/ imports itself back, however far round: every import counts, inside a
    function or under `if TYPE_CHECKING:` too (a lazy or typing-only import still ties the two
    modules together; a cycle is fixed by moving what both need into a module both import). An
    import of `trainer.a.b` is an edge to `trainer.a.b` alone, not to the package `trainer.a`
    whose `__init__` Python runs first: a package's `__init__` may import its submodules, which
    then must not import from the package itself."""
    graph: dict[str, set[str]] = {}
    for name, path in ALL_MODULES.items():
        graph[name] = set()
        for line, mod in imported_modules(path):
            assert mod in ALL_MODULES, f"{path.relative_to(ROOT.parent)}:{line}: imports {mod}, not a module of trainer/"
            graph[name].add(mod)
    cycles = find_cycles(graph)
    assert not cycles, "import cycle(s) among trainer/'s modules:\n" + "\n".join(cycles)


def test_the_cycle_finder_names_each_cycle_and_resolves_submodules(tmp_path):
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}) == ["a -> b -> c -> a", "d -> d"]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nfrom trainer.domains import telecom, DOMAINS\n"
                   "if TYPE_CHECKING:\n    from trainer.verl.preflight import Entry\n"
                   "def f():\n    import trainer.core.redact\n", encoding="utf-8")
    assert sorted(imported_modules(src)) == [(2, "trainer.domains"), (2, "trainer.domains.telecom"),
                                             (4, "trainer.verl.preflight"), (6, "trainer.core.redact")]
