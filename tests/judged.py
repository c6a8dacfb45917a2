"""What the domain tests share to ask a real judge over HTTP: a scripted OpenAI-compatible server on
127.0.0.1 and the grading of one reply against a real session's effects."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainer.domains import DOMAINS
from trainer.env.grading.context import TestContext
from trainer.env.grading.grader import grade
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry


class ScriptedJudgeServer:
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 answering from a script, in order."""

    def __init__(self, answers: list[str]):
        self.answers = list(answers)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                answer = outer.answers.pop(0) if outer.answers else ""
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def graded_reply(task, reply: str, judge, golden_steps: bool = False) -> object:
    """The verdict of `task` when the agent's last words are `reply`, on the effects of a real
    session where nothing was written (or, `golden_steps`, the golden path was)."""
    async def effects():
        async with Sandbox(task, ServerRegistry(domains=DOMAINS)) as sb:
            if golden_steps:
                for server, tool, params in task.golden_paths()[0]:
                    await sb.call_tool(tool, params, server=server)
            return await sb.effects()

    ctx = TestContext(response=reply, effects=asyncio.run(effects()),
                      messages=[{"role": "user", "content": task.query}, {"role": "assistant", "content": reply}])
    return grade(task, ctx, judge)
