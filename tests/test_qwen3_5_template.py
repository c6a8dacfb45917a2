"""The tiny qwen3_5 model's chat template (trainer/verl/qwen3_5_chat_template.jinja) renders what
our renderer renders for the xml family (trainer/core/tb_render.py): the same text, the same ids."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from jinja2.exceptions import TemplateError
from test_tb_interpret_properties import safe_text, values  # argument and text strategies

from trainer.core.tb_render import render
from trainer.verl.tiny import QWEN3_5_TEMPLATE, build_tiny_qwen3_5

CORPUS_TOOLS = json.loads((Path(__file__).parent / "conformance" / "corpus.json").read_text())["tools"]
# non-ASCII text, HTML-like characters and unsorted keys: tojson must write them as json.dumps does
TOOLS = CORPUS_TOOLS + [{"type": "function", "function": {
    "name": "note", "description": "Écrit une note <b>&</b> 'vite' — 备注 😀",
    "parameters": {"type": "object", "required": ["text"],
                   "properties": {"text": {"type": "string", "description": "naïve\ttext"}, "a": {"type": "number"}}}}}]
SYSTEMS = [{"role": "system", "content": "You are the shop's support agent.\n"},
           {"role": "system", "content": "  Policy: refunds need an order id."}]
RICH_ARGS = {"order_id": 7, "note": "line 1\nline 2 é ü 中", "ratio": 0.25, "tiny": 1e-07, "big": 2.0**70,
             "inf": float("inf"), "neg": -3, "urgent": True, "gift": False, "limit": None,
             "meta": {"tags": ["a", "ü"], "n": {"deep": [1, 2.5, None, True, {}]}, "q": 'say "hi" \\ /'}, "empty": []}


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    path = build_tiny_qwen3_5(tmp_path_factory.mktemp("qwen3_5") / "model")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def template(tok, messages, tools=None, **kw):
    return tok.apply_chat_template(messages, tools=tools, tokenize=False, **kw)


CONVERSATIONS = {
    "user": [{"role": "user", "content": "  hi \n"}],
    "one-system": [{"role": "system", "content": " Be brief. \n"}, {"role": "user", "content": "hi"}],
    "empty-system": [{"role": "system", "content": ""}, {"role": "user", "content": "hi"}],
    "two-systems": SYSTEMS + [{"role": "user", "content": "Where is order 7?"}],
    "content-parts": [{"role": "system", "content": [{"type": "text", "text": "sys "}, {"type": "text", "text": "parts"}]},
                      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]}],
    "reasoning-field": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "answer 1", "reasoning_content": "old"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "\n answer 2 ", "reasoning_content": "\n\nnew\n thought \n\n"},
    ],
    "think-in-content": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "<think>\nold\n</think>\n\nanswer 1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "prefix <think>\n\nnew\n</think>\n\n\nanswer 2"},
    ],
    "reasoning-field-beats-think-tags": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>kept</think> text", "reasoning_content": "field"},
    ],
    "last-answer-without-reasoning": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    "tool-loop": SYSTEMS + [
        {"role": "user", "content": "Where is order 7?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.", "tool_calls": [call("get_order", {"order_id": 7})]},
        {"role": "tool", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Checking both.", "reasoning_content": "Two more.", "tool_calls": [
            call("get_order", RICH_ARGS),
            call("update_order", json.dumps(RICH_ARGS)),
            call("update_order", json.dumps(RICH_ARGS, ensure_ascii=False, indent=2)),
            {"name": "note", "arguments": {"text": "flat call ☃"}},  # no "function" wrapper
            call("note", "{}"),
        ]},
        {"role": "tool", "content": "a"}, {"role": "tool", "content": " b \n"}, {"role": "tool", "content": None},
        {"role": "assistant", "content": "<think>\nDone.\n</think>\n\nShipped.", "tool_calls": []},
    ],
    "calls-without-content": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call("note", {"text": "x"}), call("note", {"text": "y"})]},
        {"role": "tool", "content": "ok"},
    ],
    "tool-response-as-user": [  # the wrapped user message is no query: reasoning after it is kept
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "r1", "tool_calls": [call("note", {"text": "x"})]},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "done", "reasoning_content": "r2"},
        {"role": "user", "content": "<tool_response>\nnot wrapped</tool_response> tail"},
        {"role": "assistant", "content": "again", "reasoning_content": "r3"},
    ],
    "json-string-arguments": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("f", '{"a": 1, "b": {"x": 1, "y": 2, "x": [3]}, "a": " s "}'),  # repeated keys: json.loads keeps the last
            call("f", ' {"e": "\\u00e9\\ud83d\\ude00\\ud83d\\u0041 \\"q\\" \\\\ \\/ \\b\\f\\n\\r\\t", "n": -0.0, "m": 1E400,'
                      ' "k": [NaN, -Infinity, 1e5, 10, -0, true, false, null, [], {}], "z": 12345678901234567890}\n'),
        ]},
    ],
}
GEN = [(False, True), (True, True), (True, False)]


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no-tools", "tools"])
@pytest.mark.parametrize("gen,thinking", GEN, ids=["no-prompt", "prompt-thinking", "prompt-no-thinking"])
def test_template_renders_what_tb_render_renders(tok, name, tools, gen, thinking):
    msgs = CONVERSATIONS[name]
    ours = render(msgs, family="xml", tools=tools, add_generation_prompt=gen, enable_thinking=thinking)
    assert template(tok, msgs, tools, add_generation_prompt=gen, enable_thinking=thinking) == ours


def test_the_saved_tokenizer_carries_the_template_file(tok):
    assert tok.chat_template == QWEN3_5_TEMPLATE.read_text(encoding="utf-8")


def test_thinking_is_on_unless_turned_off(tok):
    msgs = CONVERSATIONS["two-systems"]
    assert template(tok, msgs, TOOLS, add_generation_prompt=True) == render(msgs, family="xml", tools=TOOLS,
                                                                            add_generation_prompt=True)
    assert template(tok, msgs, add_generation_prompt=True).endswith("<|im_start|>assistant\n<think>\n")


def test_a_later_system_message_is_refused_by_both(tok):
    msgs = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}, {"role": "system", "content": "c"}]
    with pytest.raises(ValueError, match="system message only at the beginning"):
        render(msgs, family="xml")
    with pytest.raises(TemplateError, match="system message only at the beginning"):
        template(tok, msgs)
    with pytest.raises(TemplateError, match="must be a JSON object"):
        template(tok, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call("f", "[1]")]}])


def test_token_ids_equal_encoding_the_rendered_text(tok):
    msgs = CONVERSATIONS["tool-loop"]
    for gen, thinking in GEN:
        ids = tok.apply_chat_template(msgs, tools=TOOLS, add_generation_prompt=gen, enable_thinking=thinking,
                                      tokenize=True, return_dict=False)
        text = render(msgs, family="xml", tools=TOOLS, add_generation_prompt=gen, enable_thinking=thinking)
        assert ids == tok.encode(text, add_special_tokens=False)
    assert tok.convert_tokens_to_ids("<|im_end|>") in ids and tok.convert_tokens_to_ids("<tool_call>") in ids


# ------------------------------------------------------------------ generated conversations

PIECES = ["<think>", "</think>", "<tool_response>", "</tool_response>", "\n", "\n\n", " ", "é", "😀", "<", "&", "{", '"']
free_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=6).map("".join)
text = st.one_of(safe_text, free_text)
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8)
param_name = st.text(alphabet="abcxyz_", min_size=1, max_size=5)
arguments = st.one_of(values, st.dictionaries(param_name, json_value, max_size=4))
dumps = st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 1}, {"separators": (",", ":")}])
tool_call = st.builds(lambda name, args, as_json, kw: call(name, json.dumps(args, **kw) if as_json else args),
                      st.sampled_from(["f", "g", "get_order"]), arguments, st.booleans(), dumps)


@st.composite
def turn(draw):
    kind = draw(st.sampled_from(["user", "wrapped-user", "assistant", "tools"]))
    if kind == "user":
        return [{"role": "user", "content": draw(text)}]
    if kind == "wrapped-user":
        return [{"role": "user", "content": f"<tool_response>{draw(text)}</tool_response>"}]
    if kind == "tools":
        return [{"role": "tool", "content": draw(text)} for _ in range(draw(st.integers(1, 3)))]
    m = {"role": "assistant", "content": draw(text), "tool_calls": draw(st.lists(tool_call, max_size=3))}
    how = draw(st.sampled_from(["field", "tags", "none"]))
    if how == "field":
        m["reasoning_content"] = draw(text)
    elif how == "tags":
        m["content"] = f"<think>{draw(text)}</think>{m['content']}"
    return [m]


conversation = st.builds(lambda systems, turns: systems + [m for t in turns for m in t],
                         st.lists(st.builds(lambda c: {"role": "system", "content": c}, text), max_size=2),
                         st.lists(turn(), min_size=1, max_size=5))


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(conversation, st.booleans(), st.sampled_from(GEN))
def test_generated_conversations_render_alike(tok, msgs, with_tools, gen_thinking):
    gen, thinking = gen_thinking
    tools = TOOLS if with_tools else None
    ours = render(msgs, family="xml", tools=tools, add_generation_prompt=gen, enable_thinking=thinking)
    assert template(tok, msgs, tools, add_generation_prompt=gen, enable_thinking=thinking) == ours
