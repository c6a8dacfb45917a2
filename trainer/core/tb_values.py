"""Values in model output: typing an XML parameter's text by its JSON schema, strict and bounded
JSON, and text that is not Unicode. Part of the interpreter (trainer/core/tb_interpret.py, whose
docstring states the rules: those of the locked vLLM, 0.27.1); nothing else imports it.

Bounds: a JSON value is at most `MAX_DEPTH` levels deep (`TooDeep` otherwise, never a
`RecursionError`); numbers are finite; a lone surrogate (U+D800..U+DFFF) in text is read as
`REPLACEMENT`, and one inside a decoded value is found (`lone_surrogate`) so the call is rejected.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

MAX_DEPTH = 64  # nesting of a call's arguments object (objects and arrays); deeper is rejected
REPLACEMENT = "\ufffd"  # what a lone surrogate in the text is read as

_TYPE_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
    "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer",
    "float": "number", "float32": "number", "float64": "number", "double": "number",
    "bool": "boolean", "dict": "object", "arr": "array", "list": "array", "sequence": "array",
}
_ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def schema_types(schema: Any) -> set[str]:
    """JSON types a schema admits: ``type`` (str or list), ``enum`` values, ``anyOf``/``oneOf``/
    ``allOf`` branches; ``{"string"}`` when nothing says otherwise."""
    if not isinstance(schema, Mapping):
        return {"string"}
    out: set[str] = set()
    t = schema.get("type")
    for x in [t] if isinstance(t, str) else (t if isinstance(t, list) else []):
        if isinstance(x, str):
            out.add(_TYPE_ALIASES.get(x.strip().lower(), x.strip().lower()))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for v in enum:
            out.add("null" if v is None else next((n for k, n in _ENUM_TYPES if isinstance(v, k)), "string"))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for branch in schema[key]:
                out |= schema_types(branch)
    return out or {"string"}


def _finite_float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):  # 1e999
        raise ValueError(f"number out of range: {s}")
    return f


def _no_constant(s: str) -> Any:
    raise ValueError(f"{s} is not a JSON value")  # NaN, Infinity, -Infinity


# json.loads that rejects non-finite numbers anywhere in the value, in the same pass
_decode = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant).decode
SURROGATE = re.compile("[\ud800-\udfff]")


class TooDeep(ValueError):
    """A JSON value nested deeper than `MAX_DEPTH` (or too deep for the decoder)."""


def finite_json(raw: str, limit: int = MAX_DEPTH) -> Any:
    """A strict, finite JSON value of at most `limit` levels; `ValueError` otherwise (`TooDeep` for
    nesting). Never a `RecursionError`: the decoder's is caught, and the depth of what it did
    decode is measured without recursion, so every later step (schema validation, the markup check,
    the record's encoding) sees a bounded value."""
    try:
        value = _decode(raw)
    except RecursionError:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(value, (dict, list)) and _depth_over(value, limit):
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        items = v.values() if isinstance(v, dict) else v
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return False


def lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone surrogate (an escape such as ``\\ud800``
    without its pair) in a key or string: text that is not Unicode, which no tool is given."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def valid_unicode(text: str) -> str:
    """`text` with every lone surrogate (a code point U+D800..U+DFFF, which UTF-8 cannot encode and
    no tokenizer decodes to) replaced by U+FFFD, as a UTF-8 decoder reads invalid bytes."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return SURROGATE.sub(REPLACEMENT, text)


def coerce(value: str, types: set[str]) -> Any:
    """An XML parameter's raw value typed by the schema's `types` (the rules in the module docstring)."""
    for t in ("null", "integer", "number", "boolean"):  # the order of the rules; then object/array, string
        if t not in types:
            continue
        if t == "null":
            if value.lower() == "null":
                return None
        elif t == "integer":
            try:
                return int(value)
            except ValueError:
                pass
        elif t == "number":
            try:
                f = float(value)
            except ValueError:
                continue
            if math.isfinite(f):
                return int(f) if f == int(f) else f
        else:
            low = value.strip().lower()
            if low in ("true", "1"):
                return True
            if low in ("false", "0"):
                return False
    if "string" in types and "object" not in types and "array" not in types:
        return value
    # object/array: a finite JSON value of any type (vLLM's rule); it failing, a string parameter
    # keeps the raw text. No type accepting the value: a finite JSON value, else the raw text. Both
    # read the same JSON, so it is parsed once.
    try:
        return finite_json(value, MAX_DEPTH - 1)  # inside the arguments object: one level down
    except TooDeep:
        raise  # the call is rejected (a string parameter never gets here)
    except ValueError:
        return value


def trim_newline(v: str) -> str:
    """`v` with one newline stripped each side (the template writes the value between newlines)."""
    if v.startswith("\n"):
        v = v[1:]
    return v[:-1] if v.endswith("\n") else v
