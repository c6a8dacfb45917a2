"""Re-verification (`tbt reverify`): each stored episode's executed tool calls replayed in a fresh
sandbox and regraded; the verdict must come out identical (docs/evaluation.md, "Re-verification").

A reward is meant to be reproducible from its record. For every scored record of ours:

1. Its task is looked up in the dataset by uid (gone: a change, "task not in the dataset"). A task
   whose `fingerprint()` differs from the record's (its query, user context or init changed since
   the run) is named in `fingerprint_changed`, and still replayed.
2. A fresh `Sandbox`, opened as `run_episode` opens it: the record's budgets (`EpisodeConfig`:
   call and open timeouts, `strip_sources`, the tool order of `agent_view`), the registry of
   `make_registry`, the dataset's agent.
3. The calls that reached a server, in order: the record's `tool_calls` without a `problem` (a
   call tb_interpret rejected never ran) whose tool is not a builtin of the sandbox's view. A
   replayed result that differs from the recorded one is listed (`results`: a server change).
4. Effects, then the test (`grade_async`, isolated when the run was) on the `TestContext` the
   episode built: the last visible assistant text, the effects, the replayed calls, the record's
   messages and the texts tools showed the user. The judge answers from the record's
   `verdict.judge_calls`, in order (`RecordedJudge`): a question the run did not ask, or asked
   otherwise, cannot be answered (a system error in the new verdict, shown in its diff); with
   `reask` a judge is asked again (`judge`, else the record's judge spec).
5. The new verdict, with its diff against the golden state, compared field by field with the
   record's (`passed`, `reward`, `system_error`, `explanation`, `lineno`, `judge_calls`, `diff`):
   identical, or changed with every differing field and the golden-diff rows that differ.

Not replayed (`skipped`): system-error records (never scored) and `tb infer` records (no tool
calls to replay). `reverify` returns a `Summary`; its `to_json()` is `tbt reverify --json`'s
`{"records", "identical", "changed": [...], "fingerprint_changed": [...], "results_differ": [...],
"skipped": [...]}` (`results_differ`: identical verdicts whose replayed tool results differ).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.core import tb_interpret as ti
from trainer.env.errors import TaskFormatError
from trainer.env.grading.chat_types import Text, as_messages
from trainer.env.grading.context import Judge, TestContext, ToolCall, ToolCallRecord
from trainer.env.grading.grader import Verdict, grade_async
from trainer.env.grading.judge import JudgeAmbiguous, JudgeUnavailable
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, strip_sources
from trainer.env.taskformat.tasks import Agent, Dataset, Task
from trainer.rollout import agentview
from trainer.formats.attempts import Attempt
from trainer.rollout.episode import EpisodeConfig
from trainer.rollout.setup import make_judge

VERDICT_FIELDS = ("passed", "reward", "system_error", "explanation", "lineno", "judge_calls", "diff")


class RecordedJudge(Judge):
    """Answers a test's judge questions with the answers a record holds (`verdict.judge_calls`), in
    the order they were asked. A question that is not the next recorded one (a changed test asks
    something else), or one past the record's, raises `JudgeUnavailable` naming both; a recorded
    ambiguous answer raises `JudgeAmbiguous` again, as the run's judge did."""

    def __init__(self, calls: Sequence[dict[str, Any]]):
        self.calls = list(calls)
        self.used = 0

    def _next(self, question: str) -> dict[str, Any]:
        i = self.used
        if i >= len(self.calls):
            raise JudgeUnavailable(f"reverify: the test asks judge question {i + 1} ({question[:120]!r}); the run "
                                   f"recorded {len(self.calls)} (--reask-judge asks a judge)")
        call = self.calls[i]
        if call.get("question") != question:
            raise JudgeUnavailable(f"reverify: judge question {i + 1} is now {question[:120]!r}; the run asked "
                                   f"{str(call.get('question'))[:120]!r} (--reask-judge asks a judge)")
        self.used += 1
        if call.get("ambiguous") is not None:
            raise JudgeAmbiguous(question, list(call["ambiguous"]))
        return call

    def _bool(self, question: str) -> bool:
        answer = self._next(question).get("answer")
        if not isinstance(answer, bool):
            raise JudgeUnavailable(f"reverify: the recorded answer to {question[:120]!r} is {answer!r}, not yes or no")
        return answer

    def text_yesno(self, text: str, question: str) -> bool:
        return self._bool(question)

    def evaluate_bool(self, system: str, user: str) -> bool:
        return self._bool(user)

    def yesno(self, question: str) -> bool:
        return self._bool(question)

    def compare_yesno(self, first: str, second: str, question: str) -> bool:
        return self._bool(question)

    def no_repeat(self, first: str, second_list: list[str]) -> bool:
        # the question as the grader's recording judge words it
        return self._bool(f"no_repeat: does the first text repeat none of {len(list(second_list))} others?")

    def _motivated(self, text: str, question: str) -> dict[str, Any]:
        call = self._next(question)
        return {k: v for k, v in call.items() if k != "question"}

    def _get_text_completion(self, messages: list[Any]) -> Text:
        messages = as_messages(list(messages))
        asked = messages[-1].content if messages and isinstance(messages[-1], Text) else ""
        return Text(role="assistant", content=str(self._next(asked).get("answer") or ""))


@dataclass
class Outcome:
    """One record re-verified."""

    uid: str
    repetition: int | None
    where: str  # file:line
    status: str  # identical | changed | skipped
    reason: str = ""  # skipped: why; changed: what could not be replayed, when that is the change
    fingerprint_changed: bool = False
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)  # field -> {recorded, replayed}
    rows: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # server -> {recorded_only, replayed_only}
    results: list[dict[str, Any]] = field(default_factory=list)  # tool results that differ
    replayed_calls: int = 0

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: v for k, v in d.items() if v not in ("", {}, [], False) or k in ("uid", "repetition", "status")}


@dataclass
class Summary:
    outcomes: list[Outcome]

    def of(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def changed(self) -> list[Outcome]:
        return self.of("changed")

    def to_json(self) -> dict[str, Any]:
        return {"records": len(self.outcomes), "identical": len(self.of("identical")),
                "changed": [o.to_json() for o in self.changed],
                "fingerprint_changed": [f"{o.uid} #{o.repetition}" for o in self.outcomes if o.fingerprint_changed],
                "results_differ": [f"{o.uid} #{o.repetition}" for o in self.of("identical") if o.results],
                "skipped": [{"uid": o.uid, "repetition": o.repetition, "where": o.where, "reason": o.reason}
                            for o in self.of("skipped")]}


def executed_calls(record: dict[str, Any], tools: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(index in `tool_calls`, call) of each call that reached a server in the episode: not
    rejected by tb_interpret (no `problem`), not a builtin of the agent's view (`tools`)."""
    builtin = {t["name"] for t in tools if t.get("builtin")}
    return [(i, c) for i, c in enumerate(record.get("tool_calls") or [])
            if not c.get("problem") and c.get("name") not in builtin]


def last_response(messages: Sequence[dict[str, Any]]) -> str:
    """The episode's last visible assistant text, as the loop kept it: a text turn's content (a
    message without calls), or a text a tool showed the user (`direct`)."""
    response = ""
    for m in messages:
        if m.get("role") != "assistant":
            continue
        if m.get("direct"):
            response = m.get("content") or ""
        elif not m.get("tool_calls") and m.get("content"):
            response = m["content"]
    return response


def episode_config(budgets: dict[str, Any] | None) -> EpisodeConfig:
    """The record's budgets as an `EpisodeConfig` (fields this version does not know are left out)."""
    known = {f.name for f in dataclasses.fields(EpisodeConfig)}
    return EpisodeConfig(**{k: v for k, v in (budgets or {}).items() if k in known})


async def replay_record(record: dict[str, Any], task: Task, registry: ServerRegistry, agent: Agent,
                        judge: Judge) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The record's episode replayed (module docstring, steps 2-4): (the new verdict as a record
    holds it, with its `diff`; the tool results that differ from the recorded ones; calls
    replayed). A sandbox fault is the verdict's system error."""
    cfg = episode_config(record.get("budgets"))
    ws = strip_sources(task.world_state()) if cfg.strip_sources else None
    differ: list[dict[str, Any]] = []
    calls: list[ToolCallRecord] = []
    try:
        async with Sandbox(task, registry, agent, call_timeout=cfg.call_timeout, open_timeout=cfg.open_timeout,
                           world_state=ws, tool_order=agentview.tool_order(cfg.agent_view)) as sb:
            for i, c in executed_calls(record, sb.tools):
                args = dict(c.get("arguments") or {})
                text = ti.valid_unicode(await sb.call_tool(c["name"], args))
                calls.append(ToolCallRecord(ToolCall(c["name"], args), text))
                if text != c.get("result"):
                    differ.append({"call": i, "tool": c["name"], "paths": json_paths_differ(c.get("result"), text),
                                   "recorded": c.get("result"), "replayed": text})
            effects = await sb.effects()
            init_result, session_id = sb.init_result, sb.session_id
    except (SandboxError, TaskFormatError) as e:
        return {**Verdict.system_failure(f"replay: {e}").to_dict(), "diff": {}}, differ, len(calls)
    messages = record.get("messages") or []
    ctx = TestContext(response=last_response(messages), effects=effects, tool_calls=calls, messages=messages,
                      init_result=init_result, session_id=session_id, metadata=dict(task.metadata),
                      tool_direct_responses=[m.get("content") or "" for m in messages if m.get("direct")])
    verdict = await grade_async(task, ctx, judge, isolate=cfg.isolate_tests)
    return ({**verdict.to_dict(),
             "diff": {s: fx["diff"] for s, fx in effects.items() if isinstance(fx, dict) and "diff" in fx}},
            differ, len(calls))


def json_paths_differ(a: Any, b: Any, limit: int = 5) -> list[str]:
    """Where two tool results differ: the JSON paths of the differing values (`loan.recorded_at`,
    `items[2]`) when both are JSON texts, else `["(text)"]`; at most `limit`."""
    try:
        a, b = json.loads(a), json.loads(b)
    except (TypeError, ValueError):
        return ["(text)"]
    out: list[str] = []

    def walk(x: Any, y: Any, path: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in dict.fromkeys([*x, *y]):
                walk(x.get(k), y.get(k), f"{path}.{k}" if path else str(k))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{path}[{i}]")
        elif x != y or type(x) is not type(y):
            out.append(path or "(value)")

    walk(a, b, "")
    return out or ["(text)"]


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)


def compare_verdicts(recorded: dict[str, Any], replayed: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(field -> {recorded, replayed} for each differing verdict field, server -> {recorded_only,
    replayed_only} golden-diff rows). Values are compared as JSON (a record is JSON)."""
    fields = {}
    for k in VERDICT_FIELDS:
        a, b = recorded.get(k), json.loads(_canon(replayed.get(k)))
        if k == "diff":
            a, b = a or {}, b or {}
        if _canon(a) != _canon(b):
            fields[k] = {"recorded": a, "replayed": b}
    rows = {}
    if "diff" in fields:
        a, b = fields["diff"]["recorded"], fields["diff"]["replayed"]
        for server in dict.fromkeys([*a, *b]):
            ra, rb = [_canon(r) for r in a.get(server, [])], [_canon(r) for r in b.get(server, [])]
            only_a = [json.loads(r) for r in ra if r not in rb]
            only_b = [json.loads(r) for r in rb if r not in ra]
            if only_a or only_b:
                rows[server] = {"recorded_only": only_a, "replayed_only": only_b}
        fields["diff"] = {"recorded": f"{sum(len(v) for v in a.values())} row(s)",
                          "replayed": f"{sum(len(v) for v in b.values())} row(s)"}
    return fields, rows


class NoJudgeSpec(ValueError):
    """A record to re-ask whose judge cannot be rebuilt from it (no spec, a chat judge): skipped."""


class JudgeSource:
    """The judge a replay grades with: the record's answers (`RecordedJudge`), or with `reask` a
    judge built by `make_judge` from `spec` (else the record's judge spec, `run.judge`; a record
    without one: its judge identity's kind, when that is synthetic or none), one per spec. A bad
    `spec` raises `SpecError` at once, before any replay."""

    def __init__(self, reask: bool = False, spec: str | None = None):
        self.reask, self.spec = reask, spec
        self.made: dict[str, Judge] = {}
        if reask and spec is not None:
            self._made(spec)

    def _made(self, spec: str) -> Judge:
        if spec not in self.made:
            self.made[spec] = make_judge(None if spec == "$TBT_JUDGE_URL" else spec, synthetic_policy=False)[0]
        return self.made[spec]

    def for_record(self, record: dict[str, Any]) -> Judge:
        if not self.reask:
            return RecordedJudge((record.get("verdict") or {}).get("judge_calls") or [])
        spec = self.spec or (record.get("run") or {}).get("judge")
        if spec is None:
            kind = (record.get("judge") or {}).get("kind")
            if kind not in ("synthetic", "none"):
                raise NoJudgeSpec(f"the record names no judge spec (its judge: {kind!r}): give --judge SPEC")
            spec = kind
        return self._made(spec)

    def close(self) -> None:
        for j in self.made.values():
            close = getattr(j, "close", None)
            if close is not None:
                close()


async def reverify_one(a: Attempt, dataset: Dataset, registry: ServerRegistry, agent: Agent,
                       judges: JudgeSource) -> Outcome:
    out = Outcome(a.uid, a.repetition, a.where, "identical")
    record = a.record
    if a.format != "ours" or record is None:
        out.status, out.reason = "skipped", "a tb infer record: no tool calls to replay"
        return out
    if a.system_error is not None:
        out.status, out.reason = "skipped", f"a system error, never scored ({a.system_error[:200]})"
        return out
    task = dataset.tasks.get(a.uid)
    if task is None:
        out.status, out.reason = "changed", "task not in the dataset"
        return out
    out.fingerprint_changed = bool(a.fingerprint) and a.fingerprint != task.fingerprint()
    try:
        judge = judges.for_record(record)
    except NoJudgeSpec as e:
        out.status, out.reason = "skipped", str(e)
        return out
    verdict, out.results, out.replayed_calls = await replay_record(record, task, registry, agent, judge)
    out.fields, out.rows = compare_verdicts(record.get("verdict") or {}, verdict)
    if out.fields:
        out.status = "changed"
    return out


async def reverify_async(attempts: Sequence[Attempt], dataset: Dataset, registry: ServerRegistry, agent: Agent, *,
                         judges: JudgeSource, concurrency: int = 4,
                         progress: Callable[[Outcome], None] | None = None) -> Summary:
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(a: Attempt) -> Outcome:
        async with gate:
            o = await reverify_one(a, dataset, registry, agent, judges)
        if progress is not None:
            progress(o)
        return o

    return Summary(list(await asyncio.gather(*(one(a) for a in attempts))))


def reverify(attempts: Sequence[Attempt], dataset: Dataset, registry: ServerRegistry, agent: Agent, *,
             reask: bool = False, judge: str | None = None, concurrency: int = 4,
             progress: Callable[[Outcome], None] | None = None) -> Summary:
    """Re-verify these attempts (read with `read_attempts(..., keep_records=True)`) against
    `dataset` (module docstring); the registry is closed by the caller. `SpecError`: a judge spec
    that cannot be read."""
    judges = JudgeSource(reask, judge)
    try:
        return asyncio.run(reverify_async(attempts, dataset, registry, agent, judges=judges,
                                          concurrency=concurrency, progress=progress))
    finally:
        judges.close()


def _short(x: Any, n: int = 160) -> str:
    s = x if isinstance(x, str) and x else json.dumps(x, ensure_ascii=False, default=str)  # "" shows as ""
    return s if len(s) <= n else s[:n - 1] + "…"


def describe(o: Outcome) -> list[str]:
    """The lines `tbt reverify` prints for one changed record."""
    lines = [f"changed  {o.uid} #{o.repetition}  ({o.where})" + (f": {o.reason}" if o.reason else "")]
    if o.fingerprint_changed:
        lines.append("  the task's content changed since the run (fingerprint)")
    for k, v in o.fields.items():
        lines.append(f"  {k}: {_short(v['recorded'])} -> {_short(v['replayed'])}")
    for server, r in o.rows.items():
        lines += [f"  diff {server}: - {_short(row)}  (only in the record)" for row in r["recorded_only"]]
        lines += [f"  diff {server}: + {_short(row)}  (only in the replay)" for row in r["replayed_only"]]
    for d in o.results[:5]:
        lines.append(f"  tool result of call {d['call']} {d['tool']} differs at {', '.join(d['paths'])}: "
                     f"{_short(d['recorded'], 100)} -> {_short(d['replayed'], 100)}")
    if len(o.results) > 5:
        lines.append(f"  ... {len(o.results) - 5} more tool result(s) differ")
    return lines


def summary_text(s: Summary) -> str:
    """What `tbt reverify` prints without `--json`."""
    lines: list[str] = []
    for o in s.changed:
        lines += describe(o)
    fp = [f"{o.uid} #{o.repetition}" for o in s.outcomes if o.fingerprint_changed]
    if fp:
        lines.append(f"fingerprint changed ({len(fp)}): " + ", ".join(fp[:10]) + (" ..." if len(fp) > 10 else ""))
    where: dict[str, int] = {}  # "tool: paths" -> identical records where a result differs there
    for o in s.of("identical"):
        for key in dict.fromkeys(f"{d['tool']}: {', '.join(d['paths'])}" for d in o.results):
            where[key] = where.get(key, 0) + 1
    if where:
        lines.append(f"note  {sum(1 for o in s.of('identical') if o.results)} record(s) with the same verdict have "
                     "tool results that differ (a clock or a generated id in a result, or a server change; "
                     "--json lists them): " + "; ".join(f"{k} ({n})" for k, n in where.items()))
    for o in s.of("skipped"):
        lines.append(f"skipped  {o.uid} #{o.repetition}  ({o.where}): {o.reason}")
    n, same = len(s.outcomes), len(s.of("identical"))
    lines.append(f"{n} record(s): {same} identical, {len(s.changed)} changed, {len(s.of('skipped'))} skipped")
    return "\n".join(lines)


def records_dataset_names(attempts: Sequence[Attempt]) -> list[str]:
    """The dataset names the records' run identities give (to say which folder `--dataset` wants)."""
    names = [((a.record or {}).get("run") or {}).get("dataset", {}).get("name") for a in attempts]
    return sorted({n for n in names if n})


__all__ = ["JudgeSource", "NoJudgeSpec", "Outcome", "RecordedJudge", "Summary", "compare_verdicts", "describe", "episode_config",
           "executed_calls", "json_paths_differ", "last_response", "records_dataset_names", "replay_record", "reverify",
           "reverify_async", "reverify_one", "summary_text"]
