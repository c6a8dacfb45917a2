"""One episode: the agent–user loop on a fresh sandbox, then effects -> verdict -> teardown.

The one implementation behind `tbt run`, probes, evaluation and the verl agent loop; each writes
the `EpisodeRecord` it returns. Semantics (ThinkingBox's; docs/episodes.md, "One episode"):

- The prompt is the task's (system 1: agent instructions; system 2: scenario + test bot
  instructions; history; the query as the first user message), rendered by tb_interpret for the
  configured family (system messages merged, tools block); the tools are the sandbox's view.
- Each agent turn is read only by tb_interpret. Its calls run in order through the sandbox; a call
  tb_interpret rejected is answered with its message instead (it does not run); an end-turn tool
  ends the episode where it stands (calls after it do not run). Then the model is called again.
- Builtin tools do not reach a server: one with `direct_response` answers with it (formatted
  with the call's arguments), others answer "OK". A tool with `direct_response` also shows that
  text to the user as an assistant message (formatted with the tool's JSON output), after which
  the turn passes to the user.
- A turn with visible text and no calls passes to the user, unless its text ends with `<DONE>`.
- A turn with neither calls nor visible text (empty, or reasoning only: with thinking on, text
  without `</think>` is all reasoning) is asked again and is not an agent turn, as in the
  framework's loop; more than `EpisodeConfig.max_empty_turns` (3) of them in a row end the episode
  with `empty_turns` (a model or endpoint that answers nothing costs 4 requests, not the turn cap).
- Ends (`end_reason`): `done`; `end_turn_tool`; `agent_limit` once `max_agent_sim_turns` agent
  turns were taken (each tool-call group and each visible text counts; a task that sets no limit
  gets `EpisodeConfig.max_agent_turns`, 200 by default, so no episode loops forever); `empty_turns`;
  `no_user_llm` when the turn passes to a user and there is none (no user, or no user context);
  `user_limit` when the user would speak more than `max_user_sim_turns` times. Budgets
  (`EpisodeConfig`) end it the same clean way: `token_budget` (the agent's generated tokens),
  `time_budget` (wall seconds, checked before each model and tool call), `context_limit` (the
  conversation reached the model's context, or on the token path the response window
  `max_response_tokens`, verl's `response_length`). All of these are the agent's outcome: graded.
- Infrastructure faults are system errors: the sandbox (`SandboxError`: a crash, a hang, an
  unreachable server), the policy (`PolicyError`: endpoint down, garbage), the user (`UserError`),
  the judge (the verdict's `system_error`), and any unexpected exception. The record then has
  `system_error` set, `end_reason: "system_error"`, and is never scored; the runner re-runs it.

Token path (a policy with a tokenizer): a `TokenTrajectory` keeps the prompt ids, every generated
id as generated (mask 1, with its logprob) and each tool/user turn as a template delta (mask 0);
nothing is re-rendered. The record's `tokens` holds them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from trainer.core import tb_interpret as ti
from trainer.core.timings import KEYS as TIMING_KEYS
from trainer.env.grading.context import TestContext, ToolCall, ToolCallRecord
from trainer.env.errors import TaskFormatError
from trainer.env.grading.grader import grade_async
from trainer.env.grading.judge import ASKING_METHODS, Judge
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, strip_sources
from trainer.env.taskformat.tasks import Agent, Task
from trainer.rollout import agentview
from trainer.rollout.http import EndpointError
from trainer.rollout.config import EpisodeConfig  # noqa: F401  (declared with a run's options; re-exported)
from trainer.rollout.policy import EpisodeInfo, Policy, PolicyError, PolicySession
from trainer.formats.record import EpisodeRecord, TokenTrace, TurnTokens
from trainer.rollout.user import SimulatedUser, UserError, UserTurn

DONE = "<DONE>"


@dataclass
class EpisodeSetup:
    """What the episodes of a run share."""

    registry: ServerRegistry
    agent: Agent
    policy: Policy
    user: SimulatedUser | None
    judge: Judge
    judge_identity: dict[str, Any]
    config: EpisodeConfig
    toolsets: dict[str, ti.Toolset] = field(default_factory=dict)  # compiled once per tool list

    def toolset(self, schemas: list[dict[str, Any]]) -> ti.Toolset:
        """The compiled `Toolset` of a tool list (schema checks cost ~0.2 s a list: done once a run)."""
        key = json.dumps(schemas, sort_keys=True, default=str)
        if key not in self.toolsets:
            self.toolsets[key] = ti.Toolset(schemas)
        return self.toolsets[key]


class _End(Exception):
    def __init__(self, reason: str):
        self.reason = reason


class _Loop:
    """The state of one episode between its sandbox opening and its effects."""

    def __init__(self, task: Task, setup: EpisodeSetup, sb: Sandbox, rec: EpisodeRecord, info: EpisodeInfo):
        self.task, self.setup, self.sb, self.rec, self.info = task, setup, sb, rec, info
        self.policy = setup.policy
        self.cfg = setup.config
        self.session: PolicySession = self.policy.session(info)
        self.t0 = time.perf_counter()
        self.by_name = {t["name"]: t for t in sb.tools}
        self.schemas = agentview.tool_schemas(sb.tools, self.cfg.agent_view)  # what the model is shown
        self.toolset = setup.toolset(agentview.validation_schemas(sb.tools))  # what calls are checked against
        query, self.user_context, _ = task.formatted(sb.init_result)
        self.query = query
        rec.messages = task.prompt(setup.agent, sb.init_result)
        self.wire = ti.merge_system(rec.messages)  # what a chat endpoint is sent
        self.traj = None
        self.logprobs: list[float | None] = []
        if self.policy.tokenizer is not None:
            self.traj = ti.TokenTrajectory.start(self.policy.tokenizer, rec.messages, family=self.policy.family,
                                                 tools=self.schemas, enable_thinking=self.policy.thinking)
        self.executed: list[ToolCallRecord] = []
        self.direct: list[str] = []
        self.response = ""  # the last visible assistant text
        self.generated = 0
        self.agent_turns = 0
        self.user_turns = 0
        self.context = 0
        self.max_context = self.cfg.max_context or self.policy.max_context

    # -- budgets
    def _check_time(self) -> None:
        if self.cfg.max_episode_seconds is not None and time.perf_counter() - self.t0 >= self.cfg.max_episode_seconds:
            raise _End("time_budget")

    def _turn_tokens(self) -> int:
        n = self.policy.sampling.max_tokens
        if self.cfg.max_episode_tokens is not None:
            n = min(n, self.cfg.max_episode_tokens - self.generated)
            if n <= 0:
                raise _End("token_budget")
        if self.max_context is not None:
            used = len(self.traj.ids) if self.traj is not None else self.context
            n = min(n, self.max_context - used)
            if n <= 0:
                raise _End("context_limit")
        if self.cfg.max_response_tokens is not None and self.traj is not None:
            n = min(n, self.cfg.max_response_tokens - len(self.traj.response_ids))
            if n <= 0:
                raise _End("context_limit")
        return n

    # -- one model turn
    async def _generate(self) -> ti.Completion:
        self._check_time()
        max_tokens = self._turn_tokens()
        t = time.perf_counter()
        try:
            if self.traj is not None:
                gen = await self.session.generate(self.traj.ids, max_tokens=max_tokens)
            else:
                gen = await self.session.chat(list(self.wire), self.schemas, max_tokens=max_tokens)
        except EndpointError as e:
            raise PolicyError(f"policy endpoint: {e}") from None
        finally:
            self.rec.timings["agent"] += time.perf_counter() - t
        usage = self.rec.usage["agent"]
        usage["calls"] += 1
        kw: dict[str, Any] = {"family": self.policy.family, "tools": self.toolset, "thinking": self.policy.thinking}
        try:
            if self.traj is not None:
                if not gen.ids:
                    raise PolicyError("the policy generated no token ids")
                completion = ti.parse_ids(gen.ids, self.policy.tokenizer, **kw)
                self.traj.add_generated(gen.ids)
                lp = gen.logprobs if gen.logprobs is not None and len(gen.logprobs) == len(gen.ids) else [None] * len(gen.ids)
                self.logprobs += lp
                n_out, n_in = len(gen.ids), len(self.traj.prompt_ids) + len(self.traj.response_ids) - len(gen.ids)
                raw = None
            else:
                raw, finish = (gen.text, gen.finish) if gen.text is not None else ti.response_text(gen.response or {})
                completion = ti.parse(raw, finish="length" if finish == "length" else "stop", **kw)
                n_out, n_in = gen.output_tokens, gen.input_tokens
                if gen.ids is not None:
                    if not isinstance(self.rec.tokens, TurnTokens):
                        self.rec.tokens = TurnTokens()
                    self.rec.tokens.turns.append({"prompt_ids": gen.prompt_ids, "response_ids": gen.ids})
        except ti.InterpretError as e:
            raise PolicyError(f"policy answered something that is not a completion: {e}") from None
        usage["input_tokens"] += n_in
        usage["output_tokens"] += n_out
        self.generated += n_out
        self.context = n_in + n_out
        if raw is not None:
            self.wire.append({"role": "assistant", "content": raw})
        return completion

    def _assistant_message(self, c: ti.Completion, ids: list[str]) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": c.content}
        if c.reasoning is not None:
            msg["reasoning_content"] = c.reasoning
        if c.calls:
            msg["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments},
                                  **({"problem": call.problem} if call.problem else {})}
                                 for i, call in zip(ids, c.calls)]
        if c.finish == "length":
            msg["finish"] = "length"
        return msg

    # -- tools
    async def _run_call(self, call: ti.ToolCall) -> str:
        if not call.executable:
            return call.message or "Error: this call was not executed"
        spec = self.by_name.get(call.name)
        if spec is not None and spec["builtin"]:
            text = spec["direct_response"] or "OK"
            try:
                text = text.format(**call.arguments)
            except (KeyError, IndexError, ValueError, AttributeError):
                pass
            if spec["direct_response"]:
                self._show(text)
            return text
        t = time.perf_counter()
        try:
            text = ti.valid_unicode(await self.sb.call_tool(call.name, dict(call.arguments)))  # goes into requests
        finally:
            took = time.perf_counter() - t
            self.rec.timings["tools"] += took
        self.executed.append(ToolCallRecord(ToolCall(call.name, dict(call.arguments)), text))
        self.rec.tool_calls[-1]["seconds"] = round(took, 6)  # the same measure as timings.tools
        if spec is not None and spec["direct_response"]:
            self._show(_fill(spec["direct_response"], text))
        return text

    def _show(self, text: str) -> None:
        self.direct.append(text)  # its message follows the turn's tool replies (`_tools`)
        self.response = text

    async def _tools(self, c: ti.Completion) -> None:
        ids = [f"call_{self.agent_turns}_{i}" for i in range(len(c.calls))]
        self.rec.messages.append(self._assistant_message(c, ids))
        replies: list[dict[str, Any]] = []
        shown = len(self.direct)
        ended = False
        try:
            for call_id, call in zip(ids, c.calls):
                spec = self.by_name.get(call.name)
                if call.executable and spec is not None and spec["is_end_turn"]:
                    ended = True
                    break
                if call.executable:
                    self._check_time()  # before the call is listed: a call cut by the budget never ran
                self.rec.tool_calls.append({"name": call.name, "arguments": call.arguments,
                                            **({"problem": call.problem} if call.problem else {})})
                text = await self._run_call(call)
                self.rec.tool_calls[-1]["result"] = text
                reply = {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": text}
                replies.append(reply)
        finally:  # the replies of the calls that ran, even when a budget cut the group
            self.rec.messages += replies
            self.rec.messages += [{"role": "assistant", "content": t, "direct": True} for t in self.direct[shown:]]
            self.wire += [{"role": "tool", "tool_call_id": r["tool_call_id"], "content": r["content"]}
                          for r in replies]
        if ended:
            raise _End("end_turn_tool")
        if self.traj is not None and replies:
            self._extend([{"role": "tool", "content": r["content"]} for r in replies])
        if len(self.direct) > shown:
            await self._to_user(self.direct[-1])

    def _extend(self, messages: list[dict[str, Any]]) -> None:
        delta = self.traj.add_turns(messages)
        self.logprobs += [None] * len(delta)

    # -- the user
    async def _to_user(self, text: str) -> None:
        user = self.setup.user
        if user is None or not (self.user_context or "").strip():
            raise _End("no_user_llm")
        if self.user_turns >= self.task.max_user_sim_turns:
            raise _End("user_limit")
        turn = UserTurn(self.query, self.user_context or "", _visible(self.rec.messages), text, self.info.seed)
        t = time.perf_counter()
        try:
            reply = await user.reply(turn)
        except EndpointError as e:
            raise UserError(f"user endpoint: {e}") from None
        finally:
            self.rec.timings["user"] += time.perf_counter() - t
        self.user_turns += 1
        u = self.rec.usage["user"]
        u["calls"] += 1
        u["input_tokens"] += reply.input_tokens
        u["output_tokens"] += reply.output_tokens
        msg = {"role": "user", "content": ti.valid_unicode(reply.text)}  # an endpoint's \ud800 escape: U+FFFD
        self.rec.messages.append(msg)
        self.wire.append(msg)
        if self.traj is not None:
            self._extend([msg])

    # -- the loop
    async def run(self) -> str:
        capped = self.task.max_agent_sim_turns is None  # the framework: no limit; ours: a safety cap
        limit = self.cfg.max_agent_turns if capped else self.task.max_agent_sim_turns
        at_limit = "agent_turn_cap" if capped else "agent_limit"
        empty = 0  # empty or reasoning-only turns in a row
        try:
            while True:
                if limit is not None and self.agent_turns >= limit:
                    raise _End(at_limit)
                c = await self._generate()
                if not c.calls and not c.content:  # nothing said: asked again, not an agent turn
                    self.rec.messages.append(self._assistant_message(c, []))
                    if self.traj is not None:
                        self._extend([])
                    empty += 1
                    if empty > self.cfg.max_empty_turns:
                        raise _End("empty_turns")
                    continue
                empty = 0
                self.agent_turns += 1
                if c.calls:
                    await self._tools(c)
                    continue
                self.rec.messages.append(self._assistant_message(c, []))
                self.response = c.content
                if c.content.rstrip().endswith(DONE):
                    raise _End("done")
                if limit is not None and self.agent_turns >= limit:
                    raise _End(at_limit)
                await self._to_user(c.content)
        except _End as e:
            return e.reason


def tool_schemas(tools: list[dict[str, Any]], view: str = "thinkingbox") -> list[dict[str, Any]]:
    """The sandbox's tool view as the OpenAI function schemas the prompt renders (agentview.py)."""
    return agentview.tool_schemas(tools, view)


async def opening_prompt(task: Task, registry: ServerRegistry, agent: Agent, *, strip: bool = False,
                         view: str = "thinkingbox") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the opening messages, the tool schemas) an episode of `task` starts from: what its prompt
    renders (a sandbox is opened for the tool listing and the init result, then closed)."""
    ws = strip_sources(task.world_state()) if strip else None
    async with Sandbox(task, registry, agent, world_state=ws, tool_order=agentview.tool_order(view)) as sb:
        return task.prompt(agent, sb.init_result), tool_schemas(sb.tools, view)


def _fill(template: str, output: str) -> str:
    """A `direct_response` format string filled from the tool's JSON output (as is when it is not
    a JSON object or names a field the output lacks)."""
    try:
        data = json.loads(output)
        return template.format(**data) if isinstance(data, dict) else template.format(data)
    except (ValueError, KeyError, IndexError, AttributeError):
        return template


def _visible(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages
            if m["role"] in ("user", "assistant") and isinstance(m.get("content"), str) and m["content"].strip()]


def _new_record(task: Task, repetition: int, seed: int, attempt: int, setup: EpisodeSetup) -> EpisodeRecord:
    user = setup.user
    return EpisodeRecord(
        uid=task.uid, repetition=repetition, seed=seed, attempt=attempt, scenario=task.scenario.name,
        fingerprint=task.fingerprint(), family=setup.policy.family, policy=setup.policy.identity(),
        sampling=dataclasses.asdict(setup.policy.sampling), budgets=dataclasses.asdict(setup.config),
        user=user.identity() if user is not None else {"kind": "none"}, judge=dict(setup.judge_identity),
        usage={"agent": {"calls": 0, "input_tokens": 0, "output_tokens": 0},
               "user": {"calls": 0, "input_tokens": 0, "output_tokens": 0}, "judge": {"calls": 0}},
        timings=dict.fromkeys(TIMING_KEYS, 0.0),
        started_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        synthetic=setup.policy.synthetic or bool(user is not None and user.synthetic))


async def run_episode(task: Task, setup: EpisodeSetup, *, repetition: int = 0, seed: int = 0,
                      attempt: int = 0) -> EpisodeRecord:
    """Play `task` once and return its record (never raises for an infrastructure fault: those
    are the record's `system_error`)."""
    rec = _new_record(task, repetition, seed, attempt, setup)
    cfg = setup.config
    t_start = time.perf_counter()
    loop: _Loop | None = None
    sb: Sandbox | None = None
    t_open: float | None = None
    stage = "open"
    try:
        ws = strip_sources(task.world_state()) if cfg.strip_sources else None
        sb = Sandbox(task, setup.registry, setup.agent, call_timeout=cfg.call_timeout,
                     open_timeout=cfg.open_timeout, world_state=ws, tool_order=agentview.tool_order(cfg.agent_view))
        t_open = time.perf_counter()
        async with sb:
            rec.timings["open"] = time.perf_counter() - t_open
            _open_parts(rec, sb)
            stage = "episode"
            loop = _Loop(task, setup, sb, rec, EpisodeInfo(task, repetition, seed))
            rec.end_reason = await loop.run()
            stage = "effects"
            t = time.perf_counter()
            effects = await sb.effects()
            rec.timings["effects"] = time.perf_counter() - t
            t_close = time.perf_counter()
        rec.timings["close"] = time.perf_counter() - t_close
    except (SandboxError, PolicyError, UserError, TaskFormatError) as e:
        _opening_failed(rec, sb, t_open, stage)
        return _failed(rec, str(e), loop, t_start)
    except Exception as e:  # a bug of ours or of a component: never a score, and visible
        _opening_failed(rec, sb, t_open, stage)
        return _failed(rec, f"internal error during {stage}: {type(e).__name__}: {e}", loop, t_start,
                       traceback.format_exc(limit=8))
    _finish(rec, loop)
    ctx = TestContext(response=loop.response, effects=effects, tool_calls=loop.executed, messages=rec.messages,
                      init_result=sb.init_result, session_id=sb.session_id, metadata=dict(task.metadata),
                      tool_direct_responses=loop.direct)
    judge, ran = _TimedJudge(setup.judge), {"seconds": 0.0}
    t = time.perf_counter()
    verdict = await grade_async(task, ctx, judge, isolate=cfg.isolate_tests, ran=ran)
    rec.timings["grade"] = time.perf_counter() - t
    rec.timings["judge"] = judge.seconds
    rec.timings["grade_wait"] = max(0.0, rec.timings["grade"] - ran["seconds"])
    rec.verdict = {**verdict.to_dict(),
                   "diff": {s: fx["diff"] for s, fx in effects.items() if isinstance(fx, dict) and "diff" in fx}}
    rec.usage["judge"]["calls"] = len(verdict.judge_calls)
    if verdict.system_error is not None:
        rec.system_error = f"grading: {verdict.system_error}"
        rec.end_reason = "system_error"
    rec.timings["total"] = time.perf_counter() - t_start
    return rec


class _TimedJudge(Judge):
    """The run's judge for one grading, timed: each asking method goes to `inner` (which keeps no
    state between questions, judge.py) and the seconds spent waiting on it add up in `seconds`
    (the record's `timings.judge`, a part of `grade`)."""

    def __init__(self, inner: Judge):
        self.inner = inner
        self.evaluates = getattr(inner, "evaluates", True)
        self.seconds = 0.0

    def _timed(self, method: str, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return getattr(self.inner, method)(*args)
        finally:
            self.seconds += time.perf_counter() - t


for _method in ASKING_METHODS:
    setattr(_TimedJudge, _method, functools.partialmethod(_TimedJudge._timed, _method))
del _method


def _open_parts(rec: EpisodeRecord, sb: Sandbox) -> None:
    """Where the session start went, as the sandbox measured it (`timings.open_<part>`)."""
    for part, seconds in sb.open_seconds.items():
        rec.timings[f"open_{part}"] = seconds


def _opening_failed(rec: EpisodeRecord, sb: Sandbox | None, t_open: float | None, stage: str) -> None:
    """A system error: what the session start took, when it was opening that failed."""
    if sb is None:
        return
    if stage == "open" and t_open is not None:
        rec.timings["open"] = time.perf_counter() - t_open
    _open_parts(rec, sb)


def _finish(rec: EpisodeRecord, loop: _Loop | None) -> None:
    if loop is None:
        return
    rec.turns = {"agent": loop.agent_turns, "user": loop.user_turns}
    if loop.traj is not None:
        t = loop.traj
        rec.tokens = TokenTrace(prompt_ids=t.prompt_ids, response_ids=t.response_ids, response_mask=t.response_mask,
                                logprobs=loop.logprobs, turn_kinds=list(t.turn_kinds))


def _failed(rec: EpisodeRecord, cause: str, loop: _Loop | None, t_start: float, explanation: str = "") -> EpisodeRecord:
    _finish(rec, loop)
    rec.system_error = cause
    rec.end_reason = "system_error"
    rec.verdict = {"passed": False, "reward": 0.0, "system_error": cause, "explanation": explanation,
                   "lineno": None, "judge_calls": [], "diff": {}}
    rec.timings["total"] = time.perf_counter() - t_start
    return rec


__all__ = ["DONE", "EpisodeConfig", "EpisodeSetup", "opening_prompt", "run_episode", "tool_schemas"]
