"""The agent's view of its tools, as the request sends it (docs/episodes.md, "What the models are sent").

Two styles, one switch (`EpisodeConfig.agent_view`):

- `thinkingbox` (the default): what the ThinkingBox framework's own loop sends. The tools come
  in the servers' listing order (builtin tools first, then the task's servers in `world_state`
  order, each server's tools in its `list_tools` order, keeping those the scenario lists: the
  sandbox's `tool_order="servers"`). Each tool's parameters schema is the one the server declares
  with local `$ref`s resolved and `$defs` dropped, the `title` of the schema and of each of its
  properties removed, and `additionalProperties: false` set on the top-level object (whatever the
  server said). A builtin tool (the agent's own, no server's) keeps its schema as written, with
  `additionalProperties: false` added too. A chat endpoint is also sent `parallel_tool_calls: false` and the turn's room as
  `max_completion_tokens` (trainer/rollout/openai_policy.py).
- `plain`: the scenario's list order and the schemas exactly as the servers declare them; a chat
  endpoint gets `max_tokens` and no `parallel_tool_calls`.

What decides whether a call's arguments are acceptable is never this view: tb_interpret checks a
call against the schema the server declared (`validation_schemas`), so `additionalProperties:
false`, added here only for the model's eyes, does not make it refuse a parameter the server
would take (the framework passes such a call to the server, which decides).
"""

from __future__ import annotations

import copy
from typing import Any

STYLES = ("thinkingbox", "plain")


def check_style(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"agent view {style!r}: expected one of {', '.join(STYLES)}")
    return style


def tool_order(style: str) -> str:
    """The sandbox's `tool_order` of a style."""
    return "servers" if check_style(style) == "thinkingbox" else "scenario"


def _pointer(root: Any, ref: str) -> Any:
    """The node a local JSON pointer (`#/$defs/X`) names, or None."""
    if not ref.startswith("#/"):
        return None
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def resolve_refs(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(`schema` with every local `$ref` replaced by what it points at, whether all of them
    could be: a reference that is not local, dangles or is circular stays a `$ref`). The result
    is a new tree: every dict and list in it is built here (`schema` is left as it was)."""
    complete = True

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal complete
        if isinstance(node, list):
            return [walk(x, seen) for x in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _pointer(schema, ref)
            if target is None or ref in seen:
                complete = False
                return {k: v if k == "$ref" else walk(v, seen) for k, v in node.items()}
            return walk(target, (*seen, ref))
        return {k: walk(v, seen) for k, v in node.items()}

    return walk(schema, ()), complete


def framework_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A tool's parameters schema as the framework shows it to the agent (module docstring)."""
    out, complete = resolve_refs(schema or {"type": "object", "properties": {}})
    if complete:
        out.pop("$defs", None)
    out.pop("title", None)
    props = out.get("properties")
    if isinstance(props, dict):
        for prop in props.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    out["additionalProperties"] = False
    return out


def _entry(t: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                             "parameters": parameters}}


def tool_schemas(tools: list[dict[str, Any]], style: str = "thinkingbox") -> list[dict[str, Any]]:
    """The sandbox's tool view (`Sandbox.tools`) as the OpenAI function schemas the prompt renders
    and a chat endpoint is sent."""
    if check_style(style) == "plain":
        return validation_schemas(tools)
    return [_entry(t, _closed(t["input_schema"]) if t.get("builtin") else framework_schema(t["input_schema"]))
            for t in tools]


def _closed(schema: dict[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(schema or {"type": "object", "properties": {}})
    out["additionalProperties"] = False
    return out


def validation_schemas(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same tools with the schemas the servers declare: what tb_interpret checks calls against."""
    return [_entry(t, t["input_schema"]) for t in tools]


__all__ = ["STYLES", "check_style", "framework_schema", "resolve_refs", "tool_order", "tool_schemas",
           "validation_schemas"]
