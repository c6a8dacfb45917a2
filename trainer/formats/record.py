"""The episode record: one JSON line per (task uid, repetition), shared by `tbt run`, probes,
training rollouts and evaluation. Every metric is computed from these.

Version 1 fields (`EpisodeRecord`; every field is written, absent values are null):

    version       RECORD_VERSION
    uid           the task's uid ("<file basename>:<test name>")
    repetition    0-based index of this run of the task
    seed          the episode's seed (policy sampling, synthetic deviations, user)
    attempt       0 for the first try; n for the n-th re-run after system errors
    scenario      the task's scenario name
    fingerprint   `Task.fingerprint()`: SHA-256 of the task's query, user context and init (records
                  of a task whose content has since changed are told apart)
    family        the model family whose markup was read ("hermes" | "xml")
    sampling      the policy's sampling {temperature, top_p, top_k, max_tokens (per turn)}
    budgets       the episode's settings (`EpisodeConfig`: token, time, context and turn budgets,
                  timeouts, isolation)
    policy, user, judge
                  identities: {"kind", "model"?, "url"?, ...}, never a key or a header
    run           the run identity (trainer/formats/identity.py): {policy, user, judge (the specs,
                  secrets removed), seed (the run seed), dataset {name, test_list, tasks,
                  fingerprint}, and in training the verl group it came in, `group`}; {} in records
                  written before it existed (no identity)
    messages      the episode as OpenAI-style chat dicts: system, user (the query first), assistant
                  (`content`, `reasoning_content`, `tool_calls` with typed `arguments` and an `id`;
                  a call tb_interpret rejected carries `"problem"`), tool (`tool_call_id`, `name`,
                  `content` as the agent saw it). Assistant text a tool showed the user directly
                  is an assistant message with `"direct": true`.
    tokens        `TokenTrace` (the token path) or `TurnTokens` (the chat path), written as
                  training path only: {"prompt_ids", "response_ids", "response_mask" (1: the
                  model's), "logprobs" (one per response id, null where not the model's),
                  "weight_versions" (verl's agent loop: the [first, last] weight version, verl's
                  `global_steps`, each generation call came from, in order; two differ where a
                  weight sync cut the turn and it resumed on the new weights; null where the
                  server stamps none), "turn_kinds" (one per run of the model's ids, what it
                  follows: "first" (the prompt), "tool" (tool results), "user" (a user reply) or "self"
                  (the model's own empty turn, re-prompted))}; the
                  OpenAI path keeps {"prompt_ids", "response_ids"} per turn in `turns` when the
                  server returns them
    tool_calls    [{"name", "arguments", "result", "problem"?, "seconds"}] in call order
    verdict       {passed, reward, system_error, explanation, lineno, judge_calls, diff}; `diff`
                  maps server -> [{path, type, result, golden}] (what explains a 0)
    end_reason    done | end_turn_tool | agent_limit | agent_turn_cap | empty_turns | user_limit | no_user_llm |
                  token_budget | time_budget | context_limit | system_error
    system_error  null, or "<where>: <cause>" (then the episode is never scored)
    usage         {"agent": {calls, input_tokens, output_tokens}, "user": {...}, "judge": {calls}}
    timings       seconds per phase (trainer/core/timings.py): open (the session start) and its parts
                  open_in_process, open_spawn, open_fork, open_reuse, open_remote (each server's
                  connection by how it started), open_proof, open_init; agent (waiting on the
                  policy), user, tools (server calls), effects, grade (the test) and its parts judge
                  and grade_wait (queued for a thread and the event loop), close (teardown), total
                  (the episode's wall time). The counts beside them are
                  `usage.*.calls` and the `tool_calls` with `seconds` (`phase_counts`). Records
                  written before the parts, judge and grade_wait existed have the others; older
                  ones none
    turns         {"agent": n, "user": n}: agent turns counted as max_agent_sim_turns counts them
    started_at    ISO 8601 UTC
    synthetic     true when any model output came from the synthetic policy

`reward` and `passed` are properties of the verdict; `key` is (uid, repetition).

Encoding: UTF-8 JSON, one line, redacted (no API key or auth header, trainer/core/redact.py). Any Python string is written, even one UTF-8 cannot encode: a
lone surrogate (U+D800..U+DFFF, e.g. from a `\\ud800` escape in an endpoint's JSON) is written as
its JSON escape (`\\ud800`), which is valid JSON and reads back as the same string.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from trainer.core.redact import redact
from trainer.core.tb_interpret import DEFAULT_FAMILY
from trainer.core.timings import Breakdown

RECORD_VERSION = 1
END_REASONS = ("done", "end_turn_tool", "agent_limit", "agent_turn_cap", "empty_turns", "user_limit", "no_user_llm", "token_budget",
               "time_budget", "context_limit", "system_error")


@dataclass
class TokenTrace:
    """The token path's trajectory (training's agent loop, `tokens:` and `hf:` policies): the ids
    the model was given and gave, exactly as they went in and out (never re-rendered)."""

    prompt_ids: list[int]
    response_ids: list[int]  # every id after the prompt: generated, tool and user turns as template deltas
    response_mask: list[int]  # 1: the model's, 0: added by the loop
    logprobs: list[float | None]  # one per response id; None where not the model's
    weight_versions: list[Any] | None = None  # verl's agent loop: [first, last] weight version per generation call
    turn_kinds: list[str] | None = None  # per run of mask-1 ids, what it follows: "first", "tool", "user", "self"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("weight_versions", "turn_kinds"):  # written only where the loop records them
            if d[key] is None:
                del d[key]
        return d


@dataclass
class TurnTokens:
    """The chat path's token ids per turn, where the server returns them (`token_ids=1`)."""

    turns: list[dict[str, list[int]]] = field(default_factory=list)  # [{prompt_ids, response_ids}] in turn order

    def to_dict(self) -> dict[str, Any]:
        return {"turns": [dict(t) for t in self.turns]}


def tokens_from(d: Mapping[str, Any] | None) -> TokenTrace | TurnTokens | None:
    """A record's `tokens` block read back (`EpisodeRecord.from_dict`)."""
    if d is None:
        return None
    if "turns" in d:
        return TurnTokens([dict(t) for t in d["turns"]])
    return TokenTrace(**d)


@dataclass
class EpisodeRecord:
    uid: str
    repetition: int
    seed: int
    scenario: str = ""
    fingerprint: str = ""
    family: str = DEFAULT_FAMILY
    attempt: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    judge: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    tokens: TokenTrace | TurnTokens | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] = field(default_factory=dict)
    end_reason: str = "system_error"
    system_error: str | None = None
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    started_at: str = ""
    synthetic: bool = False
    version: int = RECORD_VERSION

    @property
    def key(self) -> tuple[str, int]:
        return (self.uid, self.repetition)

    @property
    def reward(self) -> float:
        return float(self.verdict.get("reward") or 0.0)

    @property
    def passed(self) -> bool:
        return bool(self.verdict.get("passed")) and self.system_error is None

    def phase_counts(self) -> dict[str, int]:
        """The counts beside the timings: model calls of the agent and the user, judge questions,
        and the tool calls that reached a server (those with `seconds`)."""
        u = self.usage or {}
        return {"agent": int((u.get("agent") or {}).get("calls") or 0), "user": int((u.get("user") or {}).get("calls") or 0),
                "judge": int((u.get("judge") or {}).get("calls") or 0),
                "tools": sum(1 for c in self.tool_calls if isinstance(c, dict) and "seconds" in c)}

    def to_dict(self) -> dict[str, Any]:
        tokens = self.tokens
        d = dataclasses.asdict(dataclasses.replace(self, tokens=None))
        d["tokens"] = None if tokens is None else tokens.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"), default=_jsonable)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeRecord:
        v = d.get("version")
        if v != RECORD_VERSION:
            raise ValueError(f"episode record version {v!r} is not {RECORD_VERSION} (uid {d.get('uid')!r})")
        fields = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        if "tokens" in fields:
            fields["tokens"] = tokens_from(fields["tokens"])
        return cls(**fields)


def timing_breakdown(records: Iterable[EpisodeRecord]) -> Breakdown:
    """Where these episodes' time went (trainer/core/timings.py): their timings summed per phase;
    a record without timings is counted in `untimed`."""
    return Breakdown.of((r.timings, r.phase_counts()) for r in records)


def _jsonable(x: Any) -> Any:
    """Values a tool or test may hand back that JSON has no type for."""
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    return repr(x)


_TB_PASS_WORDS = {"pass", "passed", "success", "succeeded", "ok", "true"}


def tb_result_passed(result: Any, reward: Any) -> bool:
    """Whether a ThinkingBox framework record's `test_result` says the task passed (`tb infer`
    JSONL; docs/data-preparation.md, "Probe records"): `result` true (or "pass", "passed", "success", ...) or >= 1, or a
    reward of 1. The one reader of that field (probes and evaluation use it)."""
    if isinstance(result, bool):
        return result
    if isinstance(result, str) and result.strip().lower() in _TB_PASS_WORDS:
        return True
    if isinstance(result, (int, float)) and result >= 1:
        return True
    return isinstance(reward, (int, float)) and not isinstance(reward, bool) and reward >= 1


class RecordFileError(ValueError):
    """A records file line that is not a record (names the file and line)."""


def read_records(path: str | Path, *, repair: bool = False) -> list[EpisodeRecord]:
    """Every record of a JSONL file, in order. A last line without its newline (a write cut by a
    crash) is dropped, and with `repair` cut off the file, so appending stays line-aligned; any
    other unreadable line is a `RecordFileError` naming the line."""
    return [r for _, r in _iter_records(Path(path), repair)]


def cut_torn_tail(path: Path, data: bytes | None = None) -> bool:
    """Cut a last line without its newline (a write cut by a crash) off a JSONL file, so appending
    stays line-aligned; True when there was one. `data`: the file's bytes, when already read."""
    data = path.read_bytes() if data is None else data
    if not data or data.endswith(b"\n"):
        return False
    with open(path, "r+b") as f:
        f.truncate(data.rfind(b"\n") + 1)
    return True


def _iter_records(path: Path, repair: bool) -> Iterator[tuple[int, EpisodeRecord]]:
    if not path.exists():
        return
    data = path.read_bytes()
    end = len(data)
    if data and not data.endswith(b"\n"):  # torn tail: the episode it held is re-run
        end = data.rfind(b"\n") + 1
        if repair:
            cut_torn_tail(path, data)
    for lineno, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield lineno, EpisodeRecord.from_dict(json.loads(line))
        except (ValueError, TypeError) as e:
            raise RecordFileError(f"{path}:{lineno}: not an episode record: {e}") from None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_line(line: str) -> bytes:
    """One JSON line as UTF-8 bytes, newline added, redacted (trainer/core/redact.py: no key or
    auth header reaches a records file, whatever an endpoint echoed). A lone surrogate (only ever inside a JSON
    string: the JSON syntax is ASCII) becomes its `\\uXXXX` escape: still valid JSON, the same
    string when read back."""
    line = redact(line)
    try:
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line) + "\n").encode("utf-8")


class RecordWriter:
    """Appends records, one line each, flushed and fsynced as written: a crash loses only the
    episodes in flight, never a finished one, and never leaves half a line behind but the last
    (which `read_records` drops)."""

    def __init__(self, path: str | Path, *, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "ab", buffering=0)  # one write per line: whole lines when processes share a file
        self._fsync = fsync

    def write(self, record: EpisodeRecord) -> None:
        self.write_line(record.to_json())

    def write_line(self, line: str) -> None:
        """One JSON line of any record type (the serving proxy's parity records use this too)."""
        self._f.write(encode_line(line))
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["END_REASONS", "RECORD_VERSION", "EpisodeRecord", "RecordFileError", "RecordWriter", "TokenTrace", "TurnTokens",
           "cut_torn_tail", "encode_line", "read_records", "tb_result_passed", "timing_breakdown", "tokens_from"]
