"""`trainer.env.taskformat.yamlio` against PyYAML's pure-Python SafeLoader: the same values, line marks and
errors on every YAML text of the sample data and the fixtures, on edge cases and on fuzzed text;
and whole datasets load identically with libyaml, with the pure-Python loader, and the old way
(two pure-Python parses per block)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from trainer.env.taskformat import yamlio
from trainer.env.taskformat.tasks import load_dataset, read_test_list
from trainer.env.taskformat.testfile import parse_test_file

REPO = Path(__file__).resolve().parents[1]
DATASETS = [REPO / "data" / "samples", *sorted((REPO / "tests" / "fixtures" / "datasets").iterdir())]
_spec = importlib.util.spec_from_file_location("bench_load", REPO / "bench" / "load.py")
bench_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_load)
needs_libyaml = pytest.mark.skipif(yamlio.LOADER is yaml.SafeLoader, reason="PyYAML built without libyaml")


def yaml_texts() -> list[tuple[str, str]]:
    """(where, text) for each YAML file and each `!` string of each Python file of the datasets."""
    out = []
    for root in DATASETS:
        for p in sorted(root.rglob("*")):
            where = p.relative_to(REPO).as_posix()
            if p.suffix in (".yaml", ".yml"):
                out.append((where, p.read_text(encoding="utf-8")))
            elif p.suffix == ".py":
                try:
                    tree = ast.parse(p.read_text(encoding="utf-8"))
                except SyntaxError:
                    continue
                out += [(f"{where}:{n.lineno}", textwrap.dedent(n.value[1:])) for n in ast.walk(tree)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("!")]
    return out


TEXTS = yaml_texts()


def node_lines(node: yaml.Node | None) -> list[tuple[str, int]]:
    """The line of every mapping key and sequence item, at any depth, in document order: the marks
    the loader reads. (A mapping value's own mark is not read, and the loaders may place an
    empty one differently: `? a` at the end of the text.)"""
    out, stack, seen = [], [node] if node is not None else [], set()
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.ScalarNode) or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            out += [("key", k.start_mark.line) for k, _ in n.value]
            stack += reversed([c for pair in n.value for c in pair])
        else:
            out += [("item", c.start_mark.line) for c in n.value]
            stack += reversed(n.value)
    return out


def reference(text: str) -> tuple:
    """What the pure-Python loader makes of `text`: the value (typed, via repr) and node lines, or
    the error."""
    try:
        return "ok", repr(yaml.safe_load(text)), node_lines(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        return "YAMLError", str(e)
    except (ValueError, OverflowError) as e:  # e.g. 2025-02-30: ours names the line instead (below)
        return "bad scalar", str(e)
    except Exception as e:
        return type(e).__name__, str(e)


def ours(text: str, load=yamlio.load) -> tuple:
    try:
        value, lines = load(text, node_lines)
        return "ok", repr(value), lines
    except yaml.YAMLError as e:
        if isinstance(e.__cause__, (ValueError, OverflowError)):  # the line-naming form of a bare ValueError
            return "bad scalar", str(e.__cause__)
        return "YAMLError", str(e)
    except Exception as e:
        return type(e).__name__, str(e)


# ------------------------------------------------------------------ every text of the sample data

@pytest.mark.parametrize("where,text", TEXTS, ids=[w for w, _ in TEXTS])
def test_sample_text_reads_as_safe_load(where, text):
    assert ours(text) == reference(text)


@needs_libyaml
def test_sample_texts_take_the_libyaml_path():
    valid = [t for _, t in TEXTS if reference(t)[0] == "ok"]
    direct = [t for t in valid if not yamlio._scanners_may_differ(t)]
    assert len(direct) >= 0.9 * len(valid)  # the pure-Python re-parse stays the exception
    for t in direct:  # libyaml's own tree gives the reference value and lines
        assert ours(t, lambda t, m: yamlio.load_with(yamlio.LOADER, t, m)) == reference(t)


# ------------------------------------------------------------------ whole datasets, three ways

def snapshot(root: Path) -> dict:
    """Everything the loader makes of a dataset: agents, scenarios, tasks (config, init, lines),
    raw tests with their key lines, test lists, and every error with its file, line and key."""
    ds = load_dataset(root)
    errors = ds.errors + ds.compile_all()
    raw = {str(p): repr(parse_test_file(p)) for p in sorted((root / "test_case").rglob("*"))
           if p.suffix in (".py", ".yaml", ".yml")}
    lists = {str(p): repr(read_test_list(p)) for p in sorted(root.glob("lists/*.yaml"))}
    return {
        "agents": repr(ds.agents), "scenarios": repr(ds.scenarios),
        "tasks": {uid: repr((t.lineno, t.config, t.world_state(), t.tags, t.metadata)) for uid, t in ds.tasks.items()},
        "raw": raw, "lists": lists, "errors": [repr(e.to_dict()) for e in errors],
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A small dataset from bench/load.py (rows lists, dates, timestamps, `<<` merges, helpers)."""
    root = tmp_path_factory.mktemp("bench")
    bench_load.generate(root, n_tasks=8)
    assert "<<: *" in "".join(p.read_text() for p in root.rglob("*.py"))
    return root


@pytest.mark.parametrize("root", DATASETS + ["generated"], ids=lambda r: getattr(r, "name", r))
def test_dataset_loads_identically_with_both_loaders_and_the_old_way(root, request, monkeypatch):
    generated = root == "generated"
    root = request.getfixturevalue("generated") if generated else root
    ours_ = snapshot(root)
    assert ours_["tasks"] and not (generated and ours_["errors"])
    monkeypatch.setattr(yamlio, "LOADER", yaml.SafeLoader)
    assert snapshot(root) == ours_
    monkeypatch.setattr(yamlio, "load", bench_load._old_load)
    assert snapshot(root) == ours_


# ------------------------------------------------------------------ edge cases

EDGE = [
    # values: dates, timestamps, booleans, numbers, nulls
    "d: 2025-06-01\nt: 2025-06-01 09:30:00\nz: 2001-12-14t21:59:43.10-05:00\nq: '2025-06-01'\n",
    "a: [yes, no, on, off, true, False, y, n, Y, NO, ~, null, Null, '', 0o17, 017, 0x1F, 1_000, 1:20, +1]\n",
    "f: [1e3, 1.5e3, .inf, -.Inf, .nan, 1.0, -0.0, 3.]\n",
    # merges and duplicates
    "base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n",
    "a: &a {x: 1}\nb: &b {x: 2, z: 2}\nc:\n  <<: [*a, *b]\n  w: 0\n",
    "- &r {id: 1, tier: gold}\n- <<: *r\n  id: 2\n",
    "k: 1\nj: 2\nk: 3\n",
    "<<: {a: 1}\na: 2\n",
    "a: {x: 1, x: 2}\n",
    # tags, anchors, odd keys
    "a: !!str 12\nb: !!int '7'\nc: !!binary aGVsbG8=\nd: !!set {x, y}\ne: !!omap [a: 1, b: 2]\nf: !!float 1\n",
    "a: &x [1, 2]\nb: *x\n",
    "&a [*a]\n", "&m {self: *m}\n",
    "=: v\n", "a: =\n", "? [a, b]\n: c\n", "? {a: 1}\n: c\n", "1: a\n2.5: b\ntrue: c\n~: d\n2025-01-01: e\n",
    # documents
    "", "# only a comment\n", "---\na: 1\n...\n", "--- 1\n--- 2\n", "a: 1\n---\nb: 2\n", "%YAML 1.1\n---\na: 1\n",
    "%YAML 2.0\n---\na: 1\n", "%TAG !e! tag:example.com,2000:\n---\na: !e!foo 1\n",
    # where the scanners part ways
    "a: 1\t\n", "a:\t1\n", "- \tx\n", "s: \"a\tb\"\n", "a: |\n  x\ty\n", "\ufeffa: 1\n", "a: 1\n\ufeff\n",
    "a: b\r\nc: d\r\n", "a: b\x85c: d\n", "a: b\u2028c\n", "a: \x07\n", "a: \x00\n",
    "u: {url: http://a.b/c?d=1}\n", "u: [a?]\n", "u: [a, b?c]\n", "u: {a?: 1}\n", "u: {a: \"b?\"}\n",
    "a: &x foo?\nb: [*x]\n", "q: Can you fix it?\n", "u: {c:}\n", "u: {a:1}\n", "u: [a:1]\n", "u: {a: [b]:c}\n",
    "- !\n- x\n", "a: !\n", "a: ! 12\n", "a: [!, b]\n", "a: >#\n", "a: |-#\n", "a: |\n  #x\n", "a: !x\n",
    # plain errors: the message and line are the pure-Python loader's
    "query: [unclosed\n", "a: b: c\n", "a:\n- b\n c\n", "a: 'unterminated\n", "a: *nope\n", "- a\nb: c\n",
]


@pytest.mark.parametrize("text", EDGE)
def test_edge_case_reads_as_safe_load(text):
    assert ours(text) == reference(text)


def test_aliases_share_one_object_as_in_safe_load():
    value, _ = yamlio.load("a: &x [1, {b: 2}]\nc: *x\nd: [*x]\n")
    assert value["a"] is value["c"] is value["d"][0]
    loop, _ = yamlio.load("&a [1, *a]\n")
    assert loop[1] is loop


def test_marks_come_before_construction_flattens_merges():
    # the `<<` key keeps its line; the merged keys are not the mapping's own
    _, lines = yamlio.load("a: &a {x: 1}\nb:\n  <<: *a\n  y: 2\n", lambda n: yamlio.key_lines(n.value[1][1], 1))
    assert lines == {"<<": 3, "y": 4}


# ------------------------------------------------------------------ fuzzed text

TOKENS = list("\"'!:[]{}\n -#\\,?|>&*%@`=<~.0123abxyz\t") + [
    "- ", ": ", "&a ", "*a", "<<: *a", "<<", "!!str ", "! ", "!x ", "!!int ", "? ", "---", "...", "\n  ", "\n    ",
    "0o17", "1:20", "2025-01-01", "yes", "~", "a?b", ", ", "|\n  x\n", ">-\n  y\n", "'q'", '"d"', '"\\u0041"',
    "#c\n", " #", "&b ", "*b", ".inf", "1e3", "null", "on", "\ufeff", "\r\n", "%YAML 1.1\n", "http://a.b/c?d=1"]
FUZZ = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=25).map("".join))
def test_token_soup_reads_as_safe_load(text):
    assert ours(text) == reference(text)


@settings(FUZZ, max_examples=200)
@given(st.sampled_from([t for _, t in TEXTS]), st.lists(st.tuples(st.floats(0, 1), st.sampled_from(TOKENS + [""])),
                                                       min_size=1, max_size=4))
def test_mutated_sample_text_reads_as_safe_load(text, edits):
    for where, token in edits:  # insert a token, or (empty token) cut a few characters
        i = int(where * len(text))
        text = text[:i] + token + text[i + (0 if token else 7):]
    assert ours(text) == reference(text)


# ------------------------------------------------------------------ the benchmark runs

def test_bench_load_runs_small():
    r = subprocess.run([sys.executable, str(REPO / "bench" / "load.py"), "--json", "--tasks", "10", "--repeat", "1"],
                       capture_output=True, text=True, check=True, cwd=REPO)
    res = json.loads(r.stdout)
    assert res["tasks"] == 10 and res["load_validate_s"] > 0 and res["ratio_baseline_vs_ours"] > 0


@pytest.mark.parametrize("text,line", [("a: 1\ndue: 2025-02-30\n", 2), ("x:\n  - {d: 2024-13-01}\n", 2)])
def test_a_scalar_safe_load_cannot_build_is_a_yaml_error_naming_its_line(text, line):
    with pytest.raises(ValueError):  # what PyYAML itself raises: no line
        yaml.safe_load(text)
    with pytest.raises(yaml.YAMLError, match="is not a valid timestamp") as e:
        yamlio.load(text)
    assert e.value.problem_mark.line + 1 == line


def test_an_invalid_date_in_a_test_file_is_a_load_error_not_a_traceback(tmp_path):
    src = Path(__file__).parent / "fixtures" / "datasets" / "basic"
    import shutil
    shutil.copytree(src, tmp_path / "ds")
    f = tmp_path / "ds" / "test_case" / "notes_basic.py"
    f.write_text(f.read_text() + '\n\ndef test_bad_date(x, judge):\n    """!\n    query: q\n    history:\n      - due: 2025-02-30\n    """\n')
    ds = load_dataset(tmp_path / "ds")
    errs = [e for e in ds.errors + ds.compile_all() if "2025-02-30" in str(e)]
    assert errs and errs[0].line == len(f.read_text().splitlines()) - 1
