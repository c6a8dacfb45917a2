"""Adversarial model outputs: what a policy may write to break a run instead of being scored.

`generate(n, seed=..., family=..., names=...)` returns `n` (kind, text) pairs, deterministic per
seed, mixing: lone surrogates in the text and as JSON escapes in call arguments, JSON and XML
values nested up to 10,000 levels (closed and truncated), outputs of about 1 MB (one in
`big_every`: a long content, one huge value, thousands of calls, a long reasoning), markup soup
(random runs of the reserved tags, braces, quotes and white space), control and bidi characters,
``<`` followed by long runs of spaces, empty and reasoning-only turns, names with markup, and
well-formed calls of the given tool names in between. `bench/adversarial.py` plays 10,000 of
them through real episodes; tests/test_faults.py a few hundred. Each one must be parsed or
rejected with a message to the agent, and the episode scored (docs/interpret.md, "Robustness").
"""

from __future__ import annotations

import json
import random
from typing import Sequence

from trainer.core.tb_render import DEFAULT_FAMILY, Family

MB = 1 << 20
DEPTHS = (10, 63, 64, 65, 100, 499, 500, 1000, 2000, 5000, 10000)
TAGS = ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<think>",
        "</think>", "<|im_end|>", "<|im_start|>", "< /parameter>", "<\t/tool_call >", "{", "}", "[", "]", '"', "'",
        ":", ",", "\n", " ", "\\", "\\u", "null", "NaN", "1e999", ">", "<", "=", "\x00")
ODD = ("\x00", "\x07", "\x1b[31m", "\u2028", "\u2029", "\ufeff", "\u202e", "\u200b", "\ud800", "\udfff",
       "\udc80\udc81", "\U0001f600", "\r\n", "\t", "\x7f", "\ufffd")


def _hermes(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {args}}}\n</tool_call>'


def _xml(name: str, params: dict[str, str]) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def _call(family: Family, name: str, args: dict) -> str:
    if family == "hermes":
        return _hermes(name, json.dumps(args))
    return _xml(name, {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()})


def _nested(depth: int, closed: bool, rnd: random.Random) -> str:
    opens = "".join(rnd.choice(('{"a":', "[")) for _ in range(depth))
    if not closed:
        return opens
    closes = "".join("}" if o == "{" else "]" for o in reversed([c[0] for c in _chunks(opens)]))
    return opens + "1" + closes


def _chunks(opens: str) -> list[str]:
    out, i = [], 0
    while i < len(opens):
        if opens[i] == "[":
            out.append("[")
            i += 1
        else:
            out.append(opens[i:i + 5])
            i += 5
    return out


def _soup(rnd: random.Random, size: int) -> str:
    parts, n = [], 0
    while n < size:
        p = rnd.choice(TAGS) if rnd.random() < 0.6 else rnd.choice(("x", "find_member", "42", "a b", rnd.choice(ODD)))
        parts.append(p)
        n += len(p)
    return "".join(parts)


def _think(rnd: random.Random, body: str) -> str:
    r = rnd.random()
    if r < 0.6:
        return f"<think>\nplan\n</think>\n\n{body}"
    if r < 0.8:
        return body  # no think block: with thinking on, all of it is reasoning
    return f"</think>{body}" if r < 0.9 else f"<think><think>\n{body}\n</think></think>"


def one(kind: str, rnd: random.Random, family: Family, names: Sequence[str], *, big: bool) -> str:
    name = rnd.choice(list(names))
    size = MB if big else rnd.choice((64, 512, 4096))
    if kind == "surrogate_text":
        text = "I will help " + rnd.choice(("\ud800", "\udfff", "\ud83d", "\ude00")) + " you"
        return _think(rnd, text + ("\n" + _call(family, name, {"email": "a\ud800@x.org"}) if rnd.random() < 0.5 else ""))
    if kind == "surrogate_json":
        esc = rnd.choice(("\\ud800", "\\udfff", "\\ud83d", "\\ude00x", "\\ud800\\ud800"))
        key = rnd.random() < 0.3
        args = f'{{"{esc if key else "email"}": "{"ok" if key else esc}"}}'
        if family == "hermes":
            return _think(rnd, _hermes(esc if rnd.random() < 0.2 else name, args))
        return _think(rnd, _xml(name, {"email": args}))
    if kind in ("deep_json", "deep_json_truncated"):
        depth = 10000 if big else rnd.choice(DEPTHS)
        value = _nested(depth, kind == "deep_json", rnd)
        if family == "hermes":
            text = _hermes(name, f'{{"filter": {value}}}') if kind == "deep_json" else f'<tool_call>\n{{"name": "{name}", "arguments": {{"x": {value}'
        else:
            text = _xml(name, {"filter": value}) if kind == "deep_json" else f"<tool_call>\n<function={name}>\n<parameter=filter>\n{value}"
        return _think(rnd, text)
    if kind == "huge_content":
        return _think(rnd, ("All good. " * (size // 10 + 1))[:size] + rnd.choice(("", " <DONE>")))
    if kind == "huge_value":
        return _think(rnd, _call(family, name, {"email": "x" * size, "note": rnd.choice(ODD) * 3}))
    if kind == "many_calls":
        one_call = _call(family, name, {"email": "a@x.org"})
        return _think(rnd, "\n".join([one_call] * max(2, size // len(one_call))))
    if kind == "huge_think":
        return f"<think>\n{'hmm ' * (size // 4)}\n</think>\n\n" + rnd.choice(("", "ok <DONE>", _call(family, name, {})))
    if kind == "markup_soup":
        return _soup(rnd, size)
    if kind == "control_chars":
        return _think(rnd, "".join(rnd.choice(ODD) + "text" for _ in range(rnd.randint(1, 30)))
                      + (_call(family, name + rnd.choice(ODD), {"email": rnd.choice(ODD)}) if rnd.random() < 0.5 else ""))
    if kind == "spaces_lt":
        n = size if big else rnd.choice((1000, 20000, 60000))
        pad = "<" + " " * n
        return _think(rnd, _call(family, name, {"email": pad + "/parameter x"}) if rnd.random() < 0.5 else pad * 3)
    if kind == "empty":
        return rnd.choice(("", " ", "\n\n", "<think>\n\n</think>\n\n", "<think>", "</think>", "<think>\nonly thinking"))
    if kind == "bad_names":
        bad = rnd.choice((f"{name} ", f" {name}", f"{name}<x>", f"{name}=1", "", "\u202e" + name, name * 200,
                          f"{name}</function>", "tool_call"))
        if family == "hermes":
            return _think(rnd, _hermes(bad, "{}"))
        return _think(rnd, f"<tool_call>\n<function={bad}>\n<parameter={bad}>\nv\n</parameter>\n</function>\n</tool_call>")
    # mixed_valid: a well-formed call, sometimes followed by garbage or in the other family's markup
    call = _call(family if rnd.random() < 0.8 else ("xml" if family == "hermes" else "hermes"), name,
                 {"email": "ada@example.org"})
    return _think(rnd, call + rnd.choice(("", "\n" + _soup(rnd, 40), " trailing text", "\n" + call)))


KINDS = ("surrogate_text", "surrogate_json", "deep_json", "deep_json_truncated", "huge_content", "huge_value",
         "many_calls", "huge_think", "markup_soup", "control_chars", "spaces_lt", "empty", "bad_names",
         "mixed_valid")
BIG_KINDS = ("huge_content", "huge_value", "many_calls", "huge_think", "markup_soup", "spaces_lt", "deep_json")


def generate(n: int, *, seed: int = 0, family: Family = DEFAULT_FAMILY, names: Sequence[str] = ("find_member",),
             big_every: int = 100) -> list[tuple[str, str]]:
    """`n` (kind, text) adversarial outputs (module docstring); one in `big_every` is about 1 MB
    (0: none)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        big = bool(big_every) and i % big_every == big_every - 1
        kind = BIG_KINDS[(i // max(big_every, 1)) % len(BIG_KINDS)] if big else KINDS[i % len(KINDS)]
        out.append((kind, one(kind, rnd, family, names, big=big)))
    return out


__all__ = ["BIG_KINDS", "DEPTHS", "KINDS", "generate", "one"]
