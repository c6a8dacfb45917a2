"""Golden replay: a dataset doctor (`tbt validate-golden`, whose command is in `trainer/cli.py`).

For each task: a fresh sandbox, the golden actions (`golden_test_case.tool_interactions`)
replayed in order, effects, the test → it must pass. So must each alternative path
(`golden_test_case.alternatives: [{tool_interactions}]`: another tool sequence reaching the
required end state; see `Task.golden_paths`). There is no agent text in a replay, so
judge questions are not asked: they are counted as not evaluated (answered yes), and the
database part of the check decides.

`--perturb` asks whether the check really reads what the golden actions write. A golden call is
*state-changing* when the end state differs with and without it. Each state-changing call is
dropped, and each of its arguments mutated type-preservingly, one at a time, each in a fresh
session. A task is *sensitive* when dropping at least one call fails its check; every
perturbation that still passes is listed (an unchecked write, an unstable field or a weak check).
`--noop` replays nothing: the check must fail unless the golden actions change nothing.

Every replay is timed as an episode is (trainer/core/timings.py: the session start and its parts,
tool calls, effects, the test, teardown); `validate_golden`'s summary carries their sum over every
replay (`timings`: perturbations and noops included), the table `tbt validate-golden` prints.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.core.timings import KEYS as TIMING_KEYS
from trainer.core.timings import Breakdown

from trainer.env.grading.context import Judge, TestContext, ToolCall, ToolCallRecord
from trainer.env.errors import TaskFormatError
from trainer.env.grading.grader import Verdict, grade_async
from trainer.env.db.backend import state_hash
from trainer.env.sandbox.mcp_host import Sandbox, SandboxError, ServerRegistry, strip_sources
from trainer.env.taskformat.tasks import Task

Action = tuple[str, str, dict[str, Any]]  # (server, tool, parameters)
_GOLDEN_KEYS = ("golden_db_state", "golden_db_hash", "diff", "rubrics", "rubrics_yesno", "golden_errors")


class ReplayJudge(Judge):
    """Asks no one: the grader records each question as not evaluated and answers yes, so the
    database part decides (a free-form completion cannot be stood in for: a system error)."""

    evaluates = False


@dataclass
class Replay:
    verdict: Verdict
    fingerprint: str | None  # hash of the end state over all servers; None on a system error
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase, as an episode's
    calls: int = 0  # tool calls made


def state_fingerprint(effects: dict[str, dict[str, Any]]) -> str:
    """The end state only: each server's `result_db_hash`, else its `result_db_state`, else the
    effects without the golden-side keys."""
    parts = {}
    for server, fx in sorted(effects.items()):
        if "result_db_hash" in fx:
            parts[server] = fx["result_db_hash"]
        elif "result_db_state" in fx:
            parts[server] = fx["result_db_state"]
        else:
            parts[server] = {k: v for k, v in fx.items() if k not in _GOLDEN_KEYS}
    return state_hash(parts)


def mutations(value: Any) -> list[Any]:
    """Type-preserving changes of one argument value (none for None, dicts and empty lists)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1]
    if isinstance(value, float):
        return [value + 1.0]
    if isinstance(value, str):
        return [value + "_x" if value else "x"]
    if isinstance(value, list) and value:
        return [value[:-1]]
    return []


async def replay(task: Task, registry: ServerRegistry, actions: list[Action], *,
                 world_state: dict[str, Any] | None, timeout: float) -> Replay:
    """One fresh session: the actions, effects, the test (each phase timed)."""
    judge = ReplayJudge()
    t0 = time.perf_counter()
    tm = dict.fromkeys(TIMING_KEYS, 0.0)
    calls: list[ToolCallRecord] = []
    sb = Sandbox(task, registry, world_state=world_state, call_timeout=timeout)
    opened = False

    def spent(key: str, since: float) -> None:
        tm[key] += time.perf_counter() - since

    def parts() -> None:
        tm.update({f"open_{p}": v for p, v in sb.open_seconds.items()})
    try:
        t = time.perf_counter()
        async with sb:
            spent("open", t)
            opened = True
            for server, tool, params in actions:
                t = time.perf_counter()
                text = await sb.call_tool(tool, params, server=server)
                spent("tools", t)
                calls.append(ToolCallRecord(ToolCall(tool, params), text))
            t = time.perf_counter()
            effects = await sb.effects()
            spent("effects", t)
            query, _, _ = task.formatted(sb.init_result)
            ctx = TestContext(response="", effects=effects, tool_calls=calls,
                              messages=[{"role": "user", "content": query}],
                              init_result=sb.init_result, session_id=sb.session_id,
                              metadata=dict(task.metadata))
            t_close = time.perf_counter()
        spent("close", t_close)
    except (SandboxError, TaskFormatError) as e:
        if not opened:
            spent("open", t)
        parts()
        tm["total"] = time.perf_counter() - t0
        return Replay(Verdict.system_failure(str(e)), None, tm, len(calls))
    parts()
    t, ran = time.perf_counter(), {"seconds": 0.0}
    verdict = await grade_async(task, ctx, judge, ran=ran)
    spent("grade", t)
    tm["grade_wait"] = max(0.0, tm["grade"] - ran["seconds"])
    tm["total"] = time.perf_counter() - t0
    return Replay(verdict, state_fingerprint(effects), tm, len(calls))


async def check_task(task: Task, registry: ServerRegistry, *, perturb: bool, noop: bool,
                     strip: bool, timeout: float, timings: Breakdown | None = None) -> dict[str, Any]:
    """Everything validate-golden learns about one task, as a JSON-ready dict (each replay's
    timings added to `timings`)."""
    ws = strip_sources(task.world_state()) if strip else None
    try:
        paths = task.golden_paths()
    except TaskFormatError as e:
        return {"uid": task.uid, "golden": Verdict.system_failure(str(e)).to_dict()}
    actions = paths[0]

    async def run(acts: list[Action]) -> Replay:
        r = await replay(task, registry, acts, world_state=ws, timeout=timeout)
        if timings is not None:
            timings.add(r.timings, {"tools": r.calls})
        return r

    full = await run(actions)
    out: dict[str, Any] = {"uid": task.uid, "golden": full.verdict.to_dict(),
                           "judge_not_evaluated": len(full.verdict.judge_calls)}
    if full.fingerprint is None:
        return out
    if len(paths) > 1:  # other tool sequences to the same required end state: each must pass too
        out["alternatives"] = []
        for j, alt in enumerate(paths[1:], 1):
            v = (await run(alt)).verdict
            out["alternatives"].append({"path": j, "passed": v.passed, "system_error": v.system_error,
                                        "explanation": v.explanation, "lineno": v.lineno})
    if perturb:
        changing, sensitive, passing = [], False, []
        for i, (server, tool, params) in enumerate(actions):
            dropped = await run(actions[:i] + actions[i + 1:])
            if dropped.fingerprint is None:
                out.setdefault("perturb_errors", []).append(
                    {"step": i, "tool": tool, "system_error": dropped.verdict.system_error})
                continue
            if dropped.fingerprint == full.fingerprint:
                continue  # read-only (or overwritten later): not a write the check must see
            changing.append(i)
            if dropped.verdict.passed:
                passing.append({"uid": task.uid, "kind": "drop", "step": i, "tool": tool})
            elif dropped.verdict.system_error is None:
                sensitive = True
            for arg, value in params.items():
                for new in mutations(value):
                    acts = list(actions)
                    acts[i] = (server, tool, {**params, arg: new})
                    mutated = await run(acts)
                    if mutated.verdict.passed:
                        passing.append({"uid": task.uid, "kind": "mutate", "step": i, "tool": tool,
                                        "argument": arg, "golden": value, "mutated": new,
                                        "state_changed": mutated.fingerprint != full.fingerprint})
        out["perturb"] = {"state_changing_steps": changing, "sensitive": sensitive, "passing": passing}
    if noop:
        nothing = await run([])
        expect_fail = nothing.fingerprint != full.fingerprint
        out["noop"] = {"passed": nothing.verdict.passed, "expected_to_fail": expect_fail,
                       "system_error": nothing.verdict.system_error}
    return out


def summarize(results: list[dict[str, Any]], *, perturb: bool, noop: bool,
              errors: Sequence[TaskFormatError] = ()) -> dict[str, Any]:
    """The `--json` object (issue 3 §5 keys plus details). `errors`: the dataset's load errors
    (tasks that could not be replayed), as `errors: [{file, line, key, message}]`."""
    golden = [r["golden"] for r in results]
    failures = []
    for r in results:
        g = r["golden"]
        if not g["passed"]:
            failures.append({"uid": r["uid"], "kind": "system_error" if g["system_error"] else "golden_failed",
                             "explanation": g["system_error"] or g["explanation"], "lineno": g["lineno"]})
    summary: dict[str, Any] = {
        "tasks": len(results),
        "passed": sum(g["passed"] for g in golden),
        "failed": sum(not g["passed"] and not g["system_error"] for g in golden),
        "system_errors": sum(bool(g["system_error"]) for g in golden),
        "judge_not_evaluated": sum(r.get("judge_not_evaluated", 0) for r in results),
    }
    alts = [(r["uid"], a) for r in results for a in r.get("alternatives", [])]
    failures += [{"uid": uid, "kind": "system_error" if a["system_error"] else "alternative_failed",
                  "explanation": f"alternative path {a['path']}: {a['system_error'] or a['explanation']}",
                  "lineno": a["lineno"]} for uid, a in alts if not a["passed"]]
    summary["alternatives"] = {"tasks": len({uid for uid, _ in alts}), "paths": len(alts),
                               "passed": sum(a["passed"] for _, a in alts)}
    if perturb:
        perturbed = [r for r in results if r.get("perturb", {}).get("state_changing_steps")]
        insensitive = [r["uid"] for r in perturbed if not r["perturb"]["sensitive"]]
        failures += [{"uid": u, "kind": "insensitive",
                      "explanation": "no dropped golden write makes the check fail"} for u in insensitive]
        failures += [{"uid": r["uid"], "kind": "perturb_system_error", "explanation": e}
                     for r in results for e in r.get("perturb_errors", [])]
        summary["perturbed"] = {
            "tasks": len(perturbed), "sensitive": len(perturbed) - len(insensitive),
            "read_only": [r["uid"] for r in results if "perturb" in r and not r["perturb"]["state_changing_steps"]],
            "passing_perturbations": [p for r in results for p in r.get("perturb", {}).get("passing", [])],
        }
    if noop:
        ran = [r for r in results if "noop" in r]
        failures += [{"uid": r["uid"], "kind": "noop_passed",
                      "explanation": "the check passes with no actions although the golden actions change the state"}
                     for r in ran if r["noop"]["passed"] and r["noop"]["expected_to_fail"]]
        summary["noop"] = {"tasks": len(ran), "passed": sum(r["noop"]["passed"] for r in ran),
                           "expected_to_pass": sum(not r["noop"]["expected_to_fail"] for r in ran)}
    summary["failures"] = failures
    summary["errors"] = [e.to_dict() for e in sorted(errors, key=lambda e: (str(e.file), e.line or 0))]
    summary["results"] = results
    return summary


async def validate_golden(tasks: list[Task], registry: ServerRegistry, *, perturb: bool = False,
                          noop: bool = False, strip: bool = False, concurrency: int = 4,
                          timeout: float = 30.0, errors: Sequence[TaskFormatError] = ()) -> dict[str, Any]:
    """Check every task (up to `concurrency` at once) and return the summary dict (`errors`: the
    dataset's load errors, reported with it; `timings`: where the replays' time went,
    `Breakdown.to_json()`)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    timings = Breakdown()

    async def one(t: Task) -> dict[str, Any]:
        async with gate:
            return await check_task(t, registry, perturb=perturb, noop=noop, strip=strip, timeout=timeout,
                                    timings=timings)

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(t) for t in tasks))
    summary = summarize(list(results), perturb=perturb, noop=noop, errors=errors)
    summary["timings"] = {**timings.to_json(), "run_seconds": time.perf_counter() - t0}
    if registry.uses_fork():  # how the process servers started: forks, spawns, proofs, fallbacks
        summary["process_starts"] = registry.process_stats()
    return summary


def summary_text(s: dict[str, Any]) -> str:
    """The summary as `tbt validate-golden` prints it without `--json`."""
    lines: list[str] = []
    w = lines.append
    for r in s["results"]:
        g = r["golden"]
        mark = "pass" if g["passed"] else ("SYSERR" if g["system_error"] else "FAIL")
        extra = ""
        if "perturb" in r:
            p = r["perturb"]
            extra += (" sensitive" if p["sensitive"] else (" read-only" if not p["state_changing_steps"]
                                                          else " INSENSITIVE"))
            extra += f" passing-perturbations={len(p['passing'])}" if p["passing"] else ""
        if "noop" in r:
            extra += f" noop={'pass' if r['noop']['passed'] else 'fail'}"
        if r.get("alternatives"):
            extra += f" alternatives={sum(a['passed'] for a in r['alternatives'])}/{len(r['alternatives'])}"
        w(f"{mark:6} {r['uid']}{extra}\n")
        if not g["passed"]:
            w(f"       {(g['system_error'] or g['explanation'])[:300]}\n")
    w(f"\n{s['tasks']} task(s): {s['passed']} passed, {s['failed']} failed, {s['system_errors']} system error(s)")
    if s["judge_not_evaluated"]:
        w(f"; {s['judge_not_evaluated']} judge question(s) not evaluated")
    w("\n")
    if s["alternatives"]["paths"]:
        a = s["alternatives"]
        w(f"alternative golden paths: {a['passed']}/{a['paths']} passed ({a['tasks']} task(s))\n")
    if "perturbed" in s:
        p = s["perturbed"]
        w(f"perturbed: {p['sensitive']}/{p['tasks']} sensitive; {len(p['passing_perturbations'])} passing perturbation(s)\n")
        for q in p["passing_perturbations"]:
            what = f"drop step {q['step']} {q['tool']}" if q["kind"] == "drop" else \
                f"step {q['step']} {q['tool']}.{q['argument']}: {q['golden']!r} -> {q['mutated']!r}"
            w(f"  still passes: {q['uid']}  {what}\n")
    if "noop" in s:
        w(f"noop: {s['noop']['passed']}/{s['noop']['tasks']} passed "
          f"({s['noop']['expected_to_pass']} expected: golden changes nothing)\n")
    for name, st in s.get("process_starts", {}).items():
        w(f"server {name}: start {st['start']} -> {st['mode']}: {st['forks']} fork(s), {st['spawns']} spawn(s), "
          f"{st['proofs']} proof(s), {st['proofs_failed']} failed")
        w(f"; fallback: {st['fallback']}\n" if st["fallback"] else "\n")
    for f in s["failures"]:
        w(f"failure: {f['uid']} [{f['kind']}] {str(f['explanation'])[:200]}\n")
    return "".join(lines)


__all__ = ["ReplayJudge", "check_task", "mutations", "replay", "state_fingerprint", "summarize",
           "summary_text", "validate_golden"]
