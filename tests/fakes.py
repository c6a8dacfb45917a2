"""A real local OpenAI-compatible endpoint for tests: an HTTP server on 127.0.0.1 that records
every request and answers with what a test's `answer` returns.

`answer(path, body)` (or `answer(path, body, headers)` when it needs the request's headers) returns
`(status, reply)` or `(status, reply, extra_headers)`; `reply` is a str (sent as is) or JSON-able.
Each request is recorded as a dict: `at` (time.monotonic()), `path`, `auth` (the Authorization
header), `headers`, `body`. The `endpoints`
fixture (tests/conftest.py) makes them and stops them after the test."""

from __future__ import annotations

import inspect
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Answer = Callable[..., tuple]
PING = [{"role": "user", "content": "ping"}]  # the body of the preflight's probe (trainer/rollout/preflight.py)


class Endpoint:
    def __init__(self, answer: Answer):
        self.answer, self.requests = answer, []
        wants_headers = len(inspect.signature(answer).parameters) >= 3
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = dict(self.headers)
                outer.requests.append({"at": time.monotonic(), "path": self.path, "headers": headers,
                                       "auth": self.headers.get("Authorization"), "body": body})
                got = outer.answer(self.path, body, headers) if wants_headers else outer.answer(self.path, body)
                status, reply, extra = (*got, {}) if len(got) == 2 else got
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **extra}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def turns(self) -> list[dict[str, Any]]:
        """The requests that were not the preflight's ping."""
        return [r for r in self.requests if r["body"].get("messages") != PING]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(text: str | None, **message: Any) -> tuple[int, dict[str, Any]]:
    return 200, {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text, **message}}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


def model(turns: list[str]) -> Answer:
    """A chat model whose n-th assistant turn of the conversation it is sent is `turns[n]`."""
    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        n = sum(m["role"] == "assistant" for m in body["messages"])
        return completion(turns[min(n, len(turns) - 1)])
    return answer

