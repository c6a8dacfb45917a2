"""Hard model outputs for the parity gate: `tbt parity --generate N --seed S`.

Every record starts from a well-formed turn (optional reasoning, content, one to four calls with
arguments that satisfy their tool's schema, written the way the chat templates write them) and
then takes zero to three mutations, each aimed at a place where parsers disagree:

- ``truncate``: the text is cut at a tag boundary (just before, inside or after a tag) or at a
  random offset; the turn then finished by ``length``;
- ``drop_close`` / ``double_close``: one closing tag deleted or written twice;
- ``literal``: a whole value replaced by a literal JSON does not have or a template may write
  (``NaN``, ``-Infinity``, ``1e999``, ``None``, ``True``, ``'x'``);
- ``inject``: a literal (``NaN``, ``Infinity``, ``1e999``, ``None``, ``True``, ``null``) or a tag
  (``</tool_call>``, ``</think>``, ``<parameter=x>`` ...) written into an argument value;
- ``other_family``: one call written in the other family's markup;
- ``think``: a nested, doubled, missing or misplaced think block;
- ``tag_space``: whitespace inside a tag (``<function= name >``, ``<parameter= p >``, ``< tool_call>``);
- ``one_bad``: many calls, one of them broken (bad JSON, no name, a stray ``{``);
- ``python_repr``: XML values in Python's spelling (``True``, ``None``, ``{'a': 1}``).

Records have the `parity.Record` shape; the same seed gives the same records. Nothing here
reads model output: it only writes text for the parsers under comparison to read.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Callable

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "update_order", "parameters": {"type": "object", "properties": {
        "order_id": {"type": "integer"}, "note": {"type": "string"}, "urgent": {"type": "boolean"},
        "amount": {"type": "number"}, "limit": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "set_status", "parameters": {"type": "object", "properties": {
        "status": {"type": "string", "enum": ["open", "closed", "on_hold"]},
        "code": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "reason": {"type": ["string", "null"]}},
        "required": ["status"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "k": {"type": "integer"}, "free": {}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]

_WORDS = ["refund", "late", "box", "42", "null", "true", "1", "0", "None", "a b", "x\ny", " lead", "trail ",
          "{\"a\": 1}", "[1, 2]", "\"q\"", "é ü 中", "\\n", "<b>", "tab\there", "1.5", "-0", "1e3", ""]
_INJECT = ["NaN", "Infinity", "-Infinity", "1e999", "None", "True", "False", "null", "</tool_call>", "<tool_call>",
           "</think>", "<think>", "</parameter>", "<parameter=note>", "</function>", "<function=ping>",
           "< /parameter>", "\n", "{", "\"", "\\"]
_CLOSE_TAGS = ["</tool_call>", "</function>", "</parameter>", "</think>"]
_TAGS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<think>",
         "</think>", ">"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))


def _args(rng: random.Random, name: str) -> dict[str, Any]:
    """Arguments that satisfy the tool's schema."""
    if name == "update_order":
        out: dict[str, Any] = {"order_id": rng.choice([0, 1, 7, 123456, -3, 10**12])}
        pool: dict[str, Callable[[], Any]] = {
            "note": lambda: _text(rng), "urgent": lambda: rng.random() < 0.5,
            "amount": lambda: rng.choice([0.5, 2.0, 19.99, -1.25, 3, 1e-7]),
            "limit": lambda: rng.choice([None, 0, 5]), "tags": lambda: [_text(rng) for _ in range(rng.randint(0, 2))],
            "meta": lambda: {"k": _text(rng)}}
    elif name == "set_status":
        out = {"status": rng.choice(["open", "closed", "on_hold"])}
        pool = {"code": lambda: rng.choice([3, "A7", "12", "x"]), "reason": lambda: rng.choice([None, _text(rng)])}
    elif name == "search":
        out = {"query": _text(rng)}
        pool = {"k": lambda: rng.randint(0, 20), "free": lambda: rng.choice(["s", 3, True, None, [1], {"z": 1}])}
    else:
        return {}
    for key, make in pool.items():
        if rng.random() < 0.5:
            out[key] = make()
    return out


def hermes_call(name: str, args: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args}, ensure_ascii=False)}\n</tool_call>'


def xml_value(v: Any, python: bool = False) -> str:
    """A value as the Qwen3.5 template writes it (``python``: True/None as Python spells them)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (dict, list)):
        return repr(v) if python else json.dumps(v, ensure_ascii=False)
    if python:
        return str(v)
    return json.dumps(v)


def xml_call(name: str, args: dict[str, Any], python: bool = False) -> str:
    params = "".join(f"<parameter={k}>\n{xml_value(v, python)}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _turn(rng: random.Random, family: str, thinking: bool) -> tuple[str, list[tuple[str, dict]]]:
    calls = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3, 4])):
        name = rng.choice([t["function"]["name"] for t in TOOLS])
        calls.append((name, _args(rng, name)))
    write = hermes_call if family == "hermes" else xml_call
    parts = [rng.choice(["", "On it.", "Let me check.\n"])]
    for i, (name, args) in enumerate(calls):
        parts.append(("\n" if i or parts[0] else "") + write(name, args))
        if rng.random() < 0.15:
            parts.append(rng.choice(["\nthen", " and more text", "\n\n"]))
    body = "".join(parts)
    if thinking:
        body = f"{rng.choice(['', 'Think.', 'The user wants a refund.'])}\n</think>\n\n{body}"
        if rng.random() < 0.2:
            body = "<think>\n" + body
    return body, calls


def _tag_positions(text: str) -> list[int]:
    out = []
    for tag in _TAGS:
        i = text.find(tag)
        while i != -1:
            out += [i, i + 1, i + len(tag) // 2, i + len(tag)]
            i = text.find(tag, i + 1)
    return sorted(set(p for p in out if 0 < p < len(text)))


def _mutate(rng: random.Random, text: str, family: str, calls: list, kind: str) -> tuple[str, bool]:
    """One mutation; returns the new text and whether it cut the turn (finish ``length``)."""
    if kind == "truncate":
        cuts = _tag_positions(text) or [len(text)]
        return text[:rng.choice(cuts) if rng.random() < 0.8 else rng.randint(0, len(text))], True
    if kind in ("drop_close", "double_close"):
        tags = [t for t in _CLOSE_TAGS if t in text]
        if not tags:
            return text, False
        tag = rng.choice(tags)
        spots = [i for i in range(len(text)) if text.startswith(tag, i)]
        i = rng.choice(spots)
        return text[:i] + (tag * 2 if kind == "double_close" else "") + text[i + len(tag):], False
    if kind == "inject":
        # into a value (<|im_end|> is not among the literals: it is a stop token, never inside a turn): after an opening parameter tag or inside a JSON string
        marks = [i + 1 for i in range(len(text)) if text.startswith(">\n", i) and text.rfind("<parameter=", 0, i) > text.rfind("</parameter>", 0, i)]
        marks += [i + 1 for i in range(len(text)) if text.startswith(': "', i + 1)]
        lit = rng.choice(_INJECT)
        if not marks:
            return text + lit, False
        i = rng.choice(marks) + (1 if family == "hermes" else 0)
        return text[:i] + lit + text[i:], False
    if kind == "literal":
        lit = rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "None", "True", "'x'", "00", "1_000", "0x1F"])
        pat = r'(": )(-?\d+(?:\.\d+)?(?:e-?\d+)?|true|false|null)' if family == "hermes" else r"(>\n)([^<\n]*)(?=\n</parameter>)"
        spots = list(re.finditer(pat, text))
        if not spots:
            return text, False
        m = rng.choice(spots)
        return text[:m.start(2)] + lit + text[m.end(2):], False
    if kind == "other_family" and calls:
        name, args = rng.choice(calls)
        own, other = (hermes_call, xml_call) if family == "hermes" else (xml_call, hermes_call)
        return text.replace(own(name, args), other(name, args), 1), False
    if kind == "think":
        return rng.choice([
            lambda: "<think>\n<think>\n" + text, lambda: text.replace("</think>", "", 1),
            lambda: text.replace("</think>", "</think>\n</think>", 1), lambda: text + "\n</think>",
            lambda: "<think>x</think>\n" + text, lambda: text.replace("</think>", "<think>nested</think>\n</think>", 1),
            lambda: text.replace("<tool_call>", "</think>\n<tool_call>", 1),
            lambda: text.replace("\n</think>", "<tool_call>\n" + (hermes_call("ping", {}) if family == "hermes" else xml_call("ping", {}))[12:] + "\n</think>", 1),
        ])(), False
    if kind == "tag_space":
        old, new = rng.choice([("<function=", "<function= "), (">\n<parameter", " >\n<parameter"),
                               ("<parameter=", "<parameter= "), ("<parameter=", "< parameter="),
                               ("<tool_call>", "< tool_call>"), ("<tool_call>", "<tool_call >"),
                               ("</tool_call>", "</ tool_call>"), ("</parameter>", "</parameter >"),
                               ('"name": "', '"name": " '), ("</function>", "</function >")])
        return text.replace(old, new, rng.choice([1, -1])), False
    if kind == "one_bad":
        write = hermes_call if family == "hermes" else xml_call
        bad = rng.choice(['<tool_call>\n{"name": "ping", "arguments": {}\n</tool_call>',
                          '<tool_call>\n{"arguments": {}}\n</tool_call>', "<tool_call>\n{\n</tool_call>",
                          '<tool_call>\n{"name": "ping"}\n</tool_call>',
                          '<tool_call>\n{"name": "ping", "parameters": {}}\n</tool_call>',
                          "<tool_call>\n<function=ping>\n</tool_call>", "<tool_call>\n</tool_call>",
                          "<tool_call>\n<function=update_order>\n<parameter=order_id>\n1\n</function>\n</tool_call>",
                          '<tool_call>\n{"name": 5, "arguments": {}}\n</tool_call>',
                          '<tool_call>\n{"name": "ping", "arguments": "{}"}\n</tool_call>'])
        good = [write(n, a) for n, a in (calls or [("ping", {})])] * rng.randint(1, 2)
        good.insert(rng.randint(0, len(good)), bad)
        return text + "\n" + "\n".join(good), False
    if kind == "python_repr" and family == "xml" and calls:
        return text.replace(xml_call(*calls[0]), xml_call(*calls[0], python=True), 1), False
    return text, False


KINDS = ["truncate", "drop_close", "double_close", "literal", "inject", "other_family", "think", "tag_space", "one_bad",
         "python_repr"]


def generate(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` records (`parity.Record` fields), half per family, reproducible from ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        family = ("hermes", "xml")[i % 2]
        thinking = rng.random() < 0.8
        text, calls = _turn(rng, family, thinking)
        cut = False
        kinds = rng.sample(KINDS, rng.choice([0, 1, 1, 2, 3]))
        for kind in kinds:
            if not cut:  # nothing is written after a cut
                text, cut = _mutate(rng, text, family, calls, kind)
        out.append({"id": f"gen-{seed}-{i}-{family}-{'+'.join(kinds) or 'clean'}", "family": family,
                    "tools": TOOLS, "text": text, "thinking": thinking, "finish": "length" if cut else "stop",
                    "tool_choice": "auto"})
    return out
