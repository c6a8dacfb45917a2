"""The `thinkingbox.*` shim (trainer/env/grading/tb_shim.py) and the chat types it serves, on a real
fixture dataset (tests/fixtures/datasets/tbcommon) whose test files import the framework's
`thinkingbox.common.chat_types`: it loads, grades in-process and isolated, replays its golden
actions, and a planted missing name is reported with file and line."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.env.grading import chat_types, tb_shim
from trainer.env.grading.chat_types import ParallelToolCall, Text, ToolCall, ToolCallResponse, ToolResponse
from trainer.env.grading.context import Judge, TestContext
from trainer.env.grading.tb_shim import install_thinkingbox_shim
from trainer.env.grading.grader import context_from_json, context_to_json, grade
from trainer.env.taskformat.tasks import load_dataset

REPO = Path(__file__).parents[1]
FIX = Path(__file__).parent / "fixtures" / "datasets"
TBCOMMON = FIX / "tbcommon"
MISSING = TBCOMMON / "test_case" / "tbcommon_missing.py"


@pytest.fixture(scope="module", autouse=True)
def shim():
    install_thinkingbox_shim()
    if not tb_shim.active():
        pytest.skip("the real thinkingbox package is installed: the shim stands aside")


@pytest.fixture(scope="module")
def tasks():
    return load_dataset(TBCOMMON, test_list=TBCOMMON / "lists" / "healthy.yaml", strict=True).tasks


class Yes(Judge):
    """Says yes, and keeps the texts it was asked about."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def text_yesno(self, text: str, question: str) -> bool:
        self.texts.append(text)
        return True


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


# ------------------------------------------------------------------ the modules

def test_modules_import_like_the_framework_package():
    for name in tb_shim.MODULES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.name == name, name
        assert importlib.import_module(name).__spec__.loader is spec.loader
    assert importlib.util.find_spec("thinkingbox.common.nosuch") is None
    from thinkingbox.common import Judge as TbJudge, TestContext as TbContext, chat_types as tb_chat
    from thinkingbox.common.chat_types import MessageT, Text as TbText, TestContext as ChatContext
    from thinkingbox.common.judge import JudgeException, safe_tag_encode
    import thinkingbox.common.chat_types
    # our objects, not copies: isinstance agrees between a test file and our TestContext
    assert TbText is Text and TbContext is ChatContext is TestContext and TbJudge is Judge
    assert tb_chat is thinkingbox.common.chat_types and MessageT is chat_types.MessageT
    assert sorted(tb_chat.__all__) == sorted(tb_shim.MODULES["thinkingbox.common.chat_types"])
    assert issubclass(JudgeException, Exception) and safe_tag_encode("<b>") == "&lt;b&gt;"
    with pytest.raises(ImportError, match="NoSuchThing"):
        from thinkingbox.common.chat_types import NoSuchThing  # noqa: F401


def test_chat_types_construct_like_the_framework():
    t = Text(role="user", type="text", content="hi")  # unknown keywords are ignored, as by pydantic
    assert (t.role, t.content, t.tag, t.is_visible, t.T) == ("user", "hi", "text", True, "Text")
    assert not Text(role="assistant", content="hmm", metadata={"tag": "think"}).is_visible
    a, b = ToolCall(name="f", arguments={"x": 1}), ToolCall(name="f", arguments={"x": 1})
    assert a.id.startswith("call_") and a.id != b.id
    step = ParallelToolCall(tool_calls=[{"name": "g", "arguments": {}, "id": "c2"}])
    assert step.tool_calls == [ToolCall("g", {}, "c2")]
    r = ToolResponse(name="g", content="ok", id="c2")
    assert all(isinstance(m, chat_types.MessageT) for m in (t, a, step, r))
    assert ToolCallResponse(ToolCall("g", {}, "c2"), "ok").tool_response == r


def test_context_presents_typed_messages_and_serializes():
    ctx = TestContext(
        messages=[{"role": "user", "content": "q"},
                  {"role": "assistant", "content": None, "reasoning_content": "look it up",
                   "tool_calls": [{"id": "c1", "type": "function",
                                   "function": {"name": "list_notes", "arguments": '{"label": "work"}'}},
                                  {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "[]"},
                  {"role": "assistant", "content": "none"}],
        tool_calls=[{"tool_call": {"name": "list_notes", "arguments": {"label": "work"}, "id": "c1"},
                     "tool_response": "[]"}])
    think, step, reply, answer = ctx.messages[1:]
    assert isinstance(ctx.messages[0], Text) and not think.is_visible and answer.content == "none"
    assert [(c.name, c.arguments, c.metadata.get("error", "")[:9]) for c in step.tool_calls] == [
        ("list_notes", {"label": "work"}, ""), ("f", {}, "arguments")]
    assert reply == ToolResponse("list_notes", "[]", "c1")  # the name comes from the call
    assert ctx.tool_calls[0].tool_response == reply
    assert ctx.query() == "q" and ctx.transcript() == "user: q\nassistant: none"  # reasoning stays hidden
    assert context_from_json(json.loads(json.dumps(context_to_json(ctx)))) == ctx


# ------------------------------------------------------------------ the fixture dataset

def test_dataset_loads_and_the_planted_import_is_reported_with_file_and_line():
    ds = load_dataset(TBCOMMON)
    assert ds.errors == [] and len(ds.tasks) == 4
    errors = ds.compile_all()
    assert [(Path(e.file), e.line) for e in errors] == [(MISSING, line_of(MISSING, "import NoSuchThing"))]
    assert "cannot import name 'NoSuchThing' from 'thinkingbox.common.chat_types'" in errors[0].message
    assert "ToolResponse" in errors[0].message  # what the shim does provide there


def test_cli_validate_json_in_a_fresh_interpreter():
    r = subprocess.run([sys.executable, "-m", "trainer.cli", "tasks", "validate", str(TBCOMMON), "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tasks"] == 4 and doc["by_scenario"] == {"notes": 4}
    [e] = doc["errors"]
    assert (Path(e["file"]).resolve(), e["line"], e["key"]) == (MISSING, line_of(MISSING, "NoSuchThing"), None)
    assert "NoSuchThing" in e["message"]


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_tasks_grade_in_both_paths(tasks, isolate):
    call = ToolCall("add_note", {"text": "buy milk", "label": "shopping"}, "c1")
    added = ToolResponse("add_note", '{"id": 3}', "c1")
    seed = [{"id": 1, "text": "call mom"}]
    fx = {"notes": {"initial_db_state": {"notes": seed},
                    "result_db_state": {"notes": seed + [{"id": 3, "text": "buy milk"}]}}}
    typed = [Text("user", 'Add a note "buy milk".'), ParallelToolCall([call]), added, Text("assistant", "Added.")]
    ok = TestContext(effects=fx, messages=typed, tool_calls=[ToolCallResponse(call, added)])
    v = grade(tasks["tbcommon_types.py:test_add_note"], ok, isolate=isolate)
    assert (v.passed, v.system_error) == (True, None), v
    lost = TestContext(effects={"notes": {"initial_db_state": {"notes": seed}, "result_db_state": {"notes": seed}}},
                       messages=typed, tool_calls=[ToolCallResponse(call, added)])
    v = grade(tasks["tbcommon_types.py:test_add_note"], lost, isolate=isolate)
    assert (v.passed, v.system_error, v.explanation) == (False, None, "new notes: []")

    chat = [{"role": "user", "content": "What notes do I have?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "list_notes", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c9", "content": "[]"},
            {"role": "assistant", "content": "You have <no> notes."}]
    judge = Yes()
    v = grade(tasks["tbcommon_types.py:test_conversation"], TestContext(messages=chat), judge, isolate=isolate)
    assert v.passed and v.judge_calls == [{"question": "Does the reply list the user's notes?", "answer": True}]
    assert judge.texts == ["You have &lt;no&gt; notes."]  # the file's safe_tag_encode ran
    v = grade(tasks["tbcommon_types.py:test_conversation"], TestContext(messages=chat[:2]), Yes(),
              isolate=isolate)
    assert (v.passed, v.system_error, v.explanation) == (False, None, "calls without a response: ['list_notes']")

    listed = ToolCallResponse(ToolCall("list_notes", {"label": "work"}), '[{"text": "quarterly report"}]')
    v = grade(tasks["tbcommon_yaml.yaml:yaml_tool_responses"], TestContext(tool_calls=[listed]), isolate=isolate)
    assert (v.passed, v.system_error) == (True, None), v
    v = grade(tasks["tbcommon_yaml.yaml:yaml_tool_responses"], TestContext(), isolate=isolate)
    assert (v.passed, v.explanation) == (False, "list_notes was not called")


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "subprocess"])
def test_a_task_of_the_broken_file_is_a_system_error_that_names_the_import(isolate):
    task = load_dataset(TBCOMMON).tasks["tbcommon_missing.py:test_never_loads"]
    v = grade(task, TestContext(), isolate=isolate)
    assert not v.passed and v.system_error.startswith("TaskFormatError")
    assert f"tbcommon_missing.py:{line_of(MISSING, 'NoSuchThing')}" in v.system_error
    assert "NoSuchThing" in v.system_error


def test_golden_replays_pass():
    r = CliRunner().invoke(app, ["validate-golden", str(TBCOMMON), "--test-list",
                                 str(TBCOMMON / "lists" / "healthy.yaml"), "--json"])
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.exit_code == 0, s["failures"]
    assert (s["tasks"], s["passed"], s["system_errors"]) == (3, 3, 0)


# ------------------------------------------------------------------ other import failures

def test_missing_module_or_name_names_file_line_and_what_is_missing(tmp_path):
    (tmp_path / "scenario").mkdir()
    (tmp_path / "scenario" / "s.yaml").write_text("world_state: {}\ntools: []\n")
    (tmp_path / "test_case").mkdir()
    body = '"""!\nscenario: s\n"""\n{imp}\n\n\ndef test_x(x, judge):\n    """!\n    query: q\n    """\n'
    files = {"mod.py": "import thinkingbox.common.nosuch", "name.py": "from thinkingbox.common import Judge, Nope",
             "other.py": "from json import not_in_json"}
    for name, imp in files.items():
        (tmp_path / "test_case" / name).write_text(body.format(imp=imp))
    got = {Path(e.file).name: (e.line, e.message) for e in load_dataset(tmp_path).compile_all()}
    assert {n: line for n, (line, _) in got.items()} == {n: 4 for n in files}
    assert got["mod.py"][1].startswith("import failed: no module named 'thinkingbox.common.nosuch' "
                                       "(the thinkingbox shim provides the modules thinkingbox.common,")
    assert got["name.py"][1].startswith("import failed: cannot import name 'Nope' from 'thinkingbox.common' "
                                        "(the thinkingbox shim's thinkingbox.common provides")
    assert got["other.py"][1] == "import failed: cannot import name 'not_in_json' from 'json'"  # no shim hint


def test_broken_fixture_import_error_is_still_reported():
    broken = FIX / "broken"
    [e] = [e for e in load_dataset(broken).compile_all() if Path(e.file).name == "import_error.py"]
    assert e.line == 4 and e.message == "import failed: no module named 'a_module_that_does_not_exist'"


# ------------------------------------------------------------------ the real package wins

def _fresh_python(pythonpath: Path) -> str:
    code = ("from trainer.env.grading.tb_shim import install_thinkingbox_shim; install_thinkingbox_shim()\n"
            "import thinkingbox.common as c; from trainer.env.grading import tb_shim\n"
            "print(getattr(c, 'REAL', False), tb_shim.active())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), str(REPO)])}
    r = subprocess.run([sys.executable, "-c", code], cwd=pythonpath, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_an_installed_thinkingbox_is_not_shadowed(tmp_path):
    (tmp_path / "thinkingbox" / "common").mkdir(parents=True)
    (tmp_path / "thinkingbox" / "__init__.py").write_text("")
    (tmp_path / "thinkingbox" / "common" / "__init__.py").write_text("REAL = True\n")
    assert _fresh_python(tmp_path) == "True False"


def test_a_bare_thinkingbox_folder_is_not_the_package(tmp_path):
    (tmp_path / "thinkingbox").mkdir()  # e.g. a data folder of that name on sys.path: a namespace package
    assert _fresh_python(tmp_path) == "False True"
