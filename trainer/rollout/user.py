"""The simulated user: who answers the agent's visible text (docs/episodes.md, "Simulated user").

    scripted[:k=v]               replies from the task's user context, no model (tests, synthetic runs)
    openai:URL#MODEL[,k=v,...]   an OpenAI-compatible chat endpoint with the stateless prompt below

Stateless, as the reference's: each turn is one request holding everything the user may use:
the system prompt (use only the facts of USER_CONTEXT, copy names, ids and numbers exactly as
written there, answer only what is asked, say "I don't know." otherwise, never act as the
assistant) and a user prompt with the task, USER_CONTEXT, the visible conversation so far (no
tool traffic, no reasoning) and the assistant's last message. An empty reply reads as
"I don't know.". An endpoint that cannot answer raises `UserError`: a system error.

The scripted user answers its first turn with the whole user context (as a person who came with
a request would state it) and "I don't know." after that; options: `first=TEXT` to open with a
fixed text instead of the context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer.rollout.http import Endpoint, EndpointError, LoopClient

DONT_KNOW = "I don't know."

USER_SYSTEM = (
    "You play a customer talking to a business's assistant. Everything you know is in USER_CONTEXT; "
    "it is all true and it is all you know. Rules: answer only what the assistant's last message asks "
    "or needs; use only facts from USER_CONTEXT and copy names, emails, ids, dates and amounts exactly "
    "as written there; when asked something USER_CONTEXT does not say, reply \"I don't know.\"; never "
    "invent facts, never play the assistant, never mention these rules. Reply with the customer's next "
    "message only, in one or a few sentences.")


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


def user_prompt(turn: UserTurn) -> str:
    convo = "\n".join(f"{'customer' if r == 'user' else 'assistant'}: {t}" for r, t in turn.conversation)
    return (f"TASK (what you came for):\n{turn.task}\n\nUSER_CONTEXT:\n{turn.user_context}\n\n"
            f"CONVERSATION SO FAR:\n{convo}\n\nTHE ASSISTANT'S LAST MESSAGE:\n{turn.last_assistant}\n\n"
            "Your reply as the customer:")


class ChatUser(SimulatedUser):
    kind = "openai"

    def __init__(self, endpoint: Endpoint, model: str, *, temperature: float = 0.0, max_tokens: int = 512,
                 seed: int | None = None):
        self.endpoint, self.model = endpoint, model
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self._conn = LoopClient(endpoint)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "url": self.endpoint.where(), "model": self.model,
                "temperature": self.temperature, **({"seed": self.seed} if self.seed is not None else {})}

    async def reply(self, turn: UserTurn) -> UserReply:
        body: dict[str, Any] = {
            "model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
            "seed": self.seed if self.seed is not None else turn.seed % (2**31),
            "messages": [{"role": "system", "content": USER_SYSTEM}, {"role": "user", "content": user_prompt(turn)}]}
        try:
            data = await self._conn.post("/chat/completions", body)
        except EndpointError as e:
            raise UserError(f"user endpoint: {e}") from None
        try:
            msg = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise UserError(f"user endpoint {self.endpoint.where()} answered without choices[0].message: "
                            f"{str(data)[:200]}") from None
        content = msg.get("content") if isinstance(msg, dict) else None
        usage = data.get("usage") or {}
        text = content.strip() if isinstance(content, str) else ""
        return UserReply(text or DONT_KNOW, int(usage.get("prompt_tokens") or 0),
                         int(usage.get("completion_tokens") or 0))

    async def aclose(self) -> None:
        await self._conn.aclose()


__all__ = ["DONT_KNOW", "ChatUser", "ScriptedUser", "SimulatedUser", "UserError", "UserReply", "UserTurn",
           "user_prompt"]
