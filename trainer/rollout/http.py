"""One async JSON POST with retries, shared by the endpoint clients (policy, user).

Retried: connection errors, timeouts, HTTP 429 and 5xx (waits double from `backoff_s`). Not
retried: other 4xx (a wrong model or key will not fix itself). Either way, giving up raises
`EndpointError` naming the endpoint (user info and query removed: either may hold a credential)
and the last cause; a body that is not a JSON object is an `EndpointError` too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx


class EndpointError(RuntimeError):
    """An endpoint gave no usable answer after its retries."""


@dataclass
class Endpoint:
    url: str  # base URL, e.g. http://host:8000/v1
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    retries: int = 2
    backoff_s: float = 0.5

    def where(self) -> str:
        return str(httpx.URL(self.url).copy_with(username=None, password=None, query=None))

    def client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.url.rstrip("/"), headers=headers, timeout=self.timeout_s)

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "[redacted]") if self.api_key else text


async def post_json(endpoint: Endpoint, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    wait, last = endpoint.backoff_s, ""
    for attempt in range(endpoint.retries + 1):
        if attempt:
            await asyncio.sleep(wait)
            wait *= 2
        try:
            r = await client.post(path, json=body)
        except httpx.HTTPError as e:
            last = endpoint.redact(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            continue
        if r.status_code == 429 or r.status_code >= 500:
            last = f"HTTP {r.status_code}"
            continue
        if r.status_code >= 400:
            raise EndpointError(endpoint.redact(f"{endpoint.where()}{path} answered HTTP {r.status_code}: "
                                                f"{r.text[:300]}"))
        try:
            data = r.json()
        except ValueError:
            raise EndpointError(f"{endpoint.where()}{path} answered a body that is not JSON: {r.text[:200]!r}") from None
        if not isinstance(data, dict):
            raise EndpointError(f"{endpoint.where()}{path} answered JSON that is not an object: {r.text[:200]!r}")
        return data
    raise EndpointError(f"{endpoint.where()}{path} failed after {endpoint.retries + 1} attempts ({last})")


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
