"""What a ThinkingBox test function receives: `TestContext` and `Judge` (docs/tasks.md,
"What a test function receives").

`Judge` (the framework's API: `text_yesno`, `evaluate_bool`, `yesno`, `compare_yesno`, ...) is
defined in `trainer.env.grading.judge` and named here too.

`TestContext` presents the episode the way the framework's does: `messages` are typed chat
messages (`Text`, `ParallelToolCall`, `ToolResponse`, from `trainer.env.grading.chat_types`) and
`tool_calls` are `ToolCallResponse`s whose `tool_response` is a `ToolResponse`, so a test written
for the framework (`isinstance(m, Text)`, `call.tool_response.content`) reads the same here.
Callers may pass OpenAI-style chat dicts or serialized messages; they are converted on
construction.

Test files import these from the framework (`from thinkingbox.common import Judge, TestContext`,
`from thinkingbox.common.chat_types import Text`, ...). When the `thinkingbox` package is not
installed, `trainer.env.grading.tb_shim.install_thinkingbox_shim()` makes those imports resolve to ours (`trainer.env.grading.tb_shim`
lists what it provides), so such files load unchanged; an installed package is never shadowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer.env.grading.chat_types import MessageT, Text, ToolCall, ToolCallResponse, as_messages
from trainer.env.grading.judge import Judge, JudgeUnavailable  # the judge API lives with its prompts and parser

ToolCallRecord = ToolCallResponse  # our older name: a call and what the tool answered


@dataclass
class TestContext:
    """The episode as a test sees it.

    `response` is the last visible assistant text; `effects` maps server name to the dict its
    `__reserved__geteffects` returned; `messages` are the episode's chat messages and
    `tool_calls` every call with its response (see the module docstring);
    `tool_direct_responses` the texts that tools with a `direct_response` showed the user.
    """

    __test__ = False  # not a pytest class

    response: str = ""
    effects: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCallResponse] = field(default_factory=list)
    messages: list[MessageT] = field(default_factory=list)
    init_result: dict[str, Any] = field(default_factory=dict)
    session_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_direct_responses: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.messages = as_messages(self.messages)
        self.tool_calls = [c if isinstance(c, ToolCallResponse) else ToolCallResponse(**c)
                           for c in self.tool_calls]

    def _visible(self, *roles: str) -> list[Text]:
        # what the user saw: no reasoning, no placeholder the framework inserts (`is_dummy`)
        return [m for m in self.messages if isinstance(m, Text) and m.role in roles and m.is_visible
                and not m.metadata.get("is_dummy")]

    def query(self) -> str:
        """The first user message of the episode ("" when there is none)."""
        users = self._visible("user")
        return users[0].content if users else ""

    def transcript(self, limit: int | None = None) -> str:
        """Visible conversation as `role: text` lines (tool traffic omitted); last `limit` turns."""
        turns = [f"{m.role}: {m.content}" for m in self._visible("user", "assistant") if m.content.strip()]
        if limit is not None:
            turns = turns[-limit:] if limit > 0 else []
        return "\n".join(turns)


__all__ = ["Judge", "JudgeUnavailable", "TestContext", "ToolCall", "ToolCallRecord"]
