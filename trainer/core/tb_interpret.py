"""tb_interpret: the one interpreter of model output, shared by training, evaluation and serving.

A completion of a Qwen model (text, or the token ids it generated) is read into a `Completion`:
reasoning, content, tool calls with arguments typed by the tool's JSON schema, and how the turn
finished. Two tool-call formats exist, chosen per model family in config:

- ``hermes`` (Qwen3, Qwen3-2507): ``<tool_call>\\n{"name": N, "arguments": {...}}\\n</tool_call>``
- ``xml`` (Qwen3-Coder, Qwen3.5+, vLLM's ``qwen3_xml``):
  ``<tool_call>\\n<function=N>\\n<parameter=P>\\nV\\n</parameter>\\n</function>\\n</tool_call>``

Rendering (messages -> Qwen chat text) and token deltas for training live in `tb_render` and are
re-exported here, so this module is the single entry point.

Reasoning. With thinking on, an optional leading ``<think>`` is dropped, text up to the first
``</think>`` is reasoning (``\\n`` stripped each side, as the chat template writes it) and the rest
is content (leading ``\\n`` stripped). No ``</think>`` means the turn was cut inside its reasoning:
all of it is reasoning. With thinking off there is no reasoning.

Argument typing (XML values are strings; the rules of the locked vLLM, 0.27.1):
one ``\\n`` is stripped each side of a value; the schema's types (``type``, list of types,
``enum`` values, ``anyOf``/``oneOf``/``allOf``, aliases such as ``int``/``bool``) are tried in the
order null (the literal ``null``, any case) -> integer (``int()``) -> number (finite ``float()``,
integral values become int) -> boolean (``true``/``1``, ``false``/``0``, any case) ->
object/array (``json.loads``, finite) -> string (the raw value). When no listed type accepts the
value, a finite ``json.loads`` of it is used, else the raw string. A parameter without a schema
stays a string. Hermes arguments are JSON already and are not coerced.

Written policies (each tested; docs/interpret.md). The rule behind them: never more lenient than
vLLM 0.27.1's parsers — each call executed here is executed there, in order, with the same name and
typed arguments (`parity` checks it); where the two would differ the call is rejected and the agent
told why:
- one cut-off, malformed or wrongly formatted call makes none of the turn's calls run;
- a ``<tool_call>`` inside the reasoning makes none of the turn's calls run;
- hermes: a call ends at the first ``</tool_call>``; its body is one strict JSON object (no
  ``NaN``/``Infinity``/``1e999``) with a string ``name`` and an object ``arguments``;
- xml: only the template's layout runs (no bare ``<function=``, no spaces or markup in names, no
  text outside parameters, one function per ``<tool_call>``, no parameter twice);
- reserved markup (``<tool_call>``, ``<function=``, ``<parameter=``, ``<think>`` and their closing
  or spaced forms) is never an argument value;
- Python spellings are read as vLLM reads them: ``True``/``False`` are booleans, ``None`` is the
  string ``"None"`` (the agent is told to write null when that fails validation), ``{'a': 1}``
  stays a string;
- an unknown tool, an unknown parameter, a missing required one or a schema violation is not
  executed: the agent is told the tool list or the validation error;
- text between and after calls is content (segments joined by ``\n``); several calls are kept in
  order and run sequentially by the caller.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Literal, Mapping, Sequence

from jsonschema import validators

from trainer.core.tb_values import (  # noqa: F401  (MAX_DEPTH, valid_unicode: re-exported)
    MAX_DEPTH, REPLACEMENT, SURROGATE, TooDeep, coerce, finite_json, lone_surrogate, schema_types, trim_newline,
    valid_unicode,
)
from trainer.core.tb_render import (  # noqa: F401  (FAMILIES, STOP_TOKENS, render, ...: re-exported)
    DEFAULT_FAMILY, FAMILIES, STOP_TOKENS, Family, InterpretError, TokenTrajectory, check_family, merge_system, render,
    turn_ended, turn_text,
)

Finish = Literal["stop", "tool_calls", "length"]
CallProblem = Literal["truncated", "malformed", "unknown_tool", "invalid_arguments", "wrong_format"]

MAX_CALLS = 64  # tool calls read in one turn; a turn with more runs none of them

THINK_START, THINK_END = "<think>", "</think>"
CALL_START, CALL_END = "<tool_call>", "</tool_call>"
FUNC_START, FUNC_END = "<function=", "</function>"
PARAM_START, PARAM_END = "<parameter=", "</parameter>"


@dataclass(frozen=True)
class Tool:
    """One callable tool: its name and the JSON schema of its arguments."""

    name: str
    parameters: Mapping[str, Any]
    validator: Any = field(repr=False, compare=False)

    @property
    def properties(self) -> Mapping[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, Mapping) else {}

    @cached_property
    def types(self) -> dict[str, set[str]]:
        """JSON types each parameter admits, computed once (typing runs for every value)."""
        return {k: schema_types(v) for k, v in self.properties.items()}


class Toolset:
    """The tools offered in one conversation, by name, with compiled schema validators.

    Accepts OpenAI-style entries (``{"type": "function", "function": {...}}``) or bare
    ``{"name", "parameters"}`` ones. Build it once per episode and reuse it for every turn.
    """

    def __init__(self, tools: Iterable[Mapping[str, Any]]):
        self.tools: dict[str, Tool] = {}
        for i, entry in enumerate(tools):
            spec = entry.get("function", entry) if isinstance(entry, Mapping) else None
            if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
                raise InterpretError(f"tool #{i}: expected an object with a string 'name', got {entry!r:.120}")
            params = spec.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(params, Mapping):
                raise InterpretError(f"tool {spec['name']!r}: 'parameters' must be a JSON schema object")
            cls = validators.validator_for(params)
            try:
                cls.check_schema(params)
            except Exception as e:  # jsonschema.SchemaError; message names the bad keyword
                raise InterpretError(f"tool {spec['name']!r}: invalid parameters schema: {e}") from None
            self.tools[spec["name"]] = Tool(spec["name"], params, cls(params))

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


@dataclass(frozen=True)
class ToolCall:
    """A call the model wrote. ``problem`` set means it must not run; ``message`` is then the
    text the agent is told instead of a tool result."""

    name: str
    arguments: dict[str, Any]
    problem: CallProblem | None = None
    message: str | None = None

    @property
    def executable(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Completion:
    """One assistant turn, interpreted."""

    reasoning: str | None
    content: str
    calls: tuple[ToolCall, ...]
    finish: Finish
    calls_in_reasoning: int = 0

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls to execute, in order."""
        return tuple(c for c in self.calls if c.executable)

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-style assistant message (executable calls only), e.g. for the history."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in self.tool_calls]
        return msg



# ---------------------------------------------------------------- validation

def _check(name: str, args: dict[str, Any], toolset: Toolset | None) -> ToolCall:
    """Validate a well-formed call against the offered tools."""
    if toolset is None:
        return ToolCall(name, args)
    tool = toolset.get(name)
    if tool is None:
        if SURROGATE.search(name):
            return _not_unicode(name, args)
        known = ", ".join(sorted(toolset.tools)) or "(none)"
        return ToolCall(name, args, "unknown_tool",
                        f"Error: tool '{name}' does not exist. Available tools: {known}.")
    props = tool.properties
    if lone_surrogate(args):
        return _not_unicode(name, args)
    # A parameter the schema does not declare is refused only where the schema forbids it
    # (`additionalProperties: false`); otherwise the call goes to the server, which decides.
    if tool.parameters.get("additionalProperties") is False and "patternProperties" not in tool.parameters:
        unknown = [k for k in args if k not in props]
        if unknown:
            return ToolCall(name, args, "invalid_arguments",
                            f"Error: tool '{name}' has no parameter(s) {', '.join(map(repr, unknown))}. "
                            f"Valid parameters: {', '.join(props) or '(none)'}.")
    try:
        err = next(iter(tool.validator.iter_errors(args)), None)
    except RecursionError:  # a schema that recurses on itself ($ref loops) over a deep value
        return ToolCall(name, args, "invalid_arguments",
                        f"Error: the arguments of tool '{name}' are nested too deeply to validate.")
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path)
        return ToolCall(name, args, "invalid_arguments",
                        f"Error: invalid arguments for tool '{name}'"
                        f"{f' at {where!r}' if where else ''}: {err.message}.")
    return ToolCall(name, args)


def _not_unicode(name: str, args: Any) -> ToolCall:
    """A call holding a lone surrogate (decoded from a JSON escape): not run; what it is kept as
    has U+FFFD in its place, so nothing downstream (a request, a record) meets text UTF-8 cannot
    encode."""
    return ToolCall(valid_unicode(name), _clean(args) if isinstance(args, dict) else {}, "invalid_arguments",
                    f"Error: the call to tool '{valid_unicode(name)}' holds text that is not valid Unicode "
                    "(an escaped lone surrogate such as \\ud800); it was not executed.")


def _clean(v: Any) -> Any:
    if isinstance(v, str):
        return valid_unicode(v)
    if isinstance(v, dict):
        return {valid_unicode(k) if isinstance(k, str) else k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _bad(name: str, problem: CallProblem, why: str) -> ToolCall:
    return ToolCall(name, {}, problem, f"Error: {why}")


# ---------------------------------------------------------------- the turn's calls, all or none

# Markup a value may not hold: the parsers under comparison read these tags (spaces allowed, as
# vLLM's parameter regex allows them) wherever they occur, and vLLM deletes a stray </think>.
_MARKUP = re.compile(r"<\s*(?:/\s*)?(?:tool_call|function|parameter|think)\b|<\|im_(?:start|end)\|>")
_STRUCTURAL = ("truncated", "malformed", "wrong_format")


def _markup_in(v: Any) -> str | None:
    """The first reserved tag inside a value (keys included), or None."""
    if isinstance(v, str):
        m = _MARKUP.search(v)
        return m.group() if m else None
    if isinstance(v, dict):
        return next((t for k, x in v.items() for t in (_markup_in(k), _markup_in(x)) if t), None)
    if isinstance(v, list):
        return next((t for x in v if (t := _markup_in(x))), None)
    return None


_TOO_MANY = (f"Error: this turn has more than {MAX_CALLS} tool calls, so none of them were executed. "
             f"Make at most {MAX_CALLS} calls in one turn.")


def _all_or_none(calls: list[ToolCall]) -> list[ToolCall]:
    """A turn with more than `MAX_CALLS` calls runs none of them (the scan stopped at the first one
    past the limit: the turn's calls are those `MAX_CALLS + 1`, each told why). A turn with a cut-off, malformed or wrongly formatted call runs none of its calls (vLLM's
    hermes parser runs none; its XML parser merges or guesses, which we never execute). The agent
    is told which call was bad, and that the others did not run either."""
    if len(calls) > MAX_CALLS:
        return [ToolCall(c.name, c.arguments, "malformed", _TOO_MANY) for c in calls]
    bad = next((i for i, c in enumerate(calls) if c.problem in _STRUCTURAL), None)
    if bad is None:
        return calls
    why = f"tool call #{bad + 1} of this turn could not be read, so none of the turn's calls were executed."
    return [c if c.problem is not None else
            ToolCall(c.name, c.arguments, "malformed", f"Error: {why} Write each call in full and call again.")
            for c in calls]


# ---------------------------------------------------------------- hermes (JSON) calls

_CUT = "the tool call was cut off before {}; it was not executed."


def _hermes_calls(text: str, toolset: Toolset | None) -> tuple[list[ToolCall], list[str]]:
    """Each ``<tool_call>`` runs to the first ``</tool_call>`` after it (as vLLM reads it: a
    ``</tool_call>`` inside a string ends the call there); none: cut off."""
    calls: list[ToolCall] = []
    segments: list[str] = []
    pos = 0
    while len(calls) <= MAX_CALLS and (start := text.find(CALL_START, pos)) != -1:
        segments.append(text[pos:start])
        body = start + len(CALL_START)
        close = text.find(CALL_END, body)
        if close == -1:
            calls.append(_bad(_name_of(_try_json(text[body:])), "truncated", _CUT.format("</tool_call>")))
            pos = len(text)
            break
        calls.append(_hermes_call(text[body:close].strip(" \t\n\r"), toolset))  # JSON whitespace only
        pos = close + len(CALL_END)
    segments.append(text[pos:])
    return _all_or_none(calls), segments


def _name_of(obj: Any) -> str:
    return obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else ""


def _hermes_call(raw: str, toolset: Toolset | None) -> ToolCall:
    if raw.startswith(FUNC_START):
        return _bad(_xml_name(raw), "wrong_format",
                    'tool calls must be JSON: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.')
    try:
        obj = finite_json(raw, MAX_DEPTH + 1)  # the call object around the arguments: one level more
    except TooDeep as e:
        return _bad("", "malformed", f"the tool call's arguments are {e}; it was not executed.")
    except ValueError as e:
        return _bad("", "malformed", f"the tool call is not valid JSON ({e}): {raw[:200]!r}.")
    if lone_surrogate(obj):  # checked first: every message below quotes the name
        return _not_unicode(_name_of(obj), obj.get("arguments") if isinstance(obj, dict) else {})
    name = _name_of(obj)
    if not name:
        return _bad("", "malformed", 'a tool call must be a JSON object with a string "name".')
    if not isinstance(obj.get("arguments"), dict):
        return _bad(name, "malformed", f'tool call \'{name}\' needs "arguments": a JSON object.')
    args = obj["arguments"]
    if (tag := _markup_in(args)) is not None:
        return ToolCall(name, args, "invalid_arguments",
                        f"Error: arguments of tool '{name}' contain the reserved markup {tag!r}; "
                        "it was not executed.")
    return _check(name, args, toolset)


# ---------------------------------------------------------------- xml calls

_XML_START = re.compile(r"<tool_call>|<function=")
_WS = re.compile(r"\s*")
_PARAM_OPEN = re.compile(r"<parameter=([^>\n]*)>")
_NAME = re.compile(r"[^\s<>=/]+")


def _xml_name(raw: str) -> str:
    m = re.match(r"<function=([^>\n]*)>", raw)
    return m.group(1).strip() if m else ""


def _xml_calls(text: str, toolset: Toolset | None) -> tuple[list[ToolCall], list[str]]:
    """Only the template's layout runs: ``<tool_call>`` (whitespace) ``<function=NAME>`` parameters
    ``</function>`` (whitespace) ``</tool_call>``, one function per call. Anything else is
    rejected and the agent told why."""
    calls: list[ToolCall] = []
    segments: list[str] = []
    pos = 0
    while len(calls) <= MAX_CALLS and (m := _XML_START.search(text, pos)) is not None:
        segments.append(text[pos:m.start()])
        if m.group() == FUNC_START:  # no <tool_call> around it
            fend = text.find(FUNC_END, m.end())
            if fend == -1:
                calls.append(_bad(_xml_name(text[m.start():]), "truncated", _CUT.format("</function>")))
                pos = len(text)
                break
            calls.append(_bad(_xml_name(text[m.start():]), "malformed",
                              "<function=...> must be inside <tool_call></tool_call>; it was not executed."))
            pos = fend + len(FUNC_END)
            continue
        close = text.find(CALL_END, m.end())
        if close == -1:
            calls.append(_bad(_xml_name(text[m.end():].lstrip()), "truncated", _CUT.format("</tool_call>")))
            pos = len(text)
            break
        calls.append(_xml_call(text[m.end():close].strip(), toolset))
        pos = close + len(CALL_END)
    segments.append(text[pos:])
    return _all_or_none(calls), segments


def _try_json(raw: str) -> Any:
    """The JSON value of `raw`, or None (only a name is read from it: any depth is fine)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _xml_call(raw: str, toolset: Toolset | None) -> ToolCall:
    """One ``<tool_call>`` body (stripped)."""
    if not raw.startswith(FUNC_START):
        if raw.startswith("{"):
            return _bad(_name_of(_try_json(raw)), "wrong_format",
                        "tool calls must use <function=NAME><parameter=P>value</parameter></function> inside "
                        "<tool_call></tool_call>, not JSON.")
        return _bad("", "malformed", f"the tool call has no <function=NAME>: {raw[:200]!r}.")
    gt = raw.find(">")
    name = raw[len(FUNC_START):gt] if gt != -1 else ""
    if not _NAME.fullmatch(name):
        return _bad(name.strip(), "malformed", f"<function={name}> is not a function name (no spaces or "
                    "markup in it); write <function=NAME>.")
    if not raw.endswith(FUNC_END):
        return _bad(name, "malformed", f"tool call '{name}' must end with </function> right before </tool_call>.")
    body = raw[gt + 1:-len(FUNC_END)]
    tool = toolset.get(name) if toolset is not None else None
    types = tool.types if tool is not None else {}
    args: dict[str, Any] = {}
    pos = _WS.match(body).end()
    while pos < len(body):
        p = _PARAM_OPEN.match(body, pos)
        if p is None:
            return _bad(name, "malformed", f"tool call '{name}' has text outside its parameters: "
                        f"{body[pos:pos + 80]!r}; write <parameter=P>value</parameter> only.")
        pname = p.group(1)
        end = body.find(PARAM_END, p.end())
        if not _NAME.fullmatch(pname):
            return _bad(name, "malformed", f"<parameter={pname}> is not a parameter name (no spaces or markup in it).")
        if end == -1:
            return _bad(name, "malformed", f"parameter '{pname}' of tool '{name}' is missing </parameter>.")
        value = trim_newline(body[p.end():end])
        if (tag := _MARKUP.search(value)) is not None:
            why = ("is missing </parameter>" if tag.group().replace(" ", "").startswith("<parameter")
                   else f"contains the reserved markup {tag.group()!r}")
            return _bad(name, "malformed", f"the value of parameter '{pname}' of tool '{name}' {why}.")
        if pname in args:
            return ToolCall(name, args, "invalid_arguments", f"Error: parameter '{pname}' of tool '{name}' is given twice.")
        try:
            args[pname] = coerce(value, types[pname]) if pname in types else value
        except TooDeep as e:
            return _bad(name, "invalid_arguments", f"the value of parameter '{pname}' of tool '{name}' is {e}; "
                        "it was not executed.")
        pos = _WS.match(body, end + len(PARAM_END)).end()
    call = _check(name, args, toolset)
    nones = [k for k, v in args.items() if v == "None" and "null" in types.get(k, ())]
    if call.problem == "invalid_arguments" and nones:  # Python's spelling; vLLM passes the string on
        return ToolCall(name, args, call.problem, f"{call.message} Write null, not None, for "
                        f"{', '.join(map(repr, nones))}.")
    return call


# ---------------------------------------------------------------- reasoning and entry points

_IN_REASONING = ("Error: a <tool_call> was written inside the reasoning (before </think>), so none of this "
                 "turn's calls were executed. Close the reasoning with </think> first, then write the calls.")


def split_reasoning(text: str, thinking: bool) -> tuple[str | None, str]:
    """(reasoning, rest) by the rules in the module docstring."""
    if not thinking:
        return None, text
    s = text
    lead = len(s) - len(s.lstrip())
    if s.startswith(THINK_START, lead):
        s = s[lead + len(THINK_START):]
    end = s.find(THINK_END)
    if end == -1:
        return s.strip("\n"), ""
    return s[:end].strip("\n"), s[end + len(THINK_END):].lstrip("\n")


def parse(text: str, *, family: Family, tools: Toolset | Iterable[Mapping[str, Any]] | None = None,
          thinking: bool = True, finish: Literal["stop", "length"] = "stop",
          tool_choice: Literal["auto", "none"] = "auto") -> Completion:
    """Interpret the text of one assistant turn (without its ``<|im_end|>``).

    ``tools`` None parses calls without checking names or typing arguments (values stay strings);
    ``tool_choice="none"`` reads every call as plain content, as the request forbade calls.
    """
    check_family(family)
    toolset = tools if isinstance(tools, Toolset) or tools is None else Toolset(tools)
    text = valid_unicode(text)
    reasoning, rest = split_reasoning(text, thinking)
    in_reasoning = reasoning.count(CALL_START) if reasoning else 0
    if tool_choice == "none":
        return Completion(reasoning, rest.strip(), (), finish, in_reasoning)
    calls, segments = (_hermes_calls if family == "hermes" else _xml_calls)(rest, toolset)
    if in_reasoning:  # vLLM ends the reasoning at a <tool_call>: that call and all after it are read as
        # calls there, so running any of ours could run a different set of calls
        calls = [c if c.problem else ToolCall(c.name, c.arguments, "malformed", _IN_REASONING) for c in calls]
    content = "\n".join(s.strip() for s in segments if s.strip())
    if finish == "stop" and any(c.executable for c in calls):
        finish = "tool_calls"
    return Completion(reasoning, content, tuple(calls), finish, in_reasoning)


def parse_ids(ids: Sequence[int], tokenizer: Any, **kw: Any) -> Completion:
    """Training path: interpret generated token ids. A final stop token (`STOP_TOKENS`:
    ``<|im_end|>`` or ``<|endoftext|>``, the same definition `TokenTrajectory.add_turns` uses)
    means the turn ended; its absence means the length limit cut it.
    Decoding skips special tokens, as an OpenAI-compatible server does, so both paths read the
    same text."""
    finish: Literal["stop", "length"] = "stop" if turn_ended(ids, tokenizer) else "length"
    return parse(tokenizer.decode(list(ids), skip_special_tokens=True), finish=finish, **kw)


def response_text(response: Mapping[str, Any]) -> tuple[str, Literal["stop", "length"]]:
    """The text the model wrote, and how its turn finished, from an OpenAI chat-completion response
    (dict) of a server that runs no tool parser (a split-off reasoning is put back in front), or
    of our serving proxy (`tbt serve-proxy`), whose choices carry the raw text as `tb_text`."""
    try:
        choice = response["choices"][0]
        msg = choice["message"]
        msg.get
    except (KeyError, IndexError, TypeError, AttributeError):
        raise InterpretError("response has no choices[0].message") from None
    if isinstance(choice.get("tb_text"), str):  # our serving proxy: the model's raw text, read again here
        return choice["tb_text"], "length" if choice.get("finish_reason") == "length" else "stop"
    if msg.get("tool_calls"):
        raise InterpretError("the server parsed tool calls itself; turn its tool parser off so that "
                             "tb_interpret stays the only interpreter")
    finish: Literal["stop", "length"] = "length" if choice.get("finish_reason") == "length" else "stop"
    text = msg.get("content") or ""
    if not isinstance(text, str):
        raise InterpretError(f"response content is not text: {str(text)[:80]!r}")
    # the first of the two keys servers use that holds a value ("reasoning_content": null with
    # "reasoning": "..." is how some servers answer)
    split = next((msg[k] for k in ("reasoning_content", "reasoning") if msg.get(k) is not None), None)
    if split is not None:  # the server split reasoning: rebuild the text the model wrote
        if not isinstance(split, str):
            raise InterpretError(f"response reasoning is not text: {str(split)[:80]!r}")
        text = f"{THINK_START}\n{split}\n{THINK_END}\n\n{text}"
    return valid_unicode(text), finish


def parse_response(response: Mapping[str, Any], **kw: Any) -> Completion:
    """Evaluation path: interpret an OpenAI chat-completion response (dict) of a server that
    runs no tool or reasoning parser of its own."""
    text, finish = response_text(response)
    return parse(text, finish=finish, **kw)


__all__ = [
    "Completion", "ToolCall", "Tool", "Toolset", "InterpretError", "Family", "FAMILIES", "DEFAULT_FAMILY",
    "parse", "parse_ids", "parse_response", "response_text", "split_reasoning", "schema_types", "valid_unicode",
    "MAX_CALLS", "MAX_DEPTH",
    "render", "merge_system", "TokenTrajectory", "turn_text",
]
