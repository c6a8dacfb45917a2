"""The conformance corpus (tests/conformance/corpus.json): categories of vLLM's own parser tests,
each case with the reading we expect. Its `vllm` column says whether vLLM 0.27.1 reads the case
identically (`same`) or executes more than we do (`stricter`, with `why`: we reject and tell the
agent); test_parity checks that column against vLLM's parsers themselves."""

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
def test_where_we_are_stricter_than_vllm_the_case_says_why(case):
    assert case["vllm"] == "stricter"
    assert case.get("why"), "a deliberate difference from vLLM says why"


def test_allowlist_is_at_most_three_names_each_with_a_reason():
    assert len(ALLOWLIST) <= 3 and all(isinstance(v, str) and v for v in ALLOWLIST.values())


def test_corpus_covers_vllm_test_categories():
    ids = {c["id"] for c in CORPUS["cases"]}
    for needed in ("h-single", "h-parallel", "x-typing", "h-null", "x-anyof-null", "h-nested-json",
                   "x-tags-in-values", "x-missing-function-close", "x-truncated", "x-no-wrapper",
                   "x-tool-choice-none"):
        assert needed in ids


def test_unknown_tool_message_lists_available_tools():
    c = ti.parse(ti_call := '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].message == "Error: tool 'nope' does not exist. Available tools: close_order, get_order, update_order."
    assert ti_call in ti_call  # the raw text is not altered


def test_a_parameter_the_schema_forbids_is_refused_by_name():
    c = ti.parse('<tool_call>\n{"name": "close_order", "arguments": {"order_id": 1, "x": 2}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].message == "Error: tool 'close_order' has no parameter(s) 'x'. Valid parameters: order_id."


@pytest.mark.parametrize("family", ["hermes", "xml"])
def test_a_parameter_the_schema_does_not_declare_goes_to_the_server(family):
    """Only what the schema forbids is refused: without `additionalProperties: false` an undeclared
    parameter is passed on (its value untyped in xml: no schema says its type), and the schema's
    other rules still apply to the declared ones."""
    text = {"hermes": '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 1, "filter": {"a": 1}}}\n</tool_call>',
            "xml": "<tool_call>\n<function=get_order>\n<parameter=order_id>\n1\n</parameter>\n<parameter=filter>\n"
                   '{"a": 1}\n</parameter>\n</function>\n</tool_call>'}[family]
    [call] = ti.parse(text, family=family, tools=TOOLS, thinking=False).calls
    assert call.executable and call.arguments == {"order_id": 1, "filter": {"a": 1} if family == "hermes" else '{"a": 1}'}
    bad = text.replace('"order_id": 1', '"order_id": "one"').replace("\n1\n", "\none\n")
    [call] = ti.parse(bad, family=family, tools=TOOLS, thinking=False).calls
    assert call.problem == "invalid_arguments" and "'order_id'" in call.message
    schemas = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
    ts = ti.Toolset([{"name": "search", "parameters": schemas}])
    ok = ti.parse('<tool_call>\n{"name": "search", "arguments": {"q": "a", "page": 2}}\n</tool_call>', family="hermes",
                  tools=ts, thinking=False)
    no = ti.parse('<tool_call>\n{"name": "search", "arguments": {"q": "a", "page": "2"}}\n</tool_call>',
                  family="hermes", tools=ts, thinking=False)
    assert ok.calls[0].executable and no.calls[0].problem == "invalid_arguments"


def test_missing_required_and_type_errors_name_the_field():
    c = ti.parse('<tool_call>\n{"name": "update_order", "arguments": {"order_id": "a"}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert c.calls[0].problem == "invalid_arguments" and "'order_id'" in c.calls[0].message
    c = ti.parse('<tool_call>\n{"name": "get_order", "arguments": {}}\n</tool_call>', family="hermes",
                 tools=TOOLS, thinking=False)
    assert "'order_id' is a required property" in c.calls[0].message


def test_finish_reports_tool_calls_and_length():
    assert ti.parse("hi", family="xml", thinking=False).finish == "stop"
    c = ti.parse('<tool_call>\n<function=get_order>\n<parameter=order_id>\n1\n</parameter>\n</function>\n</tool_call>',
                 family="xml", tools=TOOLS, thinking=False)
    assert c.finish == "tool_calls"


def test_without_tools_values_stay_strings_and_names_are_not_checked():
    c = ti.parse('<tool_call>\n<function=anything>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>',
                 family="xml", thinking=False)
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


def test_one_bad_call_stops_the_turn_and_every_call_says_why():
    good = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 1}}\n</tool_call>'
    for bad in ('<tool_call>\n{"name": "get_order", "arguments": {"order_id": 2}\n</tool_call>',  # a brace short
                '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 2}}',  # cut off
                '<tool_call>\n<function=get_order>\n</function>\n</tool_call>'):  # the other family
        c = ti.parse(f"{good}\n{bad}", family="hermes", tools=TOOLS, thinking=False)
        assert not c.tool_calls and c.calls[0].problem == "malformed"
        assert "tool call #2 of this turn could not be read" in c.calls[0].message


@pytest.mark.parametrize("family,text", [
    ("hermes", '<tool_call>\n{"name": "update_order", "arguments": {"order_id": 1, "note": "a </think> b"}}\n</tool_call>'),
    ("hermes", '<tool_call>\n{"name": "update_order", "arguments": {"order_id": 1, "note": "<parameter=x>"}}\n</tool_call>'),
    ("xml", '<tool_call>\n<function=update_order>\n<parameter=order_id>\n1\n</parameter>\n<parameter=note>\n'
            'x < /parameter> y\n</parameter>\n</function>\n</tool_call>'),
])
def test_reserved_markup_in_a_value_is_rejected_and_named(family, text):
    c = ti.parse(text, family=family, tools=TOOLS, thinking=False)
    assert not c.tool_calls and "reserved markup" in c.calls[0].message


@pytest.mark.parametrize("text", [
    '<tool_call>\n<function= get_order>\n<parameter=order_id>\n1\n</parameter>\n</function>\n</tool_call>',
    '<tool_call>\n<function=get_order>\n<parameter= order_id >\n1\n</parameter>\n</function>\n</tool_call>',
    '<tool_call>\n<function=get_order>\nstray\n<parameter=order_id>\n1\n</parameter>\n</function>\n</tool_call>',
])
def test_xml_spaces_in_tags_or_stray_text_are_rejected(text):
    c = ti.parse(text, family="xml", tools=TOOLS, thinking=False)
    assert not c.tool_calls and c.calls[0].problem == "malformed"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_hermes_non_json_numbers_are_rejected(literal):
    c = ti.parse(f'<tool_call>\n{{"name": "get_order", "arguments": {{"order_id": {literal}}}}}\n</tool_call>',
                 family="hermes", tools=TOOLS, thinking=False)
    assert not c.tool_calls and c.calls[0].problem == "malformed"


def test_python_none_is_the_string_vllm_passes_and_the_agent_is_told_to_write_null():
    c = ti.parse('<tool_call>\n<function=update_order>\n<parameter=order_id>\n1\n</parameter>\n'
                 '<parameter=limit>\nNone\n</parameter>\n</function>\n</tool_call>', family="xml", tools=TOOLS,
                 thinking=False)
    assert c.calls[0].arguments["limit"] == "None" and "Write null, not None, for 'limit'" in c.calls[0].message


def test_a_call_inside_the_reasoning_stops_the_turn():
    call = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 1}}\n</tool_call>'
    c = ti.parse(f"plan {call}\n</think>\n\n{call}", family="hermes", tools=TOOLS)
    assert c.calls_in_reasoning == 1 and not c.tool_calls and "inside the reasoning" in c.calls[0].message
