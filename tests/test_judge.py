"""The chat judge against a real local OpenAI-compatible HTTP server with scripted answers."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainer.env.context import JudgeUnavailable, TestContext
from trainer.env.grader import grade
from trainer.env.judge import ChatJudge, JudgeConfig, parse_yesno

KEY = "sk-test-do-not-leak-1234"


class Script:
    """Each request pops the next reply: (status, body) with body a str or a JSON-able object."""

    def __init__(self):
        self.replies: list[tuple[int, object]] = []
        self.requests: list[dict] = []


@pytest.fixture
def endpoint():
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            status, reply = script.replies.pop(0) if script.replies else (500, "no script left")
            data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    server.shutdown()
    server.server_close()


def chat(content):
    return 200, {"choices": [{"message": {"role": "assistant", "content": content}}]}


def judge_at(url, **kw):
    return ChatJudge(JudgeConfig(url=url, model="judge-m", api_key=KEY, backoff_s=0.01, **kw))


@pytest.mark.parametrize("answer,expected", [
    ("yes", True), ("Yes.", True), ("YES", True), ("**Yes**", True), ("I think the answer is yes", True),
    ("no", False), ("No.", False), ("", False), ("   ", False), ("maybe", False), ("yesterday", False),
    ("Yes, no", True), ("no, yes", True), ("the answer: no", False), (None, False),
])
def test_parse_yesno_fails_closed(answer, expected):
    assert parse_yesno(answer) is expected


def test_asks_the_endpoint_and_parses(endpoint):
    url, script = endpoint
    script.replies = [chat("Yes."), chat("no"), chat(""), chat(None), (200, "not json"), (200, {"choices": []})]
    j = judge_at(url)
    assert j.text_yesno("hello there", "Is it a greeting?") is True
    assert [j.text_yesno("t", "q") for _ in range(5)] == [False] * 5  # no, empty, null, malformed, no choices
    req = script.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == f"Bearer {KEY}"
    assert req["body"]["model"] == "judge-m" and req["body"]["temperature"] == 0
    assert "hello there" in req["body"]["messages"][1]["content"]
    assert "Is it a greeting?" in req["body"]["messages"][1]["content"]


def test_retries_with_backoff_then_answers(endpoint):
    url, script = endpoint
    script.replies = [(503, "busy"), (429, "slow down"), chat("yes")]
    assert judge_at(url, retries=3).text_yesno("t", "q") is True
    assert len(script.requests) == 3


def test_unreachable_after_retries_is_unavailable(endpoint, caplog):
    url, script = endpoint
    script.replies = [(500, "down")] * 3
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable, match="after 3 attempts"):
        judge_at(url, retries=2).text_yesno("t", "q")
    assert len(script.requests) == 3
    assert KEY not in caplog.text


def test_client_error_is_unavailable_without_retry(endpoint):
    url, script = endpoint
    script.replies = [(401, {"error": "bad key"})]
    with pytest.raises(JudgeUnavailable, match="HTTP 401"):
        judge_at(url).text_yesno("t", "q")
    assert len(script.requests) == 1


def test_connection_refused_is_unavailable_and_key_never_shown(caplog):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    j = judge_at(f"http://127.0.0.1:{port}/v1", retries=1)
    with caplog.at_level(logging.DEBUG), pytest.raises(JudgeUnavailable) as e:
        j.text_yesno("t", "q")
    assert KEY not in str(e.value) and KEY not in repr(j) and KEY not in repr(j.config) and KEY not in caplog.text


def test_from_env():
    assert JudgeConfig.from_env({}) is None
    cfg = JudgeConfig.from_env({"TBT_JUDGE_URL": "http://h/v1", "TBT_JUDGE_MODEL": "m", "TBT_JUDGE_API_KEY": KEY})
    assert (cfg.url, cfg.model, cfg.api_key) == ("http://h/v1", "m", KEY) and KEY not in repr(cfg)


def test_grader_with_a_down_judge_is_a_system_error(endpoint):
    from pathlib import Path

    from trainer.env.tasks import load_dataset
    url, script = endpoint
    script.replies = [(502, "bad gateway")] * 2
    task = load_dataset(Path(__file__).parent / "fixtures/datasets/grading").tasks["grading_cases.py:test_asks_judge"]
    v = grade(task, TestContext(response="hi"), judge_at(url, retries=1))
    assert not v.passed and v.reward == 0.0 and v.system_error.startswith("JudgeUnavailable")
    script.replies = [chat("Yes")]
    v = grade(task, TestContext(response="thanks!"), judge_at(url, retries=0), isolate=True)
    assert v.passed and v.judge_calls == [{"question": "Is the reply polite?", "answer": True}]
