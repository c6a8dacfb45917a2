"""Endpoint policies: an OpenAI-compatible server writes the agent's turns.

    openai:URL#MODEL[,k=v,...]                  chat level: POST {URL}/chat/completions
    tokens:URL#MODEL,tokenizer=PATH[,k=v,...]   token level: POST {URL}/completions with the
                                                prompt as token ids (vLLM)

`openai:` (`ChatPolicy`). Each agent turn is one request with an OpenAI-standard body: `model`,
`messages` as the episode gives them (they are already the wire history: system messages merged,
assistant turns as the raw text the model wrote, tool results), `tools` (the OpenAI function
schemas; the key is left out when there are none), `temperature`, `top_p`, `top_k` (when on),
`max_completion_tokens` (the episode's room for this turn), `parallel_tool_calls: false` (with
tools) and `seed` (the episode's seed mod 2**31): the request the ThinkingBox framework's agent
session sends (`request_style="thinkingbox"`, the episode config's `agent_view`; with "plain" the
room is `max_tokens` and `parallel_tool_calls` is left out). The server must run no
tool parser: tb_interpret is the only reader of the text (a response `tb_interpret.response_text`
cannot read, e.g. one with parsed `tool_calls`, is a system error naming the endpoint); a split-off
reasoning is put back in front. The turn
is the raw response (`Generation.response`) with the token counts of its `usage` (a server that
sends no usage counts 0, so the token budget and context limit then see nothing).
- `vllm=1` adds `chat_template_kwargs: {"enable_thinking": THINKING}` (vLLM and SGLang read it; the
  default is off because OpenAI and other providers reject fields they do not know).
- `token_ids=1` adds `return_token_ids: true` (vLLM) and keeps `choices[0].token_ids` and
  `prompt_token_ids` in `Generation.ids` / `prompt_ids` (the record's `tokens.turns`); a server
  that does not send them is a system error.

`tokens:` (`TokensPolicy`, a `TokenClientPolicy`). The episode renders the prompt with
tb_interpret; each turn posts `prompt` (the ids), `max_tokens`, `temperature`, `top_p`, `seed`,
`logprobs: 1` (vLLM puts the sampled token's logprob in `choices[0].logprobs.token_logprobs`; 1
rather than 0 because some servers read 0 as "none"), `return_token_ids: true`,
`skip_special_tokens: false` and `stop_token_ids` (the tokenizer's `<|im_end|>` and
`<|endoftext|>`, whatever generation config the server was started with), and reads
`choices[0].token_ids` and their logprobs. The stop token: vLLM 0.27.1 returns it in `token_ids`
(v1/engine/detokenizer.py leaves it out of the decoded text only, then appends it back to
`token_ids`; completion/serving.py returns `output.token_ids`), with its logprob, so with vLLM the
ids are kept exactly. A server that leaves it out (`finish_reason: "stop"` and a last id that is
no stop token) gets one appended, `stop_reason` when that names a token id, else `<|im_end|>`,
with a logprob of None (unknown): `tb_interpret.parse_ids` then reads a turn that ended, not one
cut by the length limit, and the trajectory closes the turn as the chat template does.

Options, both kinds: temperature, top_p, top_k (sent only when on), max_tokens (per turn;
defaults of these four: the run's sampling config, configs/sampling.yaml), timeout
(seconds per attempt, 120), retries (extra attempts on connection errors, timeouts, 429 and 5xx,
2), backoff (the first wait between attempts in seconds, doubling, 0.5), key_env (the environment
variable holding the API key, TBT_POLICY_API_KEY; no key: no Authorization header), max_context
(the model's context in tokens: the episode's `context_limit`). `openai:` also: vllm, token_ids
(booleans, off). `tokens:` also: tokenizer (required; a path or hub name for
`transformers.AutoTokenizer.from_pretrained`).

Faults: `http.post_json` retries and then raises `EndpointError` (the episode makes it a
`PolicyError`: a system error); a 200 whose body is not a completion is a `PolicyError` naming
the endpoint here. The key goes only into the Authorization header: identities, records and
errors never hold it (an error that quotes the server's body is redacted).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import httpx

from trainer.core.tb_interpret import STOP_TOKENS, Family, InterpretError, response_text
from trainer.rollout.agentview import check_style
from trainer.rollout.http import Endpoint, LoopClient
from trainer.rollout.policy import (SAMPLING_OPTIONS, EpisodeInfo, Generation, Policy, PolicyError, PolicySession,
                                    SamplingParams, SpecError, TokenClientPolicy, no_more, option, sampling_from,
                                    truthy)

ENDPOINT_OPTIONS = ("timeout", "retries", "backoff", "key_env", "max_context")
CHAT_OPTIONS = (*SAMPLING_OPTIONS, *ENDPOINT_OPTIONS, "vllm", "token_ids")
TOKENS_OPTIONS = (*SAMPLING_OPTIONS, *ENDPOINT_OPTIONS, "tokenizer")
KEY_ENV = "TBT_POLICY_API_KEY"
IM_END = "<|im_end|>"


def from_spec(kind: str, body: str, opts: dict[str, str], spec: str, *, family: Family, thinking: bool,
              env: Mapping[str, str] | None, sampling: SamplingParams | None = None,
              request_style: str = "thinkingbox") -> Policy:
    """The `openai:` or `tokens:` policy of a spec (`policy.split_spec` gave `body` = URL#MODEL and
    the options); a bad URL, option or tokenizer is a `SpecError` naming the spec."""
    url, _, model = body.partition("#")
    endpoint = _endpoint(url, opts, spec, os.environ if env is None else env)
    sampling = sampling_from(opts, spec, sampling)
    max_context = option(opts, "max_context", _positive_int, None, spec)
    if kind == "openai":
        vllm = option(opts, "vllm", truthy, False, spec)
        token_ids = option(opts, "token_ids", truthy, False, spec)
        no_more(opts, spec, CHAT_OPTIONS)
        return ChatPolicy(endpoint, model, vllm=vllm, token_ids=token_ids, max_context=max_context,
                          family=family, thinking=thinking, sampling=sampling, request_style=request_style)
    path = opts.pop("tokenizer", None)
    no_more(opts, spec, TOKENS_OPTIONS)
    if not path:
        raise SpecError(f"{spec!r}: tokens: needs tokenizer=PATH (the served model's tokenizer)")
    try:
        return TokensPolicy(endpoint, model, _load_tokenizer(path, spec), tokenizer_path=path,
                            max_context=max_context, family=family, thinking=thinking, sampling=sampling)
    except SpecError:
        raise
    except ValueError as e:
        raise SpecError(f"{spec!r}: tokenizer={path}: {e}") from None


def _endpoint(url: str, opts: dict[str, str], spec: str, env: Mapping[str, str]) -> Endpoint:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as e:
        raise SpecError(f"{spec!r}: {e}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise SpecError(f"{spec!r}: the endpoint must be an http(s)://HOST[:PORT]/PATH base URL "
                        "(the part before /chat/completions)")
    key_env = opts.pop("key_env", KEY_ENV)
    return Endpoint(url, env.get(key_env) or None, timeout_s=option(opts, "timeout", _positive_float, 120.0, spec),
                    retries=option(opts, "retries", _count, 2, spec),
                    backoff_s=option(opts, "backoff", _non_negative_float, 0.5, spec))


def _positive_int(v: str) -> int:
    n = int(v)
    if n <= 0:
        raise ValueError("must be a positive integer")
    return n


def _count(v: str) -> int:
    n = int(v)
    if n < 0:
        raise ValueError("must be 0 or more")
    return n


def _positive_float(v: str) -> float:
    x = float(v)
    if not x > 0:
        raise ValueError("must be a positive number of seconds")
    return x


def _non_negative_float(v: str) -> float:
    x = float(v)
    if not x >= 0:
        raise ValueError("must be 0 or more seconds")
    return x


def _load_tokenizer(path: str, spec: str) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise SpecError(f"{spec!r}: tokenizer={path}: {e}") from None


class _Connection(LoopClient):
    """The policy's `LoopClient`, with the policy's fault message."""

    def fault(self, path: str, what: str, data: Any) -> PolicyError:
        return PolicyError(self.endpoint.scrub(f"policy endpoint: {self.endpoint.where()}{path} answered {what}: "
                                               f"{str(data)[:200]}"))


def _endpoint_identity(endpoint: Endpoint, model: str, sampling: SamplingParams,
                       max_context: int | None) -> dict[str, Any]:
    return {"url": endpoint.where(), "model": model, "temperature": sampling.temperature, "top_p": sampling.top_p,
            "top_k": sampling.top_k, "max_tokens": sampling.max_tokens,
            **({"max_context": max_context} if max_context else {})}


def top_k_field(sampling: SamplingParams) -> dict[str, int]:
    """`top_k` for a request body when it is on (vLLM reads it as an extra sampling parameter)."""
    return {"top_k": sampling.top_k} if sampling.top_k else {}


def _choice(conn: _Connection, path: str, data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise conn.fault(path, "no choices[0]", data)
    return choices[0]


def _usage(data: dict[str, Any], key: str) -> int:
    usage = data.get("usage")
    n = usage.get(key) if isinstance(usage, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0


def _ids(value: Any) -> list[int] | None:
    """`value` when it is a list of token ids, else None."""
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        return value
    return None


# ---------------------------------------------------------------------------- openai: (chat level)

class ChatPolicy(Policy):
    kind = "openai"

    def __init__(self, endpoint: Endpoint, model: str, *, vllm: bool = False, token_ids: bool = False,
                 max_context: int | None = None, request_style: str = "thinkingbox", **kw: Any):
        super().__init__(**kw)
        self.endpoint, self.model = endpoint, model
        self.request_style = check_style(request_style)
        self.vllm, self.token_ids = vllm, token_ids
        self.max_context = max_context
        self._conn = _Connection(endpoint)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), **_endpoint_identity(self.endpoint, self.model, self.sampling, self.max_context),
                **({"vllm": True} if self.vllm else {}), **({"token_ids": True} if self.token_ids else {})}

    def session(self, info: EpisodeInfo) -> PolicySession:
        return _ChatSession(self, info.seed)

    def request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
                seed: int) -> dict[str, Any]:
        """The body of one turn's POST (module docstring)."""
        framework = self.request_style == "thinkingbox"
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "temperature": self.sampling.temperature, "top_p": self.sampling.top_p,
                                **top_k_field(self.sampling),
                                ("max_completion_tokens" if framework else "max_tokens"): max_tokens,
                                "seed": seed % (2**31)}
        if tools:
            body["tools"] = tools
            if framework:
                body["parallel_tool_calls"] = False
        if self.vllm:
            body["chat_template_kwargs"] = {"enable_thinking": self.thinking}
        if self.token_ids:
            body["return_token_ids"] = True
        return body

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
                   seed: int) -> Generation:
        path = "/chat/completions"
        data = await self._conn.post(path, self.request(messages, tools, max_tokens, seed))
        choice = _choice(self._conn, path, data)
        try:
            response_text(data)  # what the episode will read: a reply it cannot is this endpoint's fault
        except InterpretError as e:
            raise self._conn.fault(path, f"a response tb_interpret cannot read ({e})", data) from None
        gen = Generation(response=data, input_tokens=_usage(data, "prompt_tokens"),
                         output_tokens=_usage(data, "completion_tokens"))
        if self.token_ids:
            gen.ids, gen.prompt_ids = _ids(choice.get("token_ids")), _ids(data.get("prompt_token_ids"))
            if gen.ids is None or gen.prompt_ids is None:
                raise self._conn.fault(path, "no token ids (token_ids=1 needs a server that returns "
                                             "choices[0].token_ids and prompt_token_ids, as vLLM does)", data)
        return gen

    async def aclose(self) -> None:
        await self._conn.aclose()


class _ChatSession(PolicySession):
    def __init__(self, policy: ChatPolicy, seed: int):
        self.policy, self.seed = policy, seed

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int) -> Generation:
        return await self.policy.chat(messages, tools, max_tokens, self.seed)


# ---------------------------------------------------------------------------- tokens: (token level)

class TokensPolicy(TokenClientPolicy):
    kind = "tokens"

    def __init__(self, endpoint: Endpoint, model: str, tokenizer: Any, *, tokenizer_path: str | None = None,
                 max_context: int | None = None, **kw: Any):
        super().__init__(self.generate, tokenizer, name=model, max_context=max_context, **kw)
        self.endpoint, self.model, self.tokenizer_path = endpoint, model, tokenizer_path
        self.stop_ids = _stop_ids(tokenizer)
        self._im_end = tokenizer.convert_tokens_to_ids(IM_END)
        self._conn = _Connection(endpoint)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), **_endpoint_identity(self.endpoint, self.model, self.sampling, self.max_context),
                **({"tokenizer": self.tokenizer_path} if self.tokenizer_path else {})}

    def request(self, prompt_ids: list[int], max_tokens: int, seed: int) -> dict[str, Any]:
        """The body of one turn's POST (module docstring)."""
        return {"model": self.model, "prompt": list(prompt_ids), "max_tokens": max_tokens,
                "temperature": self.sampling.temperature, "top_p": self.sampling.top_p, **top_k_field(self.sampling),
                "seed": seed % (2**31), "logprobs": 1, "return_token_ids": True, "skip_special_tokens": False,
                "stop_token_ids": list(self.stop_ids)}

    async def generate(self, prompt_ids: list[int], max_tokens: int, seed: int) -> Generation:
        """The `GenerateFn` of this policy: one completion of `prompt_ids`."""
        path = "/completions"
        data = await self._conn.post(path, self.request(prompt_ids, max_tokens, seed))
        choice = _choice(self._conn, path, data)
        ids = _ids(choice.get("token_ids"))
        if not ids:
            raise self._conn.fault(path, "no choices[0].token_ids (a server that returns token ids, as vLLM does "
                                         "with return_token_ids, is needed)", data)
        lp = choice.get("logprobs")
        logprobs = lp.get("token_logprobs") if isinstance(lp, dict) else None
        if (not isinstance(logprobs, list) or len(logprobs) != len(ids)
                or not all(x is None or isinstance(x, (int, float)) and not isinstance(x, bool) for x in logprobs)):
            raise self._conn.fault(path, f"no choices[0].logprobs.token_logprobs for its {len(ids)} token ids", data)
        ids, logprobs = list(ids), [None if x is None else float(x) for x in logprobs]
        if choice.get("finish_reason") == "stop" and ids[-1] not in self.stop_ids:
            reason = choice.get("stop_reason")  # the server left the stop token out (module docstring)
            ids.append(reason if isinstance(reason, int) and not isinstance(reason, bool) and reason >= 0
                       else self._im_end)
            logprobs.append(None)
        return Generation(ids=ids, prompt_ids=_ids(choice.get("prompt_token_ids")), logprobs=logprobs,
                          input_tokens=len(prompt_ids), output_tokens=len(ids))

    async def aclose(self) -> None:
        await self._conn.aclose()


def _stop_ids(tokenizer: Any) -> tuple[int, ...]:
    """The ids of `STOP_TOKENS` in `tokenizer` (`<|im_end|>` must be one of them)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS}
    if not isinstance(ids[IM_END], int) or ids[IM_END] == unk:
        raise ValueError(f"the tokenizer has no {IM_END} token: not a Qwen-style chat tokenizer")
    return tuple(i for i in ids.values() if isinstance(i, int) and i != unk)


__all__ = ["CHAT_OPTIONS", "ChatPolicy", "TOKENS_OPTIONS", "TokensPolicy", "from_spec"]
