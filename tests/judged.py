"""What the domain tests share to ask a real judge over HTTP: a scripted OpenAI-compatible server on
127.0.0.1 and the grading of one reply against a real session's effects."""

from __future__ import annotations

import asyncio

from fakes import Endpoint, completion
from trainer.domains import DOMAINS
from trainer.env.grading.context import TestContext
from trainer.env.grading.grader import grade
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry


class ScriptedJudgeServer(Endpoint):
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 answering from a script, in order
    (an empty answer once the script is done)."""

    def __init__(self, answers: list[str]):
        self.answers = list(answers)
        super().__init__(lambda path, body: completion(self.answers.pop(0) if self.answers else ""))

    def close(self):
        self.stop()


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


def norm(text: str) -> str:
    """`text` with its white space runs made single spaces."""
    return " ".join(text.split())


def judged_replies(task, replies: list[str], answers: list[str], *, golden_steps: bool = False, domain: str):
    """Each reply graded with a real `ChatJudge` over HTTP that answers `answers` in order: (the
    verdicts, the judged texts the judge was sent, each with white space normalised), after checking
    every request went to /v1/chat/completions and quoted the task's first yes/no rubric."""
    from trainer.env.grading.judge import ChatJudge, JudgeConfig

    server = ScriptedJudgeServer(answers)
    judge = ChatJudge(JudgeConfig(url=server.url, model="scripted", retries=0))
    try:
        verdicts = [graded_reply(task, r, judge, golden_steps=golden_steps) for r in replies]
    finally:
        judge.close()
        server.close()
    question = norm(task.world_state()[domain]["rubrics_yesno"][0])
    sent = [norm(r["body"]["messages"][-1]["content"]) for r in server.requests]
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * len(sent)
    assert all(question in t for t in sent)
    return verdicts, sent


def unreachable_judge_verdict(task, reply: str, *, golden_steps: bool = False):
    """The verdict of `reply` when the judge's address has nothing listening any more."""
    from trainer.env.grading.judge import ChatJudge, JudgeConfig

    server = ScriptedJudgeServer([])
    url = server.url
    server.close()
    judge = ChatJudge(JudgeConfig(url=url, model="gone", retries=0, timeout_s=2))
    try:
        return graded_reply(task, reply, judge, golden_steps=golden_steps)
    finally:
        judge.close()
