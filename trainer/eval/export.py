"""Our records -> the ThinkingBox framework's `tb infer` rows (`tbt export --format tb-infer`), so the
framework's own `tb agg` (and anything else written for its output) reads our runs.

One row per (uid, repetition), as `tb infer` writes one per task × repetition: the scored record
of the key, else (a key only system errors reached: unresolved) its last system-error attempt;
attempts a later scored one replaced are not rows. A row is the framework's `DecodeResult`, as we
read its shape (docs/evaluation.md, "Export"):

    uid             the task uid
    messages        the episode as the framework types it (trainer/env/grading/chat_types.py):
                    `Text` (role system/user/assistant; metadata `tag` "think" for reasoning,
                    "direct" for text a tool showed the user; `is_done` on a reply ending in
                    <DONE>), `ParallelToolCall` of `ToolCall`s (metadata `error` on a call that was
                    not run, `is_end_turn_tool` on an end-turn call), `ToolResponse`; each with `T`
    test_result     {result, reward, is_system_error, tb, prints, lineno, line_content, metadata
                    {judge_calls, diff}}; null when the episode itself failed (then the row's
                    `is_system_error` is true and `metadata.error` says why)
    test_context, test_tags, tools, raw_messages, user_llm_history
                    null (what `tb infer` leaves out unless asked to dump it; tags: the
                    framework validates them against its own taxonomy)
    usage           [{input_tokens, input_tokens_details {cached_tokens}, output_tokens,
                    output_tokens_details {reasoning_tokens}, total_tokens}]: one entry holding
                    the agent's totals (ours are not kept per call; reasoning tokens not counted
                    apart: 0). The user's and judge's tokens are in `metadata.tbt.usage`.
    metadata        {scenario, test_case_name, repetition, fingerprint, execution_time,
                    time_agent, time_user, time_tool, time_test, error?, tbt {end_reason, seed,
                    attempt, family, synthetic, turns, run_id, usage}}
    is_system_error the episode failed outside its test (a grading fault is the test result's)
    finish_reason   ours mapped to the framework's: done, end_turn_tool, agent_limit (our
                    agent_turn_cap too), user_limit, no_user_llm; agent_error for the outcomes it
                    has no name for (empty_turns, token_budget, time_budget, context_limit); ours
                    is kept in `metadata.tbt.end_reason`

`tbt aggregate` reads the rows back (trainer/formats/attempts.py) to the same tallies, pass@1,
pass@k and coverage as the records themselves.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Mapping

from trainer.env.grading.chat_types import ParallelToolCall, Text, ToolResponse, as_messages
from trainer.formats.attempts import Attempt, AttemptError, identity_groups, mixed_message, read_attempts
from trainer.formats.record import EpisodeRecord, encode_line

FORMATS = ("tb-infer",)
DONE_TAG = "<DONE>"
FINISH_REASONS = {"done": "done", "end_turn_tool": "end_turn_tool", "agent_limit": "agent_limit",
                  "agent_turn_cap": "agent_limit", "user_limit": "user_limit", "no_user_llm": "no_user_llm",
                  "empty_turns": "agent_error", "token_budget": "agent_error", "time_budget": "agent_error",
                  "context_limit": "agent_error", "system_error": "done"}
GRADING = "grading: "  # a system error of the test itself (trainer/rollout/episode.py): the test result's


class ExportError(ValueError):
    """Records that cannot be exported (names the file and line, or the runs)."""


@dataclass
class ExportReport:
    rows: int = 0  # rows written (one per uid × repetition)
    scored: int = 0
    system_errors: int = 0  # rows of keys only system errors reached (unresolved)
    replaced: int = 0  # system-error attempts a scored attempt of their key replaced (not rows)
    duplicates: list[str] = field(default_factory=list)  # "file:line: uid #rep" scored again (the first kept)
    torn: list[str] = field(default_factory=list)  # cut-off last lines, skipped
    left_out: dict[str, int] = field(default_factory=dict)  # keep_identity: other runs' record counts
    uneven: dict[int, int] = field(default_factory=dict)  # rows per task -> tasks, when tasks differ


def decode_result(rec: EpisodeRecord, run_id: str | None = None) -> dict[str, Any]:
    """One record as a `DecodeResult` row (a JSON-ready dict)."""
    sys_err = rec.system_error or (rec.verdict or {}).get("system_error")
    v = rec.verdict or {}
    test_error = bool(sys_err) and str(sys_err).startswith(GRADING)
    decode_error = bool(sys_err) and not test_error
    usage = rec.usage or {}
    agent = usage.get("agent") or {}
    inp, out = int(agent.get("input_tokens") or 0), int(agent.get("output_tokens") or 0)
    t = rec.timings or {}
    meta: dict[str, Any] = {
        "scenario": rec.scenario, "test_case_name": rec.uid.partition(":")[2], "repetition": rec.repetition,
        "fingerprint": rec.fingerprint or None, "execution_time": t.get("total", 0.0),
        "time_agent": t.get("agent", 0.0), "time_user": t.get("user", 0.0), "time_tool": t.get("tools", 0.0),
        "time_test": t.get("grade", 0.0),
        "tbt": {"end_reason": rec.end_reason, "seed": rec.seed, "attempt": rec.attempt, "family": rec.family,
                "synthetic": rec.synthetic, "turns": rec.turns, "run_id": run_id,
                "usage": {r: u for r, u in usage.items() if r != "agent"}},
    }
    if decode_error:
        where, _, _ = str(sys_err).partition(": ")
        meta["error"] = {"type": where or "system_error", "message": str(sys_err), "tb": ""}
    test_result = None
    if not decode_error:
        lineno = v.get("lineno")
        test_result = {"result": bool(v.get("passed")) and not sys_err,
                       "reward": 0.0 if sys_err else min(1.0, max(0.0, float(v.get("reward") or 0.0))),
                       "is_system_error": test_error, "tb": _tb_text(v.get("explanation"), sys_err), "prints": "",
                       "lineno": lineno if isinstance(lineno, int) else -1, "line_content": "",
                       "metadata": {"judge_calls": v.get("judge_calls") or [], "diff": v.get("diff") or {}}}
    return {
        "uid": rec.uid, "messages": _messages(rec), "test_result": test_result, "test_context": None,
        "test_tags": None, "tools": None, "raw_messages": None, "user_llm_history": None,
        "usage": [{"input_tokens": inp,
                   "input_tokens_details": {"cached_tokens": int(agent.get("cached_tokens") or 0)},
                   "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": inp + out}],
        "metadata": meta, "is_system_error": decode_error,
        "finish_reason": FINISH_REASONS.get(rec.end_reason, "agent_error"),
    }


def _tb_text(explanation: Any, sys_err: Any) -> str:
    """The test result's `tb`: the failure's explanation; for a test that could not be graded, its
    cause on the last line (where a traceback names the exception)."""
    text = str(explanation or "")
    if sys_err:
        cause = str(sys_err).removeprefix(GRADING)
        text = f"{text}\n{cause}" if text and not text.endswith(cause) else cause
    return text


def _messages(rec: EpisodeRecord) -> list[dict[str, Any]]:
    replies = {m.get("tool_call_id"): str(m.get("content") or "") for m in rec.messages if m.get("role") == "tool"}
    typed: list[Any] = []
    for m in rec.messages:
        new = as_messages([m])
        for msg in new:
            if isinstance(msg, Text) and msg.role == "assistant" and msg.tag == "text":
                if m.get("direct"):
                    msg.metadata["tag"] = "direct"
                elif msg.content.strip().endswith(DONE_TAG):
                    msg.metadata["is_done"] = True
            elif isinstance(msg, ParallelToolCall):
                for call, raw in zip(msg.tool_calls, m.get("tool_calls") or []):
                    if isinstance(raw, Mapping) and raw.get("problem"):
                        call.metadata["error"] = replies.get(call.id) or f"Error: {raw['problem']}"
                        call.metadata["problem"] = raw["problem"]
        typed += new
    if rec.end_reason == "end_turn_tool":  # the call that ended the episode: the last group's first unanswered one
        answered = {m.id for m in typed if isinstance(m, ToolResponse)}
        group = next((m for m in reversed(typed) if isinstance(m, ParallelToolCall)), None)
        call = next((c for c in (group.tool_calls if group else []) if c.id not in answered
                     and not c.metadata.get("error")), None)
        if call is not None:
            group.metadata["is_end_turn_tool"] = call.metadata["is_end_turn_tool"] = True
    return [dataclasses.asdict(m) for m in typed]


def export_tb_infer(paths: Iterable[str | Path], out: IO[bytes], *, keep_identity: str | None = None) -> ExportReport:
    """Write the `tb infer` rows of these record files (ours: runs and their errors files) to `out`.
    `ExportError`: a line that is not our record (file:line: field), or records of several runs
    unless `keep_identity` names the one to export."""
    paths = [Path(p) for p in paths]
    try:
        read = read_attempts(paths)
    except AttemptError as e:
        raise ExportError(str(e)) from None
    report = ExportReport(torn=list(read.torn))
    theirs = next((a for a in read.attempts if a.format != "ours"), None)
    if theirs is not None:
        raise ExportError(f"{theirs.where}: a tb infer row already (tbt export reads the records of tbt run / "
                          "tbt eval)")
    groups = identity_groups(read.attempts)
    attempts = read.attempts
    if keep_identity is not None:
        chosen = [g for g in groups if g.id == keep_identity]
        if not chosen:
            raise ExportError(f"--keep-identity {keep_identity}: no record of that run identity; the records have: "
                              + "; ".join(g.describe() for g in groups))
        report.left_out = {g.id: len(g.attempts) for g in groups if g.id != keep_identity}
        attempts, run_id = chosen[0].attempts, chosen[0].id
    elif len(groups) > 1:
        raise ExportError(mixed_message(groups, "export") + "\n  export each run's records on their own, or choose "
                          "one with --keep-identity ID (a tb infer row carries no run identity: once exported, "
                          "runs could not be told apart)")
    else:
        run_id = groups[0].id if groups else None
    chosen_keys = _one_per_key(attempts, report)
    wanted = {a.where: a for a in chosen_keys.values()}
    records = dict(_records(paths, wanted))
    run_id = None if run_id == "unknown" else run_id
    for key in sorted(chosen_keys, key=_order(chosen_keys)):
        a = chosen_keys[key]
        out.write(encode_line(json.dumps(decode_result(records[a.where], run_id), ensure_ascii=False,
                                         separators=(",", ":"), default=str)))
        report.rows += 1
        report.scored += a.system_error is None
        report.system_errors += a.system_error is not None
    per_task: dict[str, int] = {}
    for uid, _ in chosen_keys:
        per_task[uid] = per_task.get(uid, 0) + 1
    counts: dict[int, int] = {}
    for n in per_task.values():
        counts[n] = counts.get(n, 0) + 1
    if len(counts) > 1:
        report.uneven = dict(sorted(counts.items()))
    return report


def _one_per_key(attempts: list[Attempt], report: ExportReport) -> dict[tuple[str, int | None], Attempt]:
    """The scored attempt of each key (the first), else its last system-error attempt."""
    scored: dict[tuple[str, int | None], Attempt] = {}
    errors: dict[tuple[str, int | None], list[Attempt]] = {}
    for a in attempts:
        if a.system_error is not None:
            errors.setdefault(a.key, []).append(a)
        elif a.key in scored:
            report.duplicates.append(f"{a.where}: {a.uid} #{a.repetition} scored already at {scored[a.key].where} "
                                     "(the first kept)")
        else:
            scored[a.key] = a
    out = dict(scored)
    for key, errs in errors.items():
        if key in scored:
            report.replaced += len(errs)
        else:
            out[key] = errs[-1]
    return out


def _order(keys: Mapping[tuple[str, int | None], Attempt]):
    first: dict[str, int] = {}
    for i, (uid, _) in enumerate(keys):
        first.setdefault(uid, i)
    return lambda k: (first[k[0]], k[1] if k[1] is not None else -1)


def _records(paths: list[Path], wanted: Mapping[str, Attempt]) -> Iterable[tuple[str, EpisodeRecord]]:
    """The records at these `file:line` places (read_attempts already checked every line)."""
    for path in paths:
        for lineno, raw in enumerate(path.read_bytes().splitlines(), 1):
            where = f"{path}:{lineno}"
            if where in wanted:
                try:
                    yield where, EpisodeRecord.from_dict(json.loads(raw))
                except (ValueError, TypeError) as e:
                    raise ExportError(f"{where}: not an episode record: {e}") from None


def write_tb_infer(paths: Iterable[str | Path], output: str | Path, **kw: Any) -> ExportReport:
    """`export_tb_infer` into a file, atomically (a failed export leaves no half file)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            report = export_tb_infer(paths, f, **kw)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    return report


__all__ = ["FINISH_REASONS", "FORMATS", "ExportError", "ExportReport", "decode_result", "export_tb_infer",
           "write_tb_infer"]
