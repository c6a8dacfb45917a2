"""What a ThinkingBox test function receives: `TestContext` and `Judge` (TASK_FORMAT.md §3).

Test files say `from thinkingbox.common import Judge, TestContext`. When the `thinkingbox`
package is not installed, `install_thinkingbox_shim()` registers a module of that name exposing
these two classes, so such files load unchanged.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One call the agent made: tool name, typed arguments, call id."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass
class ToolCallRecord:
    """A call and what the tool answered (text as the agent saw it)."""

    tool_call: ToolCall
    tool_response: Any


@dataclass
class TestContext:
    """The episode as a test sees it.

    `response` is the last visible assistant text; `effects` maps server name to the dict its
    `__reserved__geteffects` returned; `messages` are OpenAI-style chat messages of the episode.
    """

    __test__ = False  # not a pytest class

    response: str = ""
    effects: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    init_result: dict[str, Any] = field(default_factory=dict)
    session_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def query(self) -> str:
        """The first user message of the episode."""
        for m in self.messages:
            if m.get("role") == "user":
                return str(m.get("content") or "")
        return ""

    def transcript(self, limit: int | None = None) -> str:
        """Visible conversation as `role: text` lines (tool traffic omitted); last `limit` turns."""
        turns = [
            f"{m['role']}: {m.get('content') or ''}"
            for m in self.messages
            if m.get("role") in ("user", "assistant") and (m.get("content") or "").strip()
        ]
        if limit is not None:
            turns = turns[-limit:] if limit > 0 else []
        return "\n".join(turns)


class Judge:
    """Yes/no questions about text, answered by a configured LLM. Concrete judges subclass this.

    The base class has no model: asking it is an infrastructure fault, never a pass.
    """

    def text_yesno(self, text: str, question: str) -> bool:
        raise JudgeUnavailable("no judge is configured, but this test asks one")

    def evaluate_bool(self, text: str, question: str) -> bool:
        return self.text_yesno(text, question)

    def yesno(self, text: str, question: str) -> bool:
        return self.text_yesno(text, question)


class JudgeUnavailable(RuntimeError):
    """The judge could not answer (not configured, unreachable): a system error, not a verdict."""


def install_thinkingbox_shim() -> None:
    """Make `from thinkingbox.common import Judge, TestContext` work without the package."""
    if "thinkingbox.common" in sys.modules:
        return
    try:
        if importlib.util.find_spec("thinkingbox") is not None:
            return
    except (ImportError, ValueError):
        pass
    pkg = types.ModuleType("thinkingbox")
    pkg.__path__ = []  # a package, so submodule imports resolve through sys.modules
    # a spec, so that importlib.util.find_spec("thinkingbox") answers instead of raising
    pkg.__spec__ = importlib.machinery.ModuleSpec("thinkingbox", None, is_package=True)
    common = types.ModuleType("thinkingbox.common")
    common.__spec__ = importlib.machinery.ModuleSpec("thinkingbox.common", None)
    common.Judge = Judge
    common.TestContext = TestContext
    pkg.common = common
    sys.modules["thinkingbox"] = pkg
    sys.modules["thinkingbox.common"] = common
