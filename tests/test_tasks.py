"""The ThinkingBox task loader against docs/tasks.md (layout, scenarios, rules), on real mini-datasets on disk."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trainer.env.grading.context import TestContext
from trainer.env.errors import DatasetError, TaskFormatError
from trainer.env.taskformat.tasks import (find_test_file, load_dataset, merge_init, recursive_merge,
                               tool_list)

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
BASIC = FIXTURES / "basic"
BROKEN = FIXTURES / "broken"


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return p


def mini(tmp_path: Path, **scenarios: str) -> Path:
    """A dataset with an agent and the given scenarios (name -> YAML)."""
    write(tmp_path, "agent/think.yaml", "system_instructions: Be useful.\nbuiltin_tools: []\n")
    for name, text in (scenarios or {"s": "world_state: {srv: {data_patch: null}}\ntools: []\n"}).items():
        write(tmp_path, f"scenario/{name}.yaml", text)
    return tmp_path


# ------------------------------------------------------------------ the basic fixture dataset

@pytest.fixture(scope="module")
def basic():
    return load_dataset(BASIC, strict=True)


def test_loads_every_test_and_skips_helpers(basic):
    # files of a folder (sorted) before its subfolders (sorted); tests in file order
    assert list(basic.tasks) == [
        "notes_basic.py:test_add_note",
        "notes_basic.py:test_delete_note",
        "notes_basic.py:test_formatted",
        "notes_yaml.yaml:yaml_case",
        "crm_contacts.py:test_update_email",
        "notes_nested.py:test_list",
    ]
    assert basic.by_scenario() == {"crm": 1, "notes": 5}
    assert "notes_basic.py:note_texts" not in basic.tasks
    assert "notes_basic.py:not_a_test" not in basic.tasks


def test_uid_file_and_line(basic):
    t = basic.tasks["notes_basic.py:test_add_note"]
    assert t.uid == "notes_basic.py:test_add_note"
    assert t.file == BASIC / "test_case" / "notes_basic.py"
    assert t.file.read_text().splitlines()[t.lineno - 1].startswith("def test_add_note")


def test_module_yaml_applies_in_file_order(basic):
    # the second module-level block sits between test_add_note and test_delete_note
    add = basic.tasks["notes_basic.py:test_add_note"]
    delete = basic.tasks["notes_basic.py:test_delete_note"]
    assert add.user_context is None and add.max_user_sim_turns == 10
    assert delete.user_context.startswith("You are Alice")
    assert delete.max_user_sim_turns == 4
    assert delete.max_agent_sim_turns == 12
    assert add.max_agent_sim_turns is None  # unlimited by default


def test_tags_concatenate_scenario_module_function(basic):
    add = basic.tasks["notes_basic.py:test_add_note"]
    assert add.tags == ["domain:notes", "scenario-tag", "module-tag", "fn-tag"]
    delete = basic.tasks["notes_basic.py:test_delete_note"]
    assert delete.tags == ["domain:notes", "scenario-tag", "module-tag"]


def test_init_merges_recursively_with_world_state(basic):
    ws = basic.tasks["notes_basic.py:test_add_note"].world_state()["notes"]
    assert ws["owner"] == "alice"  # scenario key kept
    assert ws["labels"] == ["personal", "shopping"]  # lists concatenate, scenario first
    assert ws["limits"] == {"max_notes": 100, "max_len": 500}  # dicts merge, test wins
    # null at scenario level: the test's value replaces it
    assert ws["golden_test_case"]["tool_interactions"][0]["tool"] == "add_note"
    # the scenario itself is not mutated
    assert basic.scenarios["notes"].world_state["notes"]["labels"] == ["personal"]


def test_falsy_scenario_value_is_replaced_and_new_server_added(basic):
    ws = basic.tasks["crm_contacts.py:test_update_email"].world_state()
    assert ws["crm"] == {"data_patch": {"contacts": [{"id": 7, "email": "bob@example.com"}]}}
    assert ws["search"] == {"index": "contacts"}  # only in init: added
    assert ws["audit"] is None  # untouched


def test_golden_actions(basic):
    assert basic.tasks["notes_basic.py:test_add_note"].golden_actions() == [
        ("notes", "add_note", {"text": "buy milk"})]
    assert basic.tasks["notes_basic.py:test_delete_note"].golden_actions() == []


def test_prompt_two_system_messages(basic):
    agent = basic.agent()
    delete = basic.tasks["notes_basic.py:test_delete_note"]
    msgs = delete.prompt(agent)
    assert [m["role"] for m in msgs] == ["system", "system", "user"]
    assert msgs[0]["content"] == agent.system_instructions
    assert msgs[1]["content"] == "You manage the user's notes.\nConfirm before deleting."
    assert msgs[2]["content"] == "Delete my shopping note."
    # scenario without bot_instructions and a test without: second system message omitted
    email = basic.tasks["crm_contacts.py:test_update_email"]
    assert [m["role"] for m in email.prompt(agent)] == ["system", "user"]


def test_format_query_uses_init_result(basic):
    t = basic.tasks["notes_basic.py:test_formatted"]
    init = {"notes": {"user_name": "Ann", "ticket": "T-9"}}
    q, uc, bi = t.formatted(init)
    assert q == "Hello Ann, open ticket T-9."
    assert uc == "Your ticket is T-9."
    assert bi == "Ticket T-9 is yours."
    assert t.prompt(basic.agent(), init)[1]["content"].endswith("Ticket T-9 is yours.")
    # without format_query, braces stay literal
    assert basic.tasks["notes_basic.py:test_add_note"].formatted(init)[0] == 'Add a note saying "buy milk".'


def test_tool_list_builtin_first_with_overrides(basic):
    agent, scenario = basic.agent(), basic.scenarios["notes"]
    offered = {
        "delete_note": {"description": "Delete.", "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "add_note": {"description": "Add.", "input_schema": {"type": "object", "properties": {"text": {"type": "string", "description": "t"}}}},
        "list_notes": {"description": "List.", "input_schema": {"type": "object", "properties": {}}},
        "secret_admin_tool": {"description": "not listed", "input_schema": {}},
    }
    # the framework's order (the default): builtin first, then the servers' listing order, unlisted left out
    tools = tool_list(agent, scenario, offered)
    assert [t["name"] for t in tools] == ["escalate_to_human", "delete_note", "add_note", "list_notes"]
    # the scenario's list order on request
    assert [t["name"] for t in tool_list(agent, scenario, offered, order="scenario")] == \
        ["escalate_to_human", "list_notes", "add_note", "delete_note"]
    with pytest.raises(ValueError, match="tool order 'alphabetical'"):
        tool_list(agent, scenario, offered, order="alphabetical")
    assert tools[0]["is_end_turn"] and tools[0]["builtin"]
    add = tools[2]
    assert add["description"] == "Create a note for the current user."
    assert add["input_schema"]["properties"]["text"]["description"] == "The note body, plain text."
    assert offered["add_note"]["input_schema"]["properties"]["text"]["description"] == "t"  # not mutated
    del offered["delete_note"]
    with pytest.raises(TaskFormatError, match="delete_note"):
        tool_list(agent, scenario, offered)


def test_test_functions_run_without_thinkingbox_installed(basic):
    import importlib.util
    assert importlib.util.find_spec("thinkingbox") is None or True  # the shim may be installed by now
    add = basic.tasks["notes_basic.py:test_add_note"].test_function()
    ok = TestContext(effects={"notes": {"result_db_state": {"notes": [{"text": "buy milk"}]}}})
    add(ok, None)  # passes: no exception
    with pytest.raises(AssertionError, match="the note was not added"):
        add(TestContext(effects={"notes": {"result_db_state": {"notes": []}}}), None)
    assert basic.tasks["notes_basic.py:test_formatted"].test_function()(ok, None) == 0.5
    yaml_fn = basic.tasks["notes_yaml.yaml:yaml_case"].test_function()
    with pytest.raises(AssertionError):
        yaml_fn(TestContext(response=""), None)
    # one module per file: tests of one file share their helpers
    assert add.__globals__ is basic.tasks["notes_basic.py:test_delete_note"].test_function().__globals__


def test_yaml_test_file(basic):
    t = basic.tasks["notes_yaml.yaml:yaml_case"]
    assert t.scenario.name == "notes"
    assert t.query == "Count my notes."
    assert t.tags == ["domain:notes", "scenario-tag", "from-yaml"]


# ------------------------------------------------------------------ lookup and test lists

def test_name_lookup_longest_underscore_prefix(tmp_path):
    root = mini(tmp_path)
    body = '"""!\nscenario: s\n"""\n\ndef test_x(x, judge):\n    """!\n    query: q\n    """\n'
    write(root, "test_case/a/a_b_c.py", body)
    assert find_test_file(root, "a_b_c.py") == root / "test_case/a/a_b_c.py"
    write(root, "test_case/a_b/a_b_c.py", body)
    assert find_test_file(root, "a_b_c.py") == root / "test_case/a_b/a_b_c.py"
    write(root, "test_case/a_b_c.py", body)
    assert find_test_file(root, "a_b_c.py") == root / "test_case/a_b_c.py"
    # only one directory level, and never the full name as a folder
    write(root, "test_case/x/y/x_y_z.py", body)
    assert find_test_file(root, "x_y_z.py") is None
    assert find_test_file(root, "missing.py") is None


def test_test_list_order_and_strictness(tmp_path):
    ds = load_dataset(BASIC, test_list=BASIC / "lists" / "two.yaml", strict=True)
    assert list(ds.tasks) == ["notes_nested.py:test_list", "notes_basic.py:test_add_note"]
    bad = write(tmp_path, "list.yaml", "- notes_basic.py:test_add_note\n- notes_basic.py:nope\n- ghost.py:test_a\n")
    with pytest.raises(DatasetError) as e:
        load_dataset(BASIC, test_list=bad, strict=True)
    msgs = {(Path(x.file).name, x.line) for x in e.value.errors}
    assert msgs == {("list.yaml", 2), ("list.yaml", 3)}


def test_uids_unique_basenames(tmp_path):
    root = mini(tmp_path)
    body = '"""!\nscenario: s\n"""\n\ndef test_x(x, judge):\n    """!\n    query: q\n    """\n'
    write(root, "test_case/one/dup.py", body)
    write(root, "test_case/two/dup.py", body)
    ds = load_dataset(root)
    assert len(ds.tasks) == 1
    assert any("duplicate test file basename" in e.message for e in ds.errors)


def test_only_first_statement_string_makes_a_test(tmp_path):
    root = mini(tmp_path)
    write(root, "test_case/t.py", '''
        """!
        scenario: s
        """

        def test_second_statement(x, judge):
            x = 1
            """!
            query: not a config: not the first statement
            """

        def test_plain_docstring(x, judge):
            """query: no bang"""

        def test_real(x, judge):
            """!
            query: the real one
            """
        ''')
    assert list(load_dataset(root, strict=True).tasks) == ["t.py:test_real"]


def test_module_yaml_below_a_test_does_not_reach_it(tmp_path):
    root = mini(tmp_path)
    write(root, "test_case/t.py", '''
        """!
        scenario: s
        """

        def test_first(x, judge):
            """!
            query: q1
            """

        """!
        user_context: later
        query: default query
        """

        def test_second(x, judge):
            """!
            tags: [b]
            """
        ''')
    ds = load_dataset(root, strict=True)
    assert ds.tasks["t.py:test_first"].user_context is None
    assert ds.tasks["t.py:test_second"].user_context == "later"
    assert ds.tasks["t.py:test_second"].query == "default query"


def test_tags_only_in_function(tmp_path):
    root = mini(tmp_path, s="world_state: {}\ntools: []\n")
    write(root, "test_case/t.py", '"""!\nscenario: s\n"""\n\ndef test_x(x, judge):\n    """!\n    query: q\n    tags: [fn]\n    """\n')
    assert load_dataset(root, strict=True).tasks["t.py:test_x"].tags == ["fn"]


@pytest.mark.parametrize("scenario_value,init,expected", [
    (None, {"a": 1}, {"a": 1}),
    ({}, {"a": 1}, {"a": 1}),
    ({"a": [1], "b": {"c": 1, "d": 2}}, {"a": [2], "b": {"d": 3}}, {"a": [1, 2], "b": {"c": 1, "d": 3}}),
    ({"a": {"b": 1}}, {"a": 5}, {"a": 5}),  # a scalar replaces a dict
    ({"a": [1, 2]}, {"a": {"x": 1}}, {"a": {"x": 1}}),  # differing types: replaced
    ({"a": 1}, {}, {"a": 1}),
])
def test_merge_init_rules(scenario_value, init, expected):
    ws = {"srv": scenario_value, "other": {"keep": True}}
    merged = merge_init(ws, {"srv": init})
    assert merged["srv"] == expected
    assert merged["other"] == {"keep": True}
    assert ws["srv"] == scenario_value  # inputs untouched


def test_recursive_merge_nested_lists_and_copies():
    a = {"x": {"y": [1]}}
    b = {"x": {"y": [2], "z": [3]}}
    out = recursive_merge(a, b)
    assert out == {"x": {"y": [1, 2], "z": [3]}}
    out["x"]["z"].append(4)
    assert b["x"]["z"] == [3]


def test_agent_choice(tmp_path):
    root = mini(tmp_path)
    write(root, "agent/other.yaml", "system_instructions: other\n")
    ds = load_dataset(root)
    assert ds.agent().name == "think"
    assert ds.agent("other").system_instructions == "other"
    with pytest.raises(TaskFormatError, match="no agent 'nobody'"):
        ds.agent("nobody")


# ------------------------------------------------------------------ planted errors

def test_validate_reports_every_planted_error_with_file_and_line():
    ds = load_dataset(BROKEN)
    errors = ds.errors + ds.compile_all()
    got = {(Path(e.file).relative_to(BROKEN).as_posix(), e.line, e.key) for e in errors}
    expected = {
        ("scenario/bad_yaml.yaml", 3, None),
        ("test_case/bad_yaml.py", 9, None),
        ("test_case/billing/dup.py", None, None),
        ("test_case/import_error.py", 4, None),
        ("test_case/missing_scenario.py", 3, "scenario"),
        ("test_case/module_key.py", 3, "priority"),
        ("test_case/unknown_key.py", 9, "usr_context"),
        ("test_case/wrong_types.py", 8, "query"),
        ("test_case/wrong_types.py", 9, "max_user_sim_turns"),
        ("test_case/wrong_types.py", 10, "format_query"),
        ("test_case/wrong_types.py", 11, "tags"),
    }
    assert got == expected
    # the healthy neighbour of a broken test still loads
    assert "unknown_key.py:test_fine" in ds.tasks


def test_cli_validate_json_lists_errors(tmp_path):
    from typer.testing import CliRunner
    from trainer.cli import app
    r = CliRunner().invoke(app, ["tasks", "validate", str(BROKEN), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["tasks"] == len(load_dataset(BROKEN).tasks)
    assert len(doc["errors"]) == 11
    assert all(e["file"] and "message" in e for e in doc["errors"])
    assert doc["by_scenario"] == {"good": 4}
    ok = CliRunner().invoke(app, ["tasks", "validate", str(BASIC), "--json"])
    assert ok.exit_code == 0, ok.stdout
    assert json.loads(ok.stdout)["errors"] == []


def test_cli_show_and_list():
    from typer.testing import CliRunner
    from trainer.cli import app
    r = CliRunner().invoke(app, ["tasks", "show", str(BASIC), "notes_basic.py:test_add_note"])
    assert r.exit_code == 0, r.stdout
    doc = json.loads(r.stdout)
    assert doc["world_state"]["notes"]["labels"] == ["personal", "shopping"]
    assert [m["role"] for m in doc["prompt"]] == ["system", "system", "user"]
    assert [t["name"] for t in doc["tools"]] == ["escalate_to_human", "list_notes", "add_note", "delete_note"]
    missing = CliRunner().invoke(app, ["tasks", "show", str(BASIC), "nope.py:x"])
    assert missing.exit_code == 2  # bad input
    listed = CliRunner().invoke(app, ["tasks", "list", str(BASIC)])
    assert listed.exit_code == 0 and "6 task(s)" in listed.stdout


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not a ThinkingBox dataset"):
        load_dataset(tmp_path)


def test_help_lists_every_command_with_an_example():
    from typer.testing import CliRunner
    from trainer.cli import EXAMPLES, app
    out = CliRunner().invoke(app, ["--help"]).stdout
    for cmd, example in EXAMPLES.items():
        assert f"tbt {cmd}" in out and example in out


def test_bad_golden_steps_and_format_errors_are_typed(tmp_path):
    root = mini(tmp_path)
    write(root, "test_case/t.py", '''
        """!
        scenario: s
        """

        def test_golden(x, judge):
            """!
            query: q
            init:
              srv:
                golden_test_case:
                  tool_interactions:
                  - {parameters: {a: 1}}
            """

        def test_fmt(x, judge):
            """!
            query: "id {init[srv][missing]}"
            format_query: true
            """
        ''')
    ds = load_dataset(root, strict=True)
    with pytest.raises(TaskFormatError, match=r"tool_interactions\[0\]"):
        ds.tasks["t.py:test_golden"].golden_actions()
    with pytest.raises(TaskFormatError) as e:
        ds.tasks["t.py:test_fmt"].prompt(ds.agent(), {"srv": {}})
    assert e.value.key == "format_query" and e.value.line == 15


def test_golden_paths_with_alternatives_and_their_errors(tmp_path):
    root = mini(tmp_path)
    write(root, "test_case/t.py", '''
        def test_two(x, judge):
            """!
            scenario: s
            query: q
            init:
              a:
                golden_test_case:
                  tool_interactions: [{tool: x, parameters: {n: 1}}]
                  alternatives:
                  - tool_interactions: [{tool: y, parameters: {}}]
              b:
                golden_test_case:
                  tool_interactions: [{tool: z, parameters: {}}]
            """

        def test_bad(x, judge):
            """!
            scenario: s
            query: q
            init:
              a:
                golden_test_case:
                  tool_interactions: []
                  alternatives: {tool_interactions: []}
            """
        ''')
    ds = load_dataset(root, strict=True)
    two = ds.tasks["t.py:test_two"]
    assert two.golden_paths() == [[("a", "x", {"n": 1}), ("b", "z", {})],
                                  [("a", "y", {}), ("b", "z", {})]]  # b has no alternative: its main steps
    assert two.golden_actions() == two.golden_paths()[0]
    with pytest.raises(TaskFormatError) as e:
        ds.tasks["t.py:test_bad"].golden_paths()
    assert e.value.key == "init.a.golden_test_case.alternatives" and e.value.line
