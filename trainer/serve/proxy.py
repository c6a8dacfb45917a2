"""`tbt serve-proxy`: an OpenAI-compatible chat endpoint in front of vLLM that reads the model
exactly as training does.

    POST /v1/chat/completions   messages (+ tools) -> leading system messages merged, rendered by
                                tb_interpret for the family -> the upstream's /v1/completions (raw
                                prompt, token ids asked for) -> the text parsed by tb_interpret ->
                                an OpenAI chat completion: `reasoning_content`, `content`, typed
                                `tool_calls` (arguments as JSON text, as OpenAI sends them)
    GET  /v1/models             the upstream's
    GET  /readyz                200 only when the upstream answers (its /models), else 503
    GET  /healthz               200 while the proxy runs

So ThinkingBox clients (two system messages; Qwen's newer templates accept one: "sysmerge") get
the chat template and the tool-call reading of training, and the upstream runs no chat template,
tool parser or reasoning parser of its own. Each choice also carries, as extensions, `tb_text`
(the model's raw text: our `openai:` policy reads it, so a record written through the proxy is
parsed as the training path parses it), `tb_rejected_calls` (calls tb_interpret refused, with the
message the agent would be told) and, when the upstream returns them, `prompt_token_ids` and
`token_ids`.

With `record` (`tbt serve-proxy --record FILE`) every choice is also appended to FILE as a parity
record (trainer/core/parity.py: family, tools, text, the upstream's token ids, thinking, finish,
tool_choice; one fsynced line each), so `tbt parity FILE --against vllm` checks what the model
really wrote, on both reading paths and against vLLM's own parsers. Prompts are not kept.

Streaming is refused (HTTP 400, saying so). Upstream errors pass through with their status and
body; an upstream that does not answer within the timeout is a 504, one that cannot be reached a
502. `chat_template_kwargs.enable_thinking` (vLLM's spelling) turns reasoning off per request.
Sampling fields pass through (`PASSED_THROUGH`); `max_completion_tokens`, the chat API's name that
the ThinkingBox framework and our `openai:` policy send, reaches the upstream as `max_tokens`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from trainer.core import tb_interpret as ti
from trainer.core.parity import Record
from trainer.formats.record import RecordWriter

PASSED_THROUGH = ("temperature", "top_p", "top_k", "max_tokens", "seed", "stop", "presence_penalty",
                  "frequency_penalty", "repetition_penalty", "n", "logprobs")


@dataclass
class ProxyConfig:
    upstream: str  # base URL of the upstream OpenAI-compatible API, e.g. http://127.0.0.1:8001/v1
    family: ti.Family = ti.DEFAULT_FAMILY
    model: str | None = None  # upstream model name (default: the request's)
    timeout_s: float = 600.0
    ready_timeout_s: float = 5.0
    record: str | None = None  # append every choice as a parity record to this JSONL


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def chat_message(c: ti.Completion) -> dict[str, Any]:
    """An OpenAI assistant message from tb_interpret's reading of a turn."""
    msg: dict[str, Any] = {"role": "assistant", "content": c.content or None}
    if c.reasoning is not None:
        msg["reasoning_content"] = c.reasoning
    if c.tool_calls:
        msg["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                              "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
                             for call in c.tool_calls]
    return msg


def _wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant tool calls with JSON-text arguments (OpenAI's shape) read back as objects."""
    out = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except json.JSONDecodeError:
                        raise ValueError(f"a past tool call's arguments are not JSON: {fn['arguments'][:80]!r}") from None
                calls.append({**tc, "function": fn})
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def parity_record(rid: str, family: ti.Family, tools: list[dict[str, Any]] | None, text: str, token_ids: Any,
                  thinking: bool, finish: Literal["stop", "length"], tool_choice: Literal["auto", "none"]) -> Record:
    """One choice as the parity gate's record (token ids only when they are a list of ints);
    `rid` must be unique in the file (the proxy adds a random suffix: upstream ids may repeat)."""
    ids = token_ids if isinstance(token_ids, list) and all(type(x) is int for x in token_ids) else None
    return Record(id=rid, family=family, tools=list(tools or []), text=text, token_ids=ids, thinking=thinking,
                  finish=finish, tool_choice=tool_choice)


def build_app(cfg: ProxyConfig) -> Starlette:
    base = cfg.upstream.rstrip("/")
    writer = RecordWriter(cfg.record) if cfg.record else None

    async def chat(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "expected a JSON object with a 'messages' list")
        if body.get("stream"):
            return _error(400, "streaming is not supported by this proxy: send \"stream\": false")
        tools = body.get("tools") or None
        thinking = bool((body.get("chat_template_kwargs") or {}).get("enable_thinking", True))
        try:
            messages = _wire_messages(body["messages"])
            prompt = ti.render(messages, family=cfg.family, tools=tools, add_generation_prompt=True,
                               enable_thinking=thinking)
            toolset = ti.Toolset(tools) if tools else None
        except (ValueError, KeyError, TypeError) as e:
            return _error(400, f"cannot render these messages: {e}")
        up = {"model": cfg.model or body.get("model"), "prompt": prompt, "return_token_ids": True,
              **{k: body[k] for k in PASSED_THROUGH if k in body}}
        if "max_tokens" not in up and "max_completion_tokens" in body:  # the chat API's newer name (tb infer sends it)
            up["max_tokens"] = body["max_completion_tokens"]
        try:
            async with httpx.AsyncClient(timeout=cfg.timeout_s) as client:
                r = await client.post(base + "/completions", json=up)
        except httpx.TimeoutException:
            return _error(504, f"the upstream {base} did not answer within {cfg.timeout_s}s", "upstream_timeout")
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {base} cannot be reached: {type(e).__name__}", "upstream_unreachable")
        if r.status_code >= 400:
            return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))
        try:
            data = r.json()
            choices = data["choices"]
        except (ValueError, KeyError, TypeError):
            return _error(502, f"the upstream answered something that is not a completion: {r.text[:200]!r}",
                          "upstream_garbage")
        out_choices = []
        rid = data.get("id") or f"chatcmpl-{uuid.uuid4().hex}"
        tool_choice: Literal["auto", "none"] = "none" if body.get("tool_choice") == "none" else "auto"
        for i, ch in enumerate(choices):
            text = ch.get("text") or ""
            finish: Literal["stop", "length"] = "length" if ch.get("finish_reason") == "length" else "stop"
            c = ti.parse(text, family=cfg.family, tools=toolset, thinking=thinking, finish=finish,
                         tool_choice=tool_choice)
            if writer is not None:
                writer.write_line(parity_record(f"{rid}-{i}-{uuid.uuid4().hex[:8]}", cfg.family, tools, text,
                                                ch.get("token_ids"), thinking, finish, tool_choice).to_json())
            choice = {"index": i, "message": chat_message(c), "finish_reason": c.finish, "tb_text": text,
                      "tb_rejected_calls": [{"name": x.name, "problem": x.problem, "message": x.message}
                                            for x in c.calls if not x.executable]}
            for key in ("token_ids", "prompt_token_ids"):
                if ch.get(key) is not None:
                    choice[key] = ch[key]
            out_choices.append(choice)
        resp = {"id": rid, "object": "chat.completion",
                "created": data.get("created", 0), "model": data.get("model") or up["model"],
                "choices": out_choices, "usage": data.get("usage")}
        if data.get("prompt_token_ids") is not None:
            resp["prompt_token_ids"] = data["prompt_token_ids"]
        return JSONResponse(resp)

    async def models(request: Request) -> Response:
        try:
            async with httpx.AsyncClient(timeout=cfg.ready_timeout_s) as client:
                r = await client.get(base + "/models")
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {base} cannot be reached: {type(e).__name__}", "upstream_unreachable")
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    async def readyz(request: Request) -> Response:
        try:
            async with httpx.AsyncClient(timeout=cfg.ready_timeout_s) as client:
                r = await client.get(base + "/models")
            if r.status_code < 400:
                return JSONResponse({"ready": True, "upstream": base})
            why = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            why = type(e).__name__
        return JSONResponse({"ready": False, "upstream": base, "why": why}, status_code=503)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/models", models, methods=["GET"]),
                             Route("/readyz", readyz, methods=["GET"]), Route("/healthz", healthz, methods=["GET"])])


__all__ = ["ProxyConfig", "build_app", "chat_message", "parity_record"]
