"""tbt serve-proxy against a real local upstream: a small OpenAI-compatible completions server
(standing in for vLLM) that answers with the synthetic policy's Qwen text, started by the test.
The proxy runs under uvicorn on a free port; a real HTTP client talks to it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import uvicorn

from fakes import refusing_port
from trainer.core import parity as P
from trainer.core import tb_interpret as ti
from trainer.core.tb_render import IM_END
from trainer.domains import DOMAINS
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.setup import make_policy, make_user
from trainer.rollout.synthetic import SyntheticJudge
from trainer.serve.proxy import ProxyConfig, build_app

ROOT = Path(__file__).resolve().parents[1]
DS = load_dataset(ROOT / "data" / "samples")
TOOLS = [{"type": "function", "function": {"name": "find_member", "description": "Find a member.", "parameters": {
    "type": "object", "properties": {"email": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["email"]}}}]
CALL_TEXT = ('<think>\nLook the member up.\n</think>\n\n<tool_call>\n{"name": "find_member", "arguments": '
             '{"email": "ada@example.org", "limit": 2}}\n</tool_call>')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream:
    """/v1/models and /v1/completions; `texts` are answered in turn (the last one repeats)."""

    def __init__(self, texts: list[str], status: int = 200):
        self.texts, self.status, self.requests = list(texts), status, []
        self.token_ids = lambda text: [1, 2, 3]  # what the upstream says it generated
        up = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "tiny"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["content-length"])))
                up.requests.append(req)
                if up.status != 200:
                    return self._send(up.status, {"error": {"message": "engine overloaded"}})
                text = up.texts.pop(0) if len(up.texts) > 1 else up.texts[0]
                self._send(200, {"id": "cmpl-1", "model": req["model"], "choices": [
                    {"index": 0, "text": text, "finish_reason": "stop", "token_ids": up.token_ids(text)}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Proxy:
    def __init__(self, upstream: str, family="hermes", record=None):
        self.port = free_port()
        cfg = ProxyConfig(upstream=upstream, family=family, ready_timeout_s=1.0, record=record)
        config = uvicorn.Config(build_app(cfg),
                                host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def upstream():
    u = Upstream([CALL_TEXT, "<think>\nok\n</think>\n\nDone. <DONE>"])
    yield u
    u.close()


@pytest.fixture
def proxy(upstream):
    p = Proxy(upstream.url)
    yield p
    p.close()


SYSTEMS = [{"role": "system", "content": "You are an agent."}, {"role": "system", "content": "Library desk."}]


def test_readyz_follows_the_upstream(upstream):
    p = Proxy(upstream.url)
    try:
        assert httpx.get(p.url + "/readyz").status_code == 200
        assert httpx.get(p.url + "/healthz").status_code == 200
        upstream.close()
        r = httpx.get(p.url + "/readyz")
        assert r.status_code == 503 and r.json()["ready"] is False
    finally:
        p.close()


def test_a_chat_request_with_tools_returns_tb_interprets_typed_calls(proxy, upstream):
    msgs = SYSTEMS + [{"role": "user", "content": "Find ada@example.org"}]
    r = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "tiny", "messages": msgs, "tools": TOOLS,
                                                             "temperature": 0.5, "max_tokens": 64})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    ours = ti.parse(CALL_TEXT, family="hermes", tools=TOOLS)
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice["message"]["tool_calls"]]
    assert got == [(c.name, c.arguments) for c in ours.tool_calls] == [("find_member", {"email": "ada@example.org", "limit": 2})]
    assert choice["message"]["reasoning_content"] == "Look the member up." and choice["finish_reason"] == "tool_calls"
    assert choice["tb_text"] == CALL_TEXT and choice["token_ids"] == [1, 2, 3]
    sent = upstream.requests[0]
    assert sent["prompt"] == ti.render(msgs, family="hermes", tools=TOOLS, add_generation_prompt=True)
    assert sent["prompt"].count("<|im_start|>system") == 1  # sysmerge
    assert sent["return_token_ids"] is True and sent["temperature"] == 0.5 and sent["max_tokens"] == 64


def test_max_completion_tokens_reaches_the_upstream_as_max_tokens(proxy, upstream):
    """The framework's agent session (and our openai: policy) send the chat API's newer name; the
    upstream's /completions reads max_tokens."""
    for extra, want in (({"max_completion_tokens": 48, "parallel_tool_calls": False}, 48),
                        ({"max_completion_tokens": 48, "max_tokens": 20}, 20)):
        r = httpx.post(proxy.url + "/v1/chat/completions",
                       json={"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS, **extra})
        assert r.status_code == 200, r.text
        sent = upstream.requests[-1]
        assert sent["max_tokens"] == want and "max_completion_tokens" not in sent and "parallel_tool_calls" not in sent


def test_a_rejected_call_is_reported_not_returned(proxy, upstream):
    upstream.texts = ['<think>\nx\n</think>\n\n<tool_call>\n{"name": "find_member", "arguments": {"email": NaN}}\n</tool_call>']
    r = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "tiny", "tools": TOOLS,
                                                             "messages": [{"role": "user", "content": "x"}]})
    choice = r.json()["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["tb_rejected_calls"][0]["problem"] == "malformed"


def test_streaming_is_refused_and_upstream_errors_pass_through(proxy, upstream):
    r = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "t", "stream": True, "messages": []})
    assert r.status_code == 400 and "streaming" in r.json()["error"]["message"]
    upstream.status = 503
    r = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "t", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 503 and "overloaded" in r.text


def test_an_unreachable_upstream_is_a_502():
    with refusing_port() as port:
        p = Proxy(f"http://127.0.0.1:{port}/v1")
        try:
            r = httpx.post(p.url + "/v1/chat/completions", json={"model": "t", "messages": [{"role": "user", "content": "x"}]})
            assert r.status_code == 502 and "cannot be reached" in r.text
        finally:
            p.close()


def test_an_episode_through_the_proxy_is_read_as_training_reads_it(proxy, upstream):
    """`tbt run --policy openai:<proxy>`: the record's calls are tb_interpret's reading of the
    model's raw text (the proxy hands it over as tb_text), and the episode is graded."""
    task = DS.tasks["toy_loans.py:test_fine_correction"]
    upstream.texts = [CALL_TEXT.replace(', "limit": 2', ""), "<think>\nok\n</think>\n\nDone. <DONE>"]
    policy = make_policy(f"openai:{proxy.url}/v1#tiny,max_tokens=128")
    setup = EpisodeSetup(ServerRegistry(domains=DOMAINS), DS.agent(), policy, make_user("scripted"), SyntheticJudge(),
                         {"kind": "synthetic"}, EpisodeConfig())
    rec = asyncio.run(run_episode(task, setup))
    assert rec.system_error is None and rec.end_reason == "done", rec.verdict
    assert rec.tool_calls[0]["name"] == "find_member" and rec.tool_calls[0]["arguments"] == {"email": "ada@example.org"}
    assert rec.messages[3]["reasoning_content"] == "Look the member up."
    assert upstream.requests[0]["prompt"].count("<|im_start|>system") == 1


RECORDED = [CALL_TEXT,
            '<think>\nx\n</think>\n\n<tool_call>\n{"name": "find_member", "arguments": {"email": NaN}}\n</tool_call>',
            "<think>\nok\n</think>\n\nDone. <DONE>"]


@pytest.fixture
def recorded(upstream, tmp_path):
    """Three completions through a proxy with --record; the upstream answers with the real Qwen ids."""
    tok = P.load_tokenizer(P.default_tokenizer())
    upstream.texts = list(RECORDED)
    upstream.token_ids = lambda text: tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids(IM_END)]
    path = tmp_path / "proxy-parity.jsonl"
    p = Proxy(upstream.url, record=str(path))
    try:
        for _ in RECORDED:
            r = httpx.post(p.url + "/v1/chat/completions", json={"model": "tiny", "tools": TOOLS,
                                                                 "messages": SYSTEMS + [{"role": "user", "content": "x"}]})
            assert r.status_code == 200, r.text
    finally:
        p.close()
    return path, tok, upstream


def test_record_keeps_every_completion_as_a_parity_record(recorded):
    """`--record`: one line per choice with the raw text, the upstream's ids and the request's tools;
    `tbt parity` reads the file and both reading paths agree on what the model really wrote."""
    path, tok, upstream = recorded
    recs = P.load_records(path)
    assert [r.text for r in recs] == RECORDED
    assert all(r.tools == TOOLS and r.family == "hermes" and r.finish == "stop" and r.thinking for r in recs)
    assert [r.token_ids for r in recs] == [upstream.token_ids(t) for t in RECORDED]
    assert len({r.id for r in recs}) == 3
    report = P.run_parity(recs, tok)
    assert report.ok and report.records == 3, report.failures
    from typer.testing import CliRunner

    from trainer.cli import app
    res = CliRunner().invoke(app, ["parity", str(path)])
    assert res.exit_code == 0 and "3 record(s): 0 difference(s)" in res.output, res.output


def test_record_exposes_a_proxy_that_reads_differently_from_training(recorded):
    """The gate can fail: ids that say something else than the text the proxy parsed are a difference."""
    path, tok, _ = recorded
    recs = P.load_records(path)
    other = tok.encode(RECORDED[2], add_special_tokens=False) + [tok.convert_tokens_to_ids(IM_END)]
    tampered = [P.Record(**{**r.__dict__, "token_ids": other}) if i == 0 else r for i, r in enumerate(recs)]
    report = P.run_parity(tampered, tok)
    assert not report.ok and {f.id for f in report.failures} == {recs[0].id}



def test_launch_script_passes_record_through(upstream, tmp_path):
    """scripts/launch_sysmerge.sh with RECORD=FILE: the real CLI comes up and appends what it serves."""
    import subprocess

    port, path = free_port(), tmp_path / "live.jsonl"
    env = {**os.environ, "PORT": str(port), "UPSTREAM": upstream.url, "RECORD": str(path)}
    proc = subprocess.Popen(["bash", str(ROOT / "scripts/launch_sysmerge.sh")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline, up = time.monotonic() + 60, False
        while not up and time.monotonic() < deadline and proc.poll() is None:
            try:
                up = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.2)
        assert up, proc.stderr.read() if proc.poll() is not None else "no answer on /readyz"
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                       json={"model": "tiny", "tools": TOOLS, "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        proc.wait(10)
    [rec] = P.load_records(path)
    assert rec.text == CALL_TEXT and rec.tools == TOOLS and rec.token_ids == [1, 2, 3]
