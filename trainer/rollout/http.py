"""One async JSON POST with retries, shared by the endpoint clients (policy, user).

Retried: connection errors, timeouts, HTTP 429 and 5xx (waits double from `backoff_s`; a
`Retry-After` header, in seconds or as an HTTP date, is honoured: the wait is at least what it
asks, capped at `max_retry_after_s`, 60 s by default). Not retried: other 4xx (a wrong model or
key will not fix itself). Either way, giving up raises `EndpointError` naming the endpoint (user
info and query removed: either may hold a credential) and the last cause; a body that is not a
JSON object is an `EndpointError` too. Every message is redacted (trainer/core/redact.py: the
endpoint's key, any registered secret, auth headers an endpoint echoes back).

`probe(endpoint, path, body)`: one cheap request before a campaign (trainer/rollout/preflight.py),
no retries but one after a 5xx: an `EndpointError` says why the endpoint cannot serve the run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from trainer.core.redact import redact, register
from trainer.core.retry_after import retry_after


class EndpointError(RuntimeError):
    """An endpoint gave no usable answer after its retries."""


@dataclass
class Endpoint:
    url: str  # base URL, e.g. http://host:8000/v1
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    retries: int = 2
    backoff_s: float = 0.5
    max_retry_after_s: float = 60.0  # the longest wait a Retry-After header gets

    def __post_init__(self) -> None:
        register(self.api_key)

    def where(self) -> str:
        return str(httpx.URL(self.url).copy_with(username=None, password=None, query=None))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url.rstrip("/"), headers=self.headers(), timeout=self.timeout_s)

    def scrub(self, text: str) -> str:
        """`text` without this endpoint's key or any other secret (trainer/core/redact.py)."""
        return redact(text, values=(self.api_key,))


async def post_json(endpoint: Endpoint, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    wait, last, asked = endpoint.backoff_s, "", None
    for attempt in range(endpoint.retries + 1):
        if attempt:
            await asyncio.sleep(max(wait, asked or 0.0))
            wait *= 2
        asked = None
        try:
            r = await client.post(path, json=body)
        except httpx.HTTPError as e:
            last = endpoint.scrub(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            continue
        if r.status_code == 429 or r.status_code >= 500:
            asked = retry_after(r, endpoint.max_retry_after_s)
            last = f"HTTP {r.status_code}" + (f", Retry-After {asked:g} s" if asked is not None else "")
            continue
        if r.status_code >= 400:
            raise EndpointError(endpoint.scrub(f"{endpoint.where()}{path} answered HTTP {r.status_code}: "
                                               f"{r.text[:300]}"))
        try:
            data = r.json()
        except ValueError:
            raise EndpointError(endpoint.scrub(f"{endpoint.where()}{path} answered a body that is not JSON: "
                                               f"{r.text[:200]!r}")) from None
        if not isinstance(data, dict):
            raise EndpointError(endpoint.scrub(f"{endpoint.where()}{path} answered JSON that is not an object: "
                                               f"{r.text[:200]!r}"))
        return data
    raise EndpointError(f"{endpoint.where()}{path} failed after {endpoint.retries + 1} attempts ({last})")


async def probe(endpoint: Endpoint, path: str, body: dict[str, Any], *, timeout_s: float = 10.0) -> None:
    """One cheap request (module docstring): returns when the endpoint answers as one that can serve
    the run (2xx, or 429/400/422: it is there and reads requests), else `EndpointError` saying
    why: unreachable, a timeout, 401/403 (the key), 404/405 (the URL or the model), 5xx twice."""
    where = f"{endpoint.where()}{path}"
    async with httpx.AsyncClient(base_url=endpoint.url.rstrip("/"), timeout=min(timeout_s, endpoint.timeout_s),
                                 headers=endpoint.headers()) as client:
        for attempt in range(2):
            try:
                r = await client.post(path, json=body)
            except httpx.HTTPError as e:
                raise EndpointError(endpoint.scrub(f"{where} is unreachable ({type(e).__name__}"
                                                   f"{': ' + str(e) if str(e) else ''})")) from None
            if r.status_code >= 500 and attempt == 0:
                await asyncio.sleep(1.0)
                continue
            break
    if r.status_code < 300 or r.status_code in (400, 422, 429):
        return
    why = {401: "the key was refused", 403: "the key was refused", 404: "no such path or model",
           405: "no such path"}.get(r.status_code, "it cannot serve requests")
    raise EndpointError(endpoint.scrub(f"{where} answered HTTP {r.status_code} ({why}): {r.text[:200]}"))


class LoopClient:
    """An endpoint's HTTP client, made on first use in each event loop (an `httpx.AsyncClient`
    belongs to the loop it was made in, and a run may play its episodes in more than one)."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = self.endpoint.client(), loop  # a client of a finished loop is dropped
        return await post_json(self.endpoint, self._http, path, body)

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = self._loop = None
