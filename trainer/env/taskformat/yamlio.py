"""YAML for the task loader: each document parsed once, with the line marks errors need.

`load(text, marks)` returns `(yaml.safe_load(text), marks(node))` from one parse. The node tree
is composed by libyaml (`yaml.CSafeLoader`, ~10x faster than PyYAML's pure-Python scanner) when
PyYAML has it; `marks` reads line numbers off the tree before construction (constructing a
mapping flattens its `<<` merges in place); then the value is built from the same tree.

Values and errors are the pure-Python `yaml.SafeLoader`'s, exactly:
- Both loaders share the Python resolver and SafeConstructor, so tags and values agree (YAML 1.1
  booleans, dates and timestamps, `<<` merges, last-wins duplicate keys, anchors).
- Where the two scanners part ways, the pure-Python loader decides. A text libyaml rejects, or
  one holding what libyaml reads more laxly or differently (a tab, a BOM, \\r or a Unicode line
  break, a character PyYAML's reader refuses, a directive, `#` right after a block-scalar header,
  a bare `!` tag, a plain scalar with `?` inside a flow collection), is parsed again by
  `yaml.SafeLoader`, which raises its own `yaml.YAMLError` (message and marks as ever) or
  returns its own value.

A document of plain mappings, sequences and scalars (a task file, short of `<<` merges) is built
in one recursive pass, ~3x faster than SafeConstructor's generator machinery, with the same
result; anything else (a merge, an explicit tag, a recursive alias, a failing scalar) is left to
SafeConstructor.
"""

from __future__ import annotations

import re
from typing import Any, Callable, TypeVar

import yaml
from yaml.constructor import SafeConstructor

M = TypeVar("M")
LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # absent when PyYAML lacks libyaml
_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ = _TAG + "str", _TAG + "map", _TAG + "seq"
_SCALARS = {_TAG + t: SafeConstructor.yaml_constructors[_TAG + t] for t in ("null", "bool", "int", "float", "timestamp")}
_LAX_CHARS = "\t\r\x85\u2028\u2029\ufeff"
_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*#")
_BARE_TAG = re.compile(r"!(?![^\s\]},])")  # `!` before a blank, a flow end or the end; see _scanners_may_differ
_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE


class _Unusual(Exception):
    """The one-pass constructor does not cover this document; SafeConstructor does."""


class _LibyamlOnly(Exception):
    """libyaml accepted a text that PyYAML's scanner refuses."""


def no_marks(node: yaml.Node | None) -> None:
    return None


def key_lines(node: yaml.Node | None, first_line: int = 1) -> dict[str, int]:
    """For a mapping node: each scalar key's line (`first_line` for the text's first line).
    Other keys never construct (PyYAML cannot hash them), so they need no line."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): first_line + k.start_mark.line for k, _ in node.value if isinstance(k, yaml.ScalarNode)}


def _scanners_may_differ(text: str) -> bool:
    """Whether `text` holds something libyaml reads more laxly or otherwise than PyYAML's scanner
    (found by differential fuzzing; tests/test_yaml_load.py keeps the fuzzing)."""
    return (any(c in text for c in _LAX_CHARS) or text.startswith("%") or "\n%" in text
            or ("#" in text and _HEADER_COMMENT.search(text) is not None)
            or any(m.start() == 0 or text[m.start() - 1] in " \n[{," for m in _BARE_TAG.finditer(text))
            or _NON_PRINTABLE.search(text) is not None)


def _libyaml_only(node: yaml.Node, in_flow: bool) -> bool:
    """A plain scalar with `?` in a flow collection: libyaml reads `{url: a?b=1}`, PyYAML's
    scanner ends plain scalars at `?` in flow context and fails."""
    return in_flow and isinstance(node, yaml.ScalarNode) and not node.style and "?" in node.value


def _construct(constructor: SafeConstructor, root: yaml.Node, libyaml: bool) -> Any:
    """SafeConstructor's value of a document of plain mappings, sequences and scalars, in one
    recursive pass (an alias yields the very object its anchor built, as there). Raises
    `_Unusual` for any other document and, for a libyaml tree, `_LibyamlOnly` (see `_libyaml_only`)."""
    memo: dict[int, Any] = {}
    building = object()

    def build(node: yaml.Node, in_flow: bool) -> Any:
        if in_flow and _libyaml_only(node, True):
            raise _LibyamlOnly
        tag = node.tag
        if tag == _STR and isinstance(node, yaml.ScalarNode):
            return node.value
        value = memo.get(id(node), memo)
        if value is building:
            raise _Unusual  # a recursive alias: SafeConstructor's two-step construction handles it
        if value is not memo:
            return value
        memo[id(node)] = building
        if tag == _MAP and isinstance(node, yaml.MappingNode):
            value = {}
            for k, v in node.value:
                if not (isinstance(k, yaml.ScalarNode) and (k.tag == _STR or k.tag in _SCALARS)):
                    raise _Unusual  # `<<`, `=`, a tagged or an unhashable key
                value[build(k, libyaml and node.flow_style)] = build(v, libyaml and node.flow_style)
        elif tag == _SEQ and isinstance(node, yaml.SequenceNode):
            value = [build(n, libyaml and node.flow_style) for n in node.value]
        elif tag in _SCALARS and isinstance(node, yaml.ScalarNode):
            value = _SCALARS[tag](constructor, node)
        else:
            raise _Unusual
        memo[id(node)] = value
        return value

    return build(root, False)


def _any_libyaml_only(root: yaml.Node) -> bool:
    """`_libyaml_only` anywhere in a libyaml tree (for documents `_construct` leaves to
    SafeConstructor). An alias inside a flow collection to a scalar written in block context
    counts too: then the pure-Python loader, which accepts it, just does the work."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode) or id(node) in seen:
            continue
        seen.add(id(node))
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        if any(_libyaml_only(n, node.flow_style) for n in children):
            return True
        stack += children
    return False


def load_with(loader: type, text: str, marks: Callable[[yaml.Node | None], M] = no_marks) -> tuple[Any, M]:
    """`(value, marks(node))` from one parse of `text` with `loader`; its errors propagate, and
    with libyaml `_LibyamlOnly` for a text it may accept where PyYAML's scanner fails."""
    libyaml = loader is not yaml.SafeLoader
    parser = loader(text)
    try:
        node = parser.get_single_node()
        found = marks(node)
        if node is None:
            return None, found
        try:
            return _construct(parser, node, libyaml), found
        except _LibyamlOnly:
            raise
        except Exception:  # _Unusual, or an error SafeConstructor is to raise in its own order
            if libyaml and _any_libyaml_only(node):
                raise _LibyamlOnly from None
            return parser.construct_document(node), found
    finally:
        parser.dispose()


def load(text: str, marks: Callable[[yaml.Node | None], M] = no_marks) -> tuple[Any, M]:
    """`(yaml.safe_load(text), marks(node))`, parsing once; raises `yaml.YAMLError` where
    `yaml.safe_load` would, with the same message, and also (naming the line) where it raises a
    bare ValueError for a scalar such as `2025-02-30`."""
    try:
        if LOADER is not yaml.SafeLoader and not _scanners_may_differ(text):
            try:
                return load_with(LOADER, text, marks)
            except (yaml.YAMLError, _LibyamlOnly):
                pass  # the pure-Python loader reports (or accepts) it its own way
        return load_with(yaml.SafeLoader, text, marks)
    except (ValueError, OverflowError) as e:  # SafeConstructor's own, on e.g. `due: 2025-02-30`
        raise _scalar_error(text, e) from e  # the cause kept: what PyYAML raised


def _scalar_error(text: str, err: Exception) -> yaml.YAMLError:
    """A scalar that resolves to a date or a number but is none, as a `yaml.YAMLError` marking
    that scalar's line (PyYAML raises a bare ValueError without one)."""
    stack = [yaml.compose(text, Loader=yaml.SafeLoader)]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode) and node.tag in _SCALARS:
            try:
                _SCALARS[node.tag](SafeConstructor(), node)
            except (ValueError, OverflowError) as e:
                return yaml.constructor.ConstructorError(
                    None, None, f"{node.value!r} is not a valid {node.tag.rsplit(':', 1)[-1]} ({e}); quote it "
                    "to keep it a string", node.start_mark)
        elif isinstance(node, yaml.MappingNode):
            stack += [x for pair in reversed(node.value) for x in reversed(pair)]
        elif isinstance(node, yaml.SequenceNode):
            stack += reversed(node.value)
    return yaml.YAMLError(f"cannot read the YAML: {err}")


__all__ = ["LOADER", "key_lines", "load", "load_with", "no_marks"]
