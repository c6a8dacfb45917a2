"""The simulated user: who answers the agent's visible text (docs/episodes.md, "Simulated user").

    scripted[:k=v]               replies from the task's user context, no model (tests, synthetic runs)
    openai:URL#MODEL[,k=v,...]   an OpenAI-compatible chat endpoint with the stateless prompt below

Stateless, as the ThinkingBox framework's user simulator: each turn is one request of two
messages, a system prompt (use only the facts of USER_CONTEXT, copy names, ids and numbers exactly
as written there, answer only what is asked, say "I don't know." otherwise, never act as the
assistant) and a user prompt built from three things:

    {transcript}               the visible conversation so far, oldest first: the user's and the
                               assistant's visible text only (no tool traffic, no reasoning, no
                               system messages), each message one paragraph `User: ...` or
                               `Assistant: ...`, paragraphs separated by a blank line; the
                               template closes it with an end marker
    {user_context}             the task's user context ("(none)" when it is empty)
    {last_assistant_message}   the assistant's last message ("(none)" when there is none)

Before the model sees them, the three are escaped: the done tag `<DONE>` and every section marker
of the prompt (`PromptSet.markers`: a line of the template that names a section) lose their shape
(`escape`), so an agent cannot close a section or end the conversation by writing one. The
reply is cleaned (`clean_reply`): white space stripped, one leading role label (`User:`,
`Assistant:`, `System:`, also in capitals) dropped, one pair of wrapping quotes removed; what is
left empty reads as "I don't know.". The request samples with the configured model settings:
temperature (0), `max_completion_tokens` (4,096: the benchmark's user model config) and a seed
(the option, else the episode's). An endpoint that cannot answer raises `UserError`: a system error.

The prompts are ours (`DEFAULT_PROMPTS`). `prompts=FILE.yaml` reads others from a file (`system`,
`user` with the three placeholders, optional `markers`), so a team can run the exact prompts it
evaluates with; `prompts=thinkingbox` takes the simulator prompts of the installed `thinkingbox`
package at run time (and its own escaping), an error naming the package when it is not installed.

The scripted user answers its first turn with the whole user context (as a person who came with
a request would state it) and "I don't know." after that; options: `first=TEXT` to open with a
fixed text instead of the context.
"""

from __future__ import annotations

import importlib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from trainer.rollout.http import Endpoint, EndpointError, LoopClient

DONT_KNOW = "I don't know."
DONE_TAG = "<DONE>"
PLACEHOLDERS = ("transcript", "user_context", "last_assistant_message")

USER_SYSTEM = (
    "You play a customer talking to a business's assistant. Everything you know is in USER_CONTEXT; "
    "it is all true and it is all you know. Rules: answer only what the assistant's last message asks "
    "or needs; use only facts from USER_CONTEXT and copy names, emails, ids, dates and amounts exactly "
    "as written there; when asked something USER_CONTEXT does not say, reply \"I don't know.\"; never "
    "invent facts, never play the assistant, never mention these rules. Reply with the customer's next "
    "message only, in one or a few sentences, without a label or quotes.")

USER_TEMPLATE = (
    "CONVERSATION_SO_FAR:\n{transcript}\n[END OF CONVERSATION]\n\n"
    "USER_CONTEXT:\n{user_context}\n\n"
    "ASSISTANT_LAST_MESSAGE:\n{last_assistant_message}\n\n"
    "Write the customer's next message.")


class PromptError(ValueError):
    """A prompt file (or package) that cannot be used; names the file and the field."""


def template_markers(template: str) -> tuple[str, ...]:
    """The section markers of a user template: the text of each of its lines around the
    placeholders (`USER_CONTEXT:` of a line `USER_CONTEXT: {user_context}`), white space stripped."""
    out: list[str] = []
    for line in template.splitlines():
        try:
            parts = [lit for lit, *_ in string.Formatter().parse(line)]
        except ValueError:
            parts = [line]
        out += [p.strip() for p in parts if p.strip() and p.strip() not in out]
    return tuple(out)


def escape(text: str, markers: tuple[str, ...]) -> str:
    """`text` with the done tag and every marker made harmless: a character is put before each
    one's last (`<DONE>` -> `<DONE (escaped)>`, `USER_CONTEXT:` -> `USER_CONTEXT (escaped):`)."""
    for m in sorted({DONE_TAG, *markers}, key=len, reverse=True):
        if len(m) > 1:
            text = text.replace(m, f"{m[:-1]} (escaped){m[-1]}")
    return text


@dataclass(frozen=True)
class PromptSet:
    """The simulator's prompts: `system`, a `user` template with the three placeholders, and the
    markers escaped in what is put into it (default: the template's marker lines)."""

    system: str
    user: str
    markers: tuple[str, ...] = ()
    source: str = "tbt"  # where they came from: "tbt", a file path, or "thinkingbox" (the package)
    sanitize: Callable[[str], str] | None = field(default=None, compare=False)  # the package's own escaping

    def escape(self, text: str) -> str:
        return self.sanitize(text) if self.sanitize is not None else escape(text, self.markers)


DEFAULT_PROMPTS = PromptSet(USER_SYSTEM, USER_TEMPLATE, template_markers(USER_TEMPLATE))


def _check_template(template: str, where: str) -> None:
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise PromptError(f"{where}: not a format template ({e}; write a literal brace as {{{{ or }}}})") from None
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        raise PromptError(f"{where}: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)} "
                          f"(known: {', '.join('{' + n + '}' for n in PLACEHOLDERS)})")


def load_prompts(value: str | None) -> PromptSet:
    """The prompts a `prompts=` option names: None -> ours, "thinkingbox" -> the installed
    package's, else a YAML file {system, user, markers?}."""
    if value is None:
        return DEFAULT_PROMPTS
    if value == "thinkingbox":
        try:
            mod = importlib.import_module("thinkingbox.common.user_simulated_answer")
        except ImportError as e:
            raise PromptError(f"prompts=thinkingbox: the thinkingbox package is not installed ({e})") from None
        system, user = getattr(mod, "SYSTEM_PROMPT", None), getattr(mod, "USER_PROMPT", None)
        if not isinstance(system, str) or not isinstance(user, str):
            raise PromptError("prompts=thinkingbox: thinkingbox.common.user_simulated_answer has no SYSTEM_PROMPT "
                              "and USER_PROMPT strings (another version of the package?)")
        _check_template(user, "prompts=thinkingbox: USER_PROMPT")
        sanitize = getattr(mod, "_sanitize_content", None)
        return PromptSet(system, user, template_markers(user), "thinkingbox",
                         sanitize if callable(sanitize) else None)
    path = Path(value)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PromptError(f"prompts={value}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise PromptError(f"prompts={value}: not YAML ({e})") from None
    if not isinstance(data, dict):
        raise PromptError(f"{path}: expected a mapping with system, user and optionally markers")
    unknown = sorted(set(map(str, data)) - {"system", "user", "markers"})
    if unknown:
        raise PromptError(f"{path}: unknown key(s) {', '.join(unknown)} (known: system, user, markers)")
    for key in ("system", "user"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise PromptError(f"{path}: {key}: required, a non-empty string")
    _check_template(data["user"], f"{path}: user")
    markers = data.get("markers")
    if markers is None:
        markers = template_markers(data["user"])
    elif not (isinstance(markers, list) and all(isinstance(m, str) and m for m in markers)):
        raise PromptError(f"{path}: markers: expected a list of non-empty strings")
    return PromptSet(data["system"], data["user"], tuple(markers), str(path))


@dataclass(frozen=True)
class UserTurn:
    """What the user may see when it replies."""

    task: str  # the opening query
    user_context: str
    conversation: list[tuple[str, str]]  # (role, visible text), oldest first, tool traffic left out
    last_assistant: str
    seed: int


@dataclass
class UserReply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0


class UserError(RuntimeError):
    """The simulated user could not answer (an infrastructure fault)."""


class SimulatedUser:
    kind = "user"
    synthetic = False

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    async def reply(self, turn: UserTurn) -> UserReply:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class ScriptedUser(SimulatedUser):
    kind = "scripted"

    def __init__(self, first: str | None = None):
        self.first = first

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, **({"first": self.first} if self.first else {})}

    async def reply(self, turn: UserTurn) -> UserReply:
        said = sum(1 for role, _ in turn.conversation if role == "user")  # the query is the first
        if said <= 1:
            return UserReply(self.first or turn.user_context.strip() or DONT_KNOW)
        return UserReply(DONT_KNOW)


def transcript(conversation: list[tuple[str, str]], prompts: PromptSet = DEFAULT_PROMPTS) -> str:
    """The visible conversation as the simulator reads it: `User: ...` / `Assistant: ...`
    paragraphs, each text escaped."""
    return "\n\n".join(f"{'Assistant' if role == 'assistant' else 'User'}: {prompts.escape(text)}"
                        for role, text in conversation)


def user_prompt(turn: UserTurn, prompts: PromptSet = DEFAULT_PROMPTS) -> str:
    """The user message of one simulator request (module docstring)."""
    return prompts.user.format(transcript=transcript(turn.conversation, prompts),
                               user_context=prompts.escape(turn.user_context or "(none)"),
                               last_assistant_message=prompts.escape(turn.last_assistant or "(none)"))


_LABELS = ("User:", "Assistant:", "System:", "USER:", "ASSISTANT:", "SYSTEM:")


def clean_reply(text: str | None) -> str:
    """A simulator reply as the conversation gets it: stripped, one leading role label and one
    pair of wrapping quotes removed; empty reads as "I don't know."."""
    text = (text or "").strip()
    for label in _LABELS:
        if text.startswith(label):
            text = text[len(label):].lstrip()
            break
    for q in ('"', "'"):
        if len(text) > 1 and text.startswith(q) and text.endswith(q):
            text = text[1:-1].strip()
            break
    return text or DONT_KNOW


class ChatUser(SimulatedUser):
    kind = "openai"

    def __init__(self, endpoint: Endpoint, model: str, *, temperature: float = 0.0, max_tokens: int = 4096,
                 seed: int | None = None, prompts: PromptSet = DEFAULT_PROMPTS):
        self.endpoint, self.model = endpoint, model
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.prompts = prompts
        self._conn = LoopClient(endpoint)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "url": self.endpoint.where(), "model": self.model,
                "temperature": self.temperature, "max_tokens": self.max_tokens,
                **({"seed": self.seed} if self.seed is not None else {}),
                **({"prompts": self.prompts.source} if self.prompts.source != "tbt" else {})}

    def request(self, turn: UserTurn) -> dict[str, Any]:
        """The body of one turn's POST."""
        return {"model": self.model, "temperature": self.temperature, "max_completion_tokens": self.max_tokens,
                "seed": self.seed if self.seed is not None else turn.seed % (2**31),
                "messages": [{"role": "system", "content": self.prompts.system},
                             {"role": "user", "content": user_prompt(turn, self.prompts)}]}

    async def reply(self, turn: UserTurn) -> UserReply:
        try:
            data = await self._conn.post("/chat/completions", self.request(turn))
        except EndpointError as e:
            raise UserError(f"user endpoint: {e}") from None
        try:
            msg = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise UserError(self.endpoint.scrub(f"user endpoint {self.endpoint.where()} answered without "
                                                f"choices[0].message: {str(data)[:200]}")) from None
        content = msg.get("content") if isinstance(msg, dict) else None
        usage = data.get("usage") or {}
        return UserReply(clean_reply(content if isinstance(content, str) else None),
                         int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))

    async def aclose(self) -> None:
        await self._conn.aclose()


__all__ = ["DEFAULT_PROMPTS", "DONT_KNOW", "ChatUser", "PromptError", "PromptSet", "ScriptedUser", "SimulatedUser",
           "UserError", "UserReply", "UserTurn", "clean_reply", "escape", "load_prompts", "transcript", "user_prompt"]
