"""The conformance corpus (tests/conformance/corpus.json): categories of vLLM's own parser tests,
each case with the reading we expect. Where our written policy deliberately differs from vLLM the
case says so (`vllm`: the allowlist keys, `why`: the reason), and test_parity checks it against
vLLM's parsers themselves when their environment is built."""

import json
from pathlib import Path

import pytest

from trainer.core import tb_interpret as ti
from trainer.core.parity import ALLOWLIST

CORPUS = json.loads((Path(__file__).parent / "conformance" / "corpus.json").read_text())
TOOLS = ti.Toolset(CORPUS["tools"])


@pytest.mark.parametrize("case", CORPUS["cases"], ids=lambda c: c["id"])
def test_case(case):
    c = ti.parse(case["text"], family=case["family"], tools=TOOLS, thinking=case["thinking"],
                 finish=case["finish"], tool_choice=case["tool_choice"])
    exp = case["expect"]
    got = [{"name": x.name, "arguments": x.arguments} if x.executable else {"name": x.name, "problem": x.problem}
           for x in c.calls]
    assert got == exp["calls"]
    # typed values keep their JSON type (1 is not 1.0, True is not 1)
    assert json.dumps(got, sort_keys=True) == json.dumps(exp["calls"], sort_keys=True)
    if "reasoning" in exp:
        assert c.reasoning == exp["reasoning"]
    if "content" in exp:
        assert c.content == exp["content"]
    for x in c.calls:
        assert x.executable == (x.message is None)
        if not x.executable:
            assert x.message.startswith("Error: ")
    if case["finish"] == "length":
        assert not c.tool_calls, "a turn cut by the length limit executes nothing"


@pytest.mark.parametrize("case", [c for c in CORPUS["cases"] if c["vllm"] != "same"], ids=lambda c: c["id"])
def test_deliberate_differences_are_allowlisted_and_explained(case):
    assert set(case["vllm"]) <= ALLOWLIST.keys()
    assert case.get("why"), "a deliberate difference from vLLM says why"


def test_corpus_covers_vllm_test_categories():
    ids = {c["id"] for c in CORPUS["cases"]}
    for needed in ("h-single", "h-parallel", "x-typing", "h-null", "x-anyof-null", "h-nested-json",
                   "x-tags-in-values", "x-missing-function-close", "x-truncated", "x-no-wrapper",
                   "x-tool-choice-none"):
        assert needed in ids


def test_unknown_tool_message_lists_available_tools():
    c = ti.parse(ti_call := '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].message == "Error: tool 'nope' does not exist. Available tools: get_order, update_order."
    assert ti_call in ti_call  # the raw text is not altered


def test_unknown_parameter_message():
    c = ti.parse('<tool_call>\n{"name": "get_order", "arguments": {"order_id": 1, "x": 2}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].message == "Error: tool 'get_order' has no parameter(s) 'x'. Valid parameters: order_id."


def test_missing_required_and_type_errors_name_the_field():
    c = ti.parse('<tool_call>\n{"name": "update_order", "arguments": {"order_id": "a"}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].problem == "invalid_arguments" and "'order_id'" in c.calls[0].message
    c = ti.parse('<tool_call>\n{"name": "get_order", "arguments": {}}\n</tool_call>', family="hermes",
                 tools=TOOLS, thinking=False)
    assert "'order_id' is a required property" in c.calls[0].message


def test_finish_reports_tool_calls_and_length():
    assert ti.parse("hi", family="xml", thinking=False).finish == "stop"
    c = ti.parse('<function=get_order>\n<parameter=order_id>\n1\n</parameter>\n</function>', family="xml",
                 tools=TOOLS, thinking=False)
    assert c.finish == "tool_calls"


def test_without_tools_values_stay_strings_and_names_are_not_checked():
    c = ti.parse('<function=anything>\n<parameter=n>\n5\n</parameter>\n</function>', family="xml", thinking=False)
    assert c.tool_calls[0].name == "anything" and c.tool_calls[0].arguments == {"n": "5"}


def test_thinking_off_has_no_reasoning():
    c = ti.parse("<think>\nx\n</think>\n\ny", family="hermes", thinking=False)
    assert c.reasoning is None and c.content == "<think>\nx\n</think>\n\ny"


def test_bad_family_and_bad_schema_are_typed_errors():
    with pytest.raises(ti.InterpretError, match="unknown model family 'json'"):
        ti.parse("x", family="json")
    with pytest.raises(ti.InterpretError, match="tool 'f': invalid parameters schema"):
        ti.Toolset([{"name": "f", "parameters": {"type": "nonsense"}}])
    with pytest.raises(ti.InterpretError, match="tool #0"):
        ti.Toolset([{"description": "no name"}])


@pytest.mark.parametrize("split", [{"reasoning_content": None, "reasoning": "Look."}, {"reasoning": "Look."},
                                   {"reasoning_content": "Look.", "reasoning": None},
                                   {"reasoning_content": "Look.", "reasoning": "other"}])
def test_response_reasoning_is_the_first_key_that_holds_a_value(split):
    response = {"choices": [{"message": {"role": "assistant", "content": "Done.", **split}, "finish_reason": "stop"}]}
    c = ti.parse_response(response, family="hermes")
    assert (c.reasoning, c.content) == ("Look.", "Done.")
