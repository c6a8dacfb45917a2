"""A real local OpenAI-compatible endpoint for tests: an HTTP server on 127.0.0.1 that records
every request and answers with what a test's `answer` returns.

`answer(path, body)` (or `answer(path, body, headers)` when it needs the request's headers) returns
`(status, reply)` or `(status, reply, extra_headers)`; `reply` is a str (sent as is) or JSON-able.
Each request is recorded as a dict: `at` (time.monotonic()), `path`, `auth` (the Authorization
header), `headers`, `body`. The `endpoints`
fixture (tests/conftest.py) makes them and stops them after the test."""

from __future__ import annotations

import contextlib
import inspect
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

Answer = Callable[..., tuple]
PING = [{"role": "user", "content": "ping"}]  # the body of the preflight's probe (trainer/rollout/preflight.py)


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the block runs: bound, never
    listening, so no other test (another xdist worker's server) can take it meanwhile, as it could
    a port that was only picked free and closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


class Endpoint:
    """`delay` seconds pass before each answer; `stop()` leaves the port refusing connections and
    `start()` serves on the same port again."""

    def __init__(self, answer: Answer):
        self.answer, self.requests, self.delay, self.port = answer, [], 0.0, 0
        self.start()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = dict(self.headers)
                outer.requests.append({"at": time.monotonic(), "path": self.path, "headers": headers,
                                       "auth": self.headers.get("Authorization"), "body": body})
                time.sleep(outer.delay)
                answer = outer.answer  # read per request: a test may swap it
                wants_headers = len(inspect.signature(answer).parameters) >= 3
                got = answer(self.path, body, headers) if wants_headers else answer(self.path, body)
                status, reply, extra = (*got, {}) if len(got) == 2 else got
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    for k, v in {"Content-Type": "application/json", **extra}.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up waiting (a timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

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

