"""An episode's messages as a test sees them: the ThinkingBox framework's chat types, our code.

The framework records an episode as a list of typed messages (docs/tasks.md, "What a test function
receives"):

    Text              system, user or assistant text; `metadata["tag"] == "think"` marks
                      reasoning the user never sees (`is_visible` is False)
    ParallelToolCall  one assistant step: the `ToolCall`s it made together (often one)
    ToolCall          tool name, decoded JSON arguments, call id
    ToolResponse      a tool's answer as the agent saw it, matched to its call by `id`

`TestContext.messages` holds these and `TestContext.tool_calls` holds `ToolCallResponse`s, so a
test written for the framework (`isinstance(m, Text)`, `x.tool_calls[0].tool_response.content`)
means the same here; test files import the names from `thinkingbox.common.chat_types`
(`trainer.env.grading.tb_shim`). Shapes follow the framework's models: keyword construction with the
same defaults, unknown keywords ignored, `T` naming the type when serialized. They are plain
dataclasses, so `dataclasses.asdict` serializes them and `as_messages` reads them back.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

TextMessageTag = Literal["think", "text", "direct"]  # reasoning / reply / injected, user-visible text


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex


def _model(cls: type) -> type:
    """A dataclass whose constructor drops unknown keywords, as the framework's pydantic models
    do (its own code writes `Text(role="user", type="text", ...)`, and test files copy it)."""
    cls = dataclass(cls)
    init = cls.__init__
    known = {f.name for f in dataclasses.fields(cls) if f.init}

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{k: v for k, v in kwargs.items() if k in known})

    cls.__init__ = __init__
    return cls


@_model
class Message:
    """Base of every message. `T` is the type's name (fixed; a `T=` keyword is ignored)."""

    T: str = field(default="Message", init=False, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict, kw_only=True)


@_model
class Text(Message):
    T: str = field(default="Text", init=False, repr=False)
    role: str  # "system", "user" or "assistant"
    content: str

    @property
    def tag(self) -> str:
        return self.metadata.get("tag", "text")

    @property
    def is_visible(self) -> bool:
        """Whether the user saw it (reasoning is not shown)."""
        return self.tag != "think"


@_model
class ToolCall(Message):
    T: str = field(default="ToolCall", init=False, repr=False)
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=new_call_id)


@_model
class ParallelToolCall(Message):
    T: str = field(default="ParallelToolCall", init=False, repr=False)
    tool_calls: list[ToolCall]

    def __post_init__(self) -> None:
        self.tool_calls = [c if isinstance(c, ToolCall) else ToolCall(**c) for c in self.tool_calls]


@_model
class ToolResponse(Message):
    T: str = field(default="ToolResponse", init=False, repr=False)
    name: str
    content: str
    id: str = field(default_factory=new_call_id)


MessageT = Text | ToolCall | ParallelToolCall | ToolResponse


@_model
class ToolCallResponse:
    """A call and the tool's answer. A dict in either place is read as a serialized one; any
    other answer is the response text (JSON-encoded unless a string), named and numbered like
    the call."""

    tool_call: ToolCall
    tool_response: ToolResponse

    def __post_init__(self) -> None:
        if isinstance(self.tool_call, dict):
            self.tool_call = ToolCall(**self.tool_call)
        r = self.tool_response
        if isinstance(r, dict):
            r = ToolResponse(**r)
        elif not isinstance(r, ToolResponse):
            text = r if isinstance(r, str) else json.dumps(r, default=str)
            r = ToolResponse(self.tool_call.name, text, self.tool_call.id)
        self.tool_response = r


_BY_T = {c.__name__: c for c in (Text, ToolCall, ParallelToolCall, ToolResponse)}


def as_messages(items: list[Any]) -> list[MessageT]:
    """Typed messages from typed ones, serialized ones (dicts with `T`) or OpenAI-style chat
    dicts (`{"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}`)."""
    out: list[MessageT] = []
    tool_names: dict[str, str] = {}  # call id -> tool name: an OpenAI tool reply may omit the name
    for m in items:
        if isinstance(m, Message):
            new = [m]
        elif isinstance(m, dict) and "T" in m:
            if m["T"] not in _BY_T:
                raise ValueError(f"unknown message type T={m['T']!r}")
            new = [_BY_T[m["T"]](**m)]
        elif isinstance(m, dict) and "role" in m:
            new = _from_chat(m, tool_names)
        else:
            raise TypeError(f"not a chat message: {m!r:.80}")
        for msg in new:
            for call in msg.tool_calls if isinstance(msg, ParallelToolCall) else [msg]:
                if isinstance(call, ToolCall):
                    tool_names[call.id] = call.name
        out += new
    return out


def _from_chat(m: dict[str, Any], tool_names: dict[str, str]) -> list[MessageT]:
    """One OpenAI-style message as the framework's sessions decode it: reasoning, then text
    (an assistant's only when non-empty), then one `ParallelToolCall` for its tool calls."""
    role, content = m["role"], _text(m.get("content"))
    if role == "tool":
        call_id = m.get("tool_call_id") or ""
        return [ToolResponse(m.get("name") or tool_names.get(call_id, ""), content, call_id)]
    out: list[MessageT] = []
    if m.get("reasoning_content"):
        out.append(Text(role, m["reasoning_content"], metadata={"tag": "think"}))
    if content or role != "assistant":
        out.append(Text(role, content))
    if m.get("tool_calls"):
        out.append(ParallelToolCall([_call(c) for c in m["tool_calls"]]))
    return out


def _call(c: dict[str, Any]) -> ToolCall:
    fn = c.get("function") or c
    raw = fn.get("arguments")
    args: Any = raw
    if isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            args = None
    # malformed arguments stay visible to the test the way the framework marks them: metadata["error"]
    meta = {} if isinstance(args, dict) else {"error": f"arguments are not a JSON object: {raw!r:.200}"}
    return ToolCall(fn.get("name", ""), args if isinstance(args, dict) else {},
                    c.get("id") or new_call_id(), metadata=meta)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


__all__ = ["Message", "MessageT", "ParallelToolCall", "Text", "TextMessageTag", "ToolCall", "ToolCallResponse",
           "ToolResponse", "as_messages", "new_call_id"]
