"""Property-based: mutated test files, scenarios and test lists never crash the loader — every
problem surfaces as a `TaskFormatError` naming a file."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from trainer.env.errors import TaskFormatError
from trainer.env.taskformat.tasks import load_dataset

BASIC = Path(__file__).parent / "fixtures" / "datasets" / "basic"
SOURCE = (BASIC / "test_case" / "notes_basic.py").read_text()
SCENARIO = (BASIC / "scenario" / "notes.yaml").read_text()
NOISE = st.sampled_from(list('"\'!:[]{}\n -#\t\\') + ["\"\"\"", "\"\"\"!", "    ", "- ", ": ", "&a", "*a", "!!python/object"])
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "truncate", "dup_line"]))
        if op == "insert":
            text = text[:i] + draw(NOISE) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 20)):]
        elif op == "truncate":
            text = text[:i]
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                j = draw(st.integers(0, len(lines) - 1))
                lines.insert(j, lines[j])
                text = "".join(lines)
    return text


def load_all(files: dict[str, str], test_list: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for rel, text in {"agent/think.yaml": "system_instructions: x\n", **files}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        lst = None
        if test_list is not None:
            lst = root / "list.yaml"
            lst.write_text(test_list)
        ds = load_dataset(root, test_list=lst)
        errors = ds.errors + ds.compile_all()
        for e in errors:
            assert isinstance(e, TaskFormatError) and str(e.file)
        for t in ds.tasks.values():  # whatever loaded is usable, or says why not
            t.world_state()
            try:
                t.golden_actions()
                t.prompt(ds.agent())
            except TaskFormatError as e:
                assert str(e.file)


@SETTINGS
@given(mutated(SOURCE))
def test_mutated_python_test_file(text):
    load_all({"scenario/notes.yaml": SCENARIO, "test_case/notes_basic.py": text})


@SETTINGS
@given(mutated(SCENARIO))
def test_mutated_scenario(text):
    load_all({"scenario/notes.yaml": text, "test_case/notes_basic.py": SOURCE})


YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["scenario", "query", "init", "tags", "user_context", "format_query",
                         "max_user_sim_turns", "history", "notes", "data_patch", "x"]), inner, max_size=4),
    max_leaves=12,
)


@SETTINGS
@given(YAML_VALUES, YAML_VALUES)
def test_arbitrary_yaml_values_as_configs(module_cfg, fn_cfg):
    def bang(obj) -> str:
        return '"""!\n' + yaml.safe_dump(obj).replace('"""', "'''").replace("\\", "") + '"""'

    src = f"{bang(module_cfg)}\n\ndef test_x(x, judge):\n{textwrap.indent(bang(fn_cfg), '    ')}\n"
    load_all({"scenario/notes.yaml": SCENARIO, "test_case/t.py": src})


@SETTINGS
@given(YAML_VALUES)
def test_arbitrary_yaml_values_as_scenario_and_list(obj):
    dumped = yaml.safe_dump(obj)
    load_all({"scenario/notes.yaml": dumped, "test_case/notes_basic.py": SOURCE}, test_list=dumped)


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_everywhere(text):
    load_all({"scenario/notes.yaml": text, "test_case/t.py": text, "test_case/u.yaml": text},
             test_list=text)
