"""Policies: what writes the agent's turns. One interface, chosen by a spec string.

    synthetic[:k=v,...]           follows the task's golden actions, deviating with a per-task
                                  success probability; writes Qwen model text (trainer/rollout/synthetic.py)
    openai:URL#MODEL[,k=v,...]    an OpenAI-compatible chat endpoint that runs no tool parser
                                  (trainer/rollout/openai_policy.py)
    tokens:URL#MODEL,tokenizer=PATH[,k=v,...]
                                  token level: prompt ids -> generated ids + logprobs from an
                                  OpenAI-compatible completions endpoint (vLLM) (openai_policy.py)
    hf:PATH[,k=v,...]             a local transformers model on CPU (trainer/rollout/hf_policy.py)

Two kinds of policy, one episode (trainer/rollout/episode.py):
- chat-level (`tokenizer` None): `PolicySession.chat(messages, tools)` gets the conversation as
  the model wrote it (system messages merged, assistant turns as their raw text) and returns the
  turn's raw text or the server's raw response; tb_interpret reads it.
- token-level (`tokenizer` set): the episode keeps a `TokenTrajectory` (prompt rendered by
  tb_interpret, generated ids kept, tool/user turns appended as template deltas) and calls
  `PolicySession.generate(prompt_ids)`; `tb_interpret.parse_ids` reads the ids. This is the
  interface the verl agent loop drives through its server manager (`TokenClientPolicy` wraps any
  async `generate` callable).

A policy that cannot answer (endpoint down after its retries, a reply that is not a completion)
raises `PolicyError`: a system error of the episode, never a score. Identities (`identity()`)
name the kind, model and endpoint, never a key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Sequence

from trainer.core.tb_interpret import DEFAULT_FAMILY, FAMILIES, Family


class PolicyError(RuntimeError):
    """The policy could not produce a turn (infrastructure, not the model's choice)."""


class SpecError(ValueError):
    """A --policy / --user / --judge spec that cannot be read (the message says what is expected)."""


@dataclass
class Generation:
    """One assistant turn as the policy produced it; exactly one of `text`, `response` or `ids` is
    what tb_interpret reads (in that order of preference: `ids` on the token path)."""

    text: str | None = None  # raw model text, without <|im_end|>
    response: dict[str, Any] | None = None  # a raw OpenAI chat-completion response
    ids: list[int] | None = None  # generated token ids (token path, or returned by a server)
    prompt_ids: list[int] | None = None  # what the server says it was prompted with, when it says
    logprobs: list[float] | None = None  # one per generated id, when known
    finish: str = "stop"  # "stop" | "length" (text path; the token path reads the stop token)
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class EpisodeInfo:
    """What a policy session may know about its episode."""

    task: Any  # trainer.env.taskformat.tasks.Task
    repetition: int
    seed: int


@dataclass(frozen=True)
class SamplingParams:
    """How the agent's turns are sampled. `tbt run`, `tbt eval` and training take these from the one
    sampling config (configs/sampling.yaml, trainer/rollout/sampling.py); a spec's options override."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None  # None: off (all tokens)
    max_tokens: int = 4096  # per turn

    def to_verl(self) -> dict[str, Any]:
        """verl's rollout sampling (`actor_rollout_ref.rollout.*`; top_k off is -1 there); the
        tokens per turn are training's own (`thinkingbox.max_turn_tokens`)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": -1 if self.top_k is None else self.top_k}

    @classmethod
    def from_verl(cls, params: Mapping[str, Any], max_tokens: int) -> SamplingParams:
        """The inverse of `to_verl`: verl's per-sample sampling parameters (top_k <= 0: off)."""
        top_k = params.get("top_k")
        return cls(temperature=float(params.get("temperature", 1.0)), top_p=float(params.get("top_p", 1.0)),
                   top_k=int(top_k) if top_k is not None and int(top_k) > 0 else None, max_tokens=max_tokens)


class PolicySession:
    """One episode's use of a policy (a session may keep state across turns)."""

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int) -> Generation:
        raise NotImplementedError(f"{type(self).__name__} is token-level: use generate()")

    async def generate(self, prompt_ids: list[int], *, max_tokens: int) -> Generation:
        raise NotImplementedError(f"{type(self).__name__} is chat-level: use chat()")


class Policy:
    """Base class. `tokenizer` set means token-level (see the module docstring)."""

    kind = "policy"
    tokenizer: Any = None
    max_context: int | None = None  # the model's context length in tokens, when known
    synthetic = False

    def __init__(self, *, family: Family = DEFAULT_FAMILY, thinking: bool = True,
                 sampling: SamplingParams | None = None):
        if family not in FAMILIES:
            raise SpecError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}")
        self.family = family
        self.thinking = thinking
        self.sampling = sampling or SamplingParams()

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "family": self.family, "thinking": self.thinking}

    def session(self, info: EpisodeInfo) -> PolicySession:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


GenerateFn = Callable[[list[int], int, int], Awaitable[Generation]]  # (prompt_ids, max_tokens, seed)


class TokenClientPolicy(Policy):
    """A token-level policy around any async `generate(prompt_ids, max_tokens, seed)` (verl's
    server manager in training; a completions endpoint in `tokens:`)."""

    kind = "tokens"

    def __init__(self, generate: GenerateFn, tokenizer: Any, *, name: str = "token-client",
                 max_context: int | None = None, **kw: Any):
        super().__init__(**kw)
        self._generate = generate
        self.tokenizer = tokenizer
        self.max_context = max_context
        self.name = name

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "model": self.name}

    def session(self, info: EpisodeInfo) -> PolicySession:
        return _TokenSession(self, info.seed)


class _TokenSession(PolicySession):
    def __init__(self, policy: TokenClientPolicy, seed: int):
        self.policy, self.seed = policy, seed

    async def generate(self, prompt_ids: list[int], *, max_tokens: int) -> Generation:
        return await self.policy._generate(prompt_ids, max_tokens, self.seed)


# ---------------------------------------------------------------------------- spec strings

def split_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """`KIND[:BODY][,k=v,...]` -> (kind, body, options). For `openai:`/`tokens:` the body is
    `URL#MODEL` (options follow the model); for `synthetic:` and `scripted:` there is no body,
    only options."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip()
    if not kind:
        raise SpecError(f"empty spec {spec!r}")
    body, opts = rest, {}
    if kind in ("openai", "tokens"):
        url, hash_, tail = rest.partition("#")
        if not hash_ or not url:
            raise SpecError(f"{spec!r}: expected {kind}:URL#MODEL[,k=v,...]")
        model, *pairs = tail.split(",")
        if not model:
            raise SpecError(f"{spec!r}: the model after '#' is empty")
        body = f"{url}#{model}"
    elif kind == "hf":
        body, *pairs = rest.split(",")
        if not body:
            raise SpecError(f"{spec!r}: expected hf:PATH[,k=v,...]")
    else:
        body, pairs = "", [p for p in rest.split(",") if p]
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise SpecError(f"{spec!r}: option {p!r} is not k=v")
        opts[k.strip()] = v.strip()
    return kind, body, opts


def option(opts: dict[str, str], name: str, cast: Callable[[str], Any], default: Any, spec: str) -> Any:
    """`opts[name]` cast (removed from `opts`), or `default`; a bad value names the spec."""
    if name not in opts:
        return default
    raw = opts.pop(name)
    try:
        return cast(raw)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{spec!r}: option {name}={raw!r}: {e}") from None


def truthy(v: str) -> bool:
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true/false")


def no_more(opts: dict[str, str], spec: str, known: Sequence[str]) -> None:
    if opts:
        raise SpecError(f"{spec!r}: unknown option(s) {', '.join(sorted(opts))} (known: {', '.join(known)})")


def sampling_from(opts: dict[str, str], spec: str, defaults: SamplingParams | None = None) -> SamplingParams:
    """The spec's sampling options over `defaults` (the run's sampling config); `top_k=0` or a
    negative one turns top-k off."""
    d = defaults or SamplingParams()
    top_k = option(opts, "top_k", int, d.top_k, spec)
    return SamplingParams(temperature=option(opts, "temperature", float, d.temperature, spec),
                          top_p=option(opts, "top_p", float, d.top_p, spec),
                          top_k=top_k if top_k is not None and top_k > 0 else None,
                          max_tokens=option(opts, "max_tokens", int, d.max_tokens, spec))


SAMPLING_OPTIONS = ("temperature", "top_p", "top_k", "max_tokens")


def stable_seed(*parts: Any) -> int:
    """A 63-bit seed from any values, the same in every process (unlike `hash`)."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") >> 1


__all__ = ["EpisodeInfo", "Generation", "Policy", "PolicyError", "PolicySession", "SamplingParams",
           "SpecError", "TokenClientPolicy", "sampling_from", "split_spec", "stable_seed"]
