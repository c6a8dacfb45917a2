"""Before a campaign: what would make every episode fail is found once, in seconds, and named.

`check_endpoints(setup)`: one cheap request to each configured endpoint, all at once: the policy
(`openai:` → a 1-token chat completion; `tokens:` → a 1-token completion), the simulated user
(`openai:`) and the judge (`openai:`, or `TBT_JUDGE_URL`). An endpoint that is unreachable, refuses
the key, or has no such path or model (trainer/rollout/http.py `probe`) is a `PreflightError`
naming each one: `tbt run`, `tbt probe`, `tbt eval` and `tbt quickstart` exit 2 before any episode
and before any record is written (a dead policy endpoint used to cost one error record per
attempt of every episode).

`judged_tasks(tasks)`: the uids whose test uses the judge it is given (read from the test's code:
`trainer.env.grading.grader.asks_judge`). A run whose judge is `none` refuses them up front
(`PreflightError`) instead of failing each as a system error after its retries; `skip_judged`
plays the rest and says which were left out.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from trainer.env.grading.grader import asks_judge
from trainer.env.taskformat.tasks import Task
from trainer.rollout.http import Endpoint, EndpointError, probe
from trainer.rollout.policy import SpecError

PING = [{"role": "user", "content": "ping"}]


class PreflightError(SpecError):
    """What the run's setup cannot do, found before any episode (each problem on its line)."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _targets(setup: Any) -> list[tuple[str, Endpoint, str, dict[str, Any]]]:
    out: list[tuple[str, Endpoint, str, dict[str, Any]]] = []
    policy = setup.policy
    ep = getattr(policy, "endpoint", None)
    if isinstance(ep, Endpoint):
        model = getattr(policy, "model", "")
        if getattr(policy, "kind", "") == "tokens":
            out.append(("policy", ep, "/completions", {"model": model, "prompt": "ping", "max_tokens": 1}))
        else:
            out.append(("policy", ep, "/chat/completions", {"model": model, "messages": PING, "max_tokens": 1}))
    user = setup.user
    uep = getattr(user, "endpoint", None)
    if isinstance(uep, Endpoint):
        out.append(("user", uep, "/chat/completions",
                    {"model": getattr(user, "model", ""), "messages": PING, "max_tokens": 1}))
    cfg = getattr(setup.judge, "config", None)
    if cfg is not None and isinstance(getattr(cfg, "url", None), str):
        jep = Endpoint(cfg.url, getattr(cfg, "api_key", None), timeout_s=float(getattr(cfg, "timeout_s", 60.0)))
        out.append(("judge", jep, "/chat/completions",
                    {"model": getattr(cfg, "model", ""), "messages": PING, "max_tokens": 1}))
    return out


async def check_endpoints(setup: Any, *, timeout_s: float = 10.0) -> None:
    """Probe every configured endpoint of `setup` at once; `PreflightError` naming each that fails."""
    targets = _targets(setup)
    results = await asyncio.gather(*(probe(ep, path, body, timeout_s=timeout_s) for _, ep, path, body in targets),
                                   return_exceptions=True)
    problems = []
    for (role, ep, _, _), res in zip(targets, results):
        if isinstance(res, EndpointError):
            problems.append(f"{role} endpoint: {res}")
        elif isinstance(res, BaseException):
            problems.append(ep.scrub(f"{role} endpoint: {ep.where()}: {type(res).__name__}: {res}"))
    if problems:
        raise PreflightError([*problems, "nothing was run: fix the endpoint(s) above (or their specs) and run again"])


def judged_tasks(tasks: Sequence[Task]) -> list[str]:
    """The uids of `tasks` whose test asks the judge."""
    out = []
    for t in tasks:
        try:
            fn = t.test_function()
        except Exception:  # a test that does not compile: its episode reports it
            continue
        if asks_judge(fn, dict(t.scenario.fixtures)):
            out.append(t.uid)
    return out


def refuse_judged(tasks: Sequence[Task], judge_identity: dict[str, Any], *, skip: bool) -> tuple[list[Task], list[str]]:
    """(the tasks to play, the uids left out). With no judge (`kind: none`), tasks that ask one are a
    `PreflightError` listing them, or with `skip` left out."""
    if judge_identity.get("kind") != "none":
        return list(tasks), []
    judged = set(judged_tasks(tasks))
    if not judged:
        return list(tasks), []
    if skip:
        return [t for t in tasks if t.uid not in judged], sorted(judged)
    shown = sorted(judged)
    raise PreflightError([f"{len(judged)} task(s) ask a judge and this run has none (--judge none): "
                          + ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else ""),
                          "give one (--judge openai:URL#MODEL, or TBT_JUDGE_URL and TBT_JUDGE_MODEL), "
                          "or leave those tasks out (--skip-judged)"])


__all__ = ["PreflightError", "check_endpoints", "judged_tasks", "refuse_judged"]
