"""Layers point one way: core <- env <- (domains, rollout) <- (data, verl, eval, serve) <- cli.

Every `trainer.*` import in every module of trainer/ is read from its syntax tree (module level and
inside functions alike) and must go to a lower layer or stay inside its own package; the four
packages of the upper middle layer do not import each other. Inside `trainer/env/` the concerns
point one way too: errors <- (db, grading) <- taskformat <- sandbox <- golden. And no module
imports another module's private (`_`-prefixed) names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "trainer"
LAYER = {"core": 0, "env": 1, "domains": 2, "rollout": 2, "data": 3, "verl": 3, "eval": 3, "serve": 3}
CLI = 4  # trainer/cli.py and trainer/*_cli.py


def unit(first: str) -> tuple[str, int]:
    """(package or CLI module, layer) of what `trainer.<first>` names."""
    name = first.removesuffix(".py")
    if name in LAYER:
        return name, LAYER[name]
    assert name == "cli" or name.endswith("_cli"), f"trainer/{first}: a top-level module that is not a CLI module"
    return name, CLI


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("trainer."):
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("trainer.")]
    return out


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
