"""Records -> attempts: the one reader of episode records, in either record format, and the one
per-task tally (probes in trainer/data/ and evaluation in trainer/eval/ both read through here).

Told apart per line:
- ours (`trainer/formats/record.py`, `version` present): passed = the verdict's `passed`; a
  system error when `system_error` (or the verdict's) is set; usage per role from `usage.agent`,
  `usage.user`, `usage.judge` ({input_tokens, output_tokens[, cached_tokens]}), each role's model
  from the record's `policy` / `user` / `judge` identity (`model`); its run identity
  (`Attempt.identity`, trainer/formats/identity.py: None for a record written without one);
- the ThinkingBox framework's `tb infer` JSONL, its `DecodeResult` rows (docs/tasks.md): `uid`,
  `test_result {result, reward, is_system_error}` (null when the episode itself failed),
  `is_system_error`, `metadata {scenario, repetition, fingerprint?, error?}`, `usage
  [{input_tokens, input_tokens_details {cached_tokens}, output_tokens, output_tokens_details
  {reasoning_tokens}}]` (the agent's model calls; reasoning is part of output; an older flat
  `cached` is read too): passed when `result` is true (or "pass", "passed", "success") or the
  reward is 1 (`record.tb_result_passed`); a system error when `is_system_error` (the row's or
  the test result's) or `metadata.error` is set. It names no model (--price-model) and has no
  run identity; `metadata.fingerprint` is only in rows `tbt export` wrote.

`identity_groups` sorts attempts by run identity: what data/ and eval/ check before computing a
number from several records (records of different runs are never pooled silently).

A line that is neither is an `AttemptError` naming file, line and field (`read_attempts`), or,
with `skip_bad`, an error in `ReadResult.problems` while the rest is still read (probes). A last
line without its newline that is not JSON (a write cut by a crash) is skipped and reported in
`ReadResult.torn`.

A task's `Tally` is (n, c, system_errors): n scored attempts, c of them passed, and the attempts
with a system error (never scored: neither failures nor in n). `tally` counts attempts into them.

With `keep_records`, each attempt also holds its line's JSON object (`Attempt.record`): the whole
episode, for the commands that look inside it (`tbt reverify`, `tbt view`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainer.formats.identity import Identity, of_record
from trainer.formats.record import tb_result_passed


class AttemptError(ValueError):
    """A records line that cannot be read (`file:line: field: what`); `where` is `file:line` (or
    the file), `detail` the rest."""

    def __init__(self, where: str, detail: str):
        self.where, self.detail = where, detail
        super().__init__(f"{where}: {detail}")


@dataclass
class Usage:
    """Tokens one role spent under one model (input includes cached)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    records: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.cached_tokens += other.cached_tokens
        self.output_tokens += other.output_tokens
        self.records += other.records

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {"records": self.records, "input_tokens": self.input_tokens, "cached_tokens": self.cached_tokens,
                "output_tokens": self.output_tokens}


@dataclass(frozen=True)
class Tally:
    """One task: `n` scored attempts, `c` of them passed (0 ≤ c ≤ n), and `system_errors` attempts
    that were not scored."""

    n: int
    c: int
    system_errors: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.c <= self.n) or self.system_errors < 0:
            raise ValueError(f"a tally needs 0 <= c <= n and system_errors >= 0, got n={self.n}, c={self.c}, "
                             f"system_errors={self.system_errors}")


@dataclass
class Attempt:
    """One record, as probes and evaluation read it."""

    uid: str
    repetition: int | None
    passed: bool  # False for a system error
    system_error: str | None  # "<where>: <cause>" when the attempt is not scored
    where: str  # "file:line"
    scenario: str | None = None
    fingerprint: str | None = None
    usage: dict[str, Usage] = field(default_factory=dict)  # role -> tokens
    models: dict[str, str | None] = field(default_factory=dict)  # role -> model name from the identity
    identities: dict[str, Any] = field(default_factory=dict)  # policy/user/judge (ours only)
    format: str = "ours"  # or "tb"
    identity: Identity | None = None  # the run identity (ours, when the record carries one)
    record: dict[str, Any] | None = None  # the line's JSON object (read_attempts(keep_records=True))

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.uid, self.repetition)


@dataclass
class ReadResult:
    attempts: list[Attempt] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)  # "file:line" of cut-off last lines (skipped)
    problems: list[AttemptError] = field(default_factory=list)  # with skip_bad: why each line not read was not
    lines: int = 0  # non-blank lines seen (torn and unreadable ones included)


def read_attempts(paths: Iterable[str | Path], *, skip_bad: bool = False, keep_records: bool = False) -> ReadResult:
    """Every attempt of these JSONL files, in order. A line that is not a record is an
    `AttemptError` (file:line: field), or with `skip_bad` reported in `problems` and skipped; a
    file that cannot be read is always an `AttemptError` naming it. `keep_records`: each attempt
    keeps its line's object (`Attempt.record`)."""
    out = ReadResult()
    for path in paths:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise AttemptError(str(path), str(e.strerror)) from None
        lines = data.splitlines()
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            out.lines += 1
            where = f"{path}:{lineno}"
            try:
                try:
                    d = json.loads(raw)
                except ValueError as e:
                    if lineno == len(lines) and not data.endswith(b"\n"):
                        out.torn.append(where)
                        continue
                    raise AttemptError(where, f"not JSON ({e})") from None
                a = parse_attempt(d, where)
                if keep_records:
                    a.record = d
                out.attempts.append(a)
            except AttemptError as e:
                if not skip_bad:
                    raise
                out.problems.append(e)
    return out


def parse_attempt(d: Any, where: str) -> Attempt:
    """One record (ours or tb infer) as an `Attempt`; `AttemptError` names the field at fault."""
    if not isinstance(d, dict):
        raise AttemptError(where, "not a record (a JSON object)")
    uid = d.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AttemptError(where, f"uid: expected the task uid ('file.py:test_name'), got {uid!r}")
    if "version" in d:
        return _ours(d, uid, where)
    if "test_result" in d:
        return _tb(d, uid, where)
    raise AttemptError(where, "neither our record (no `version`) nor a tb infer record (no `test_result`)")


def tally(attempts: Iterable[Attempt]) -> dict[str, Tally]:
    """{uid: Tally} of these attempts, uids in first-seen order: a system-error attempt counts in
    `system_errors`, every other one in n (and in c when passed). Filtering (duplicates, unknown or
    changed tasks) is the caller's."""
    counts: dict[str, list[int]] = {}
    for a in attempts:
        t = counts.setdefault(a.uid, [0, 0, 0])
        if a.system_error is not None:
            t[2] += 1
        else:
            t[0] += 1
            t[1] += a.passed
    return {uid: Tally(n, c, e) for uid, (n, c, e) in counts.items()}


@dataclass
class IdentityGroup:
    """The attempts of one run identity (`identity` None: records that carry none)."""

    id: str  # Identity.id, or "unknown"
    identity: Identity | None
    attempts: list[Attempt] = field(default_factory=list)

    def describe(self) -> str:
        files = ", ".join(dict.fromkeys(a.where.rpartition(":")[0] for a in self.attempts))
        what = self.identity.describe() if self.identity is not None else (
            "no run identity (tb infer records, or records of an older tbt)")
        return f"{self.id}: {len(self.attempts)} record(s) in {files}: {what}"


def identity_groups(attempts: Iterable[Attempt]) -> list[IdentityGroup]:
    """The attempts by run identity, in first-seen order (one group: they belong together)."""
    out: dict[str, IdentityGroup] = {}
    for a in attempts:
        key = a.identity.id if a.identity is not None else "unknown"
        out.setdefault(key, IdentityGroup(key, a.identity)).attempts.append(a)
    return list(out.values())


def mixed_message(groups: list[IdentityGroup], what: str) -> str:
    """Why records of several identities are refused, each group named (with its id)."""
    lines = [f"{what}: the records come from {len(groups)} different runs; a number is computed only from records "
             "of one run (same policy and parameters, sampling, user, judge, budgets, seed):"]
    lines += [f"  {g.describe()}" for g in groups]
    if len(groups) >= 2 and groups[0].identity is not None and groups[1].identity is not None:
        from trainer.formats.identity import differences

        lines.append("  differs: " + "; ".join(differences(groups[0].identity, groups[1].identity,
                                                           (groups[0].id, groups[1].id))))
    return "\n".join(lines)


def _rep(v: Any, where: str, name: str, required: bool) -> int | None:
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise AttemptError(where, f"{name}: expected an integer >= 0, got {v!r}")
    return v


def _tokens(u: Any, where: str, name: str, cached_key: str = "cached_tokens") -> Usage:
    if u is None:
        return Usage()
    if not isinstance(u, Mapping):
        raise AttemptError(where, f"{name}: expected an object of token counts")
    vals = {}
    for src, dst in (("input_tokens", "input_tokens"), (cached_key, "cached_tokens"), ("output_tokens", "output_tokens")):
        v = u.get(src) or 0
        if src == "cached" and not v and isinstance(u.get("input_tokens_details"), Mapping):
            src = "input_tokens_details.cached_tokens"  # the framework's Usage (the flat `cached`: older rows)
            v = u["input_tokens_details"].get("cached_tokens") or 0
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise AttemptError(where, f"{name}.{src}: expected a token count, got {v!r}")
        vals[dst] = v
    return Usage(**vals, records=1)


def _ours(d: dict[str, Any], uid: str, where: str) -> Attempt:
    verdict = d.get("verdict") or {}
    if not isinstance(verdict, Mapping):
        raise AttemptError(where, "verdict: expected an object")
    sys_err = d.get("system_error") or verdict.get("system_error")
    usage = d.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise AttemptError(where, "usage: expected {agent, user, judge}")
    ids = {"policy": d.get("policy") or {}, "user": d.get("user") or {}, "judge": d.get("judge") or {}}
    models = {role: (ids[ident].get("model") if isinstance(ids[ident], Mapping) else None)
              for role, ident in (("agent", "policy"), ("user", "user"), ("judge", "judge"))}
    return Attempt(uid=uid, repetition=_rep(d.get("repetition"), where, "repetition", True),
                   passed=not sys_err and bool(verdict.get("passed")), system_error=str(sys_err) if sys_err else None,
                   where=where, scenario=d.get("scenario") or None, fingerprint=d.get("fingerprint") or None,
                   usage={r: _tokens(usage.get(r), where, f"usage.{r}") for r in ("agent", "user", "judge")},
                   models=models, identities=ids, format="ours", identity=of_record(d))


def _tb(d: dict[str, Any], uid: str, where: str) -> Attempt:
    tr = d["test_result"]
    meta = d.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise AttemptError(where, "metadata: expected an object")
    if tr is None and (d.get("is_system_error") or meta.get("error")):
        tr = {}  # the episode failed before its test ran: tb infer writes no test result
    if not isinstance(tr, Mapping):
        raise AttemptError(where, "test_result: expected {result, reward, is_system_error}")
    rep = _rep(meta.get("repetition", d.get("repetition")), where, "metadata.repetition", False)
    sys_err = d.get("is_system_error") or tr.get("is_system_error") or meta.get("error")
    cause = None
    if sys_err:
        error = meta.get("error")
        if isinstance(error, Mapping):  # the framework's ErrorInfo {type, message, tb}: the message, no traceback
            error = error.get("message") or error.get("type")
        if not error and tr.get("is_system_error") and isinstance(tr.get("tb"), str) and tr["tb"].strip():
            error = tr["tb"].strip().splitlines()[-1]  # a test that raised: its traceback's last line names it
        cause = f"tb: {error or tr.get('result') or 'is_system_error'}"
    turns = d.get("usage") or []
    if isinstance(turns, Mapping):
        turns = [turns]
    if not isinstance(turns, list):
        raise AttemptError(where, "usage: expected a list of {input_tokens, input_tokens_details, output_tokens}")
    agent = Usage(records=1)
    for i, u in enumerate(turns):
        t = _tokens(u, where, f"usage[{i}]", cached_key="cached")
        t.records = 0
        agent.add(t)
    return Attempt(uid=uid, repetition=rep, passed=not sys_err and tb_result_passed(tr.get("result"), tr.get("reward")),
                   system_error=cause, where=where, scenario=meta.get("scenario") or None,
                   fingerprint=meta.get("fingerprint") or None, usage={"agent": agent}, models={"agent": None},
                   format="tb")


__all__ = ["Attempt", "AttemptError", "IdentityGroup", "ReadResult", "Tally", "Usage", "identity_groups",
           "mixed_message", "parse_attempt", "read_attempts", "tally"]
