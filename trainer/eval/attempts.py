"""Records -> attempts: what evaluation needs of one record, from either record format.

Told apart per line:
- ours (`trainer/rollout/record.py`, `version` present): passed = the verdict's `passed`; a
  system error when `system_error` (or the verdict's) is set; usage per role from `usage.agent`,
  `usage.user`, `usage.judge` ({input_tokens, output_tokens[, cached_tokens]}), each role's model
  from the record's `policy` / `user` / `judge` identity (`model`);
- the ThinkingBox framework's `tb infer` JSONL (TASK_FORMAT.md §7): `uid`, `test_result {result,
  reward, is_system_error}`, `metadata {scenario, repetition, error?}`, `usage [{input_tokens,
  cached, output_tokens, reasoning_tokens}]` (the agent's turns; reasoning is part of output):
  passed when `result` is true (or "pass", "passed", "success") or the reward is 1; a system
  error when `is_system_error` or `metadata.error` is set. It names no model (--price-model).

A line that is neither is an `AttemptError` naming file, line and field; a last line without its
newline (a write cut by a crash) is skipped and reported in `torn`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainer.eval.cost import Usage
from trainer.rollout.record import tb_result_passed

class AttemptError(ValueError):
    """A records line that cannot be read (`file:line: field: what`)."""


@dataclass
class Attempt:
    """One record, as evaluation reads it."""

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

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.uid, self.repetition)


@dataclass
class ReadResult:
    attempts: list[Attempt] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)  # "file:line" of cut-off last lines (skipped)


def read_attempts(paths: Iterable[str | Path]) -> ReadResult:
    out = ReadResult()
    for path in paths:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise AttemptError(f"{path}: {e.strerror}") from None
        lines = data.splitlines()
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                d = json.loads(raw)
            except ValueError as e:
                if lineno == len(lines) and not data.endswith(b"\n"):
                    out.torn.append(where)
                    continue
                raise AttemptError(f"{where}: not JSON ({e})") from None
            out.attempts.append(parse_attempt(d, where))
    return out


def parse_attempt(d: Any, where: str) -> Attempt:
    """One record (ours or tb infer) as an `Attempt`; `AttemptError` names the field at fault."""
    if not isinstance(d, dict):
        raise AttemptError(f"{where}: not a record (a JSON object)")
    uid = d.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AttemptError(f"{where}: uid: expected the task uid ('file.py:test_name'), got {uid!r}")
    if "version" in d:
        return _ours(d, uid, where)
    if "test_result" in d:
        return _tb(d, uid, where)
    raise AttemptError(f"{where}: neither our record (no `version`) nor a tb infer record (no `test_result`)")


def _rep(v: Any, where: str, name: str, required: bool) -> int | None:
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise AttemptError(f"{where}: {name}: expected an integer >= 0, got {v!r}")
    return v


def _tokens(u: Any, where: str, name: str, cached_key: str = "cached_tokens") -> Usage:
    if u is None:
        return Usage()
    if not isinstance(u, Mapping):
        raise AttemptError(f"{where}: {name}: expected an object of token counts")
    vals = {}
    for src, dst in (("input_tokens", "input_tokens"), (cached_key, "cached_tokens"), ("output_tokens", "output_tokens")):
        v = u.get(src) or 0
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise AttemptError(f"{where}: {name}.{src}: expected a token count, got {v!r}")
        vals[dst] = v
    return Usage(**vals, records=1)


def _ours(d: dict[str, Any], uid: str, where: str) -> Attempt:
    verdict = d.get("verdict") or {}
    if not isinstance(verdict, Mapping):
        raise AttemptError(f"{where}: verdict: expected an object")
    sys_err = d.get("system_error") or verdict.get("system_error")
    usage = d.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise AttemptError(f"{where}: usage: expected {{agent, user, judge}}")
    ids = {"policy": d.get("policy") or {}, "user": d.get("user") or {}, "judge": d.get("judge") or {}}
    models = {role: (ids[ident].get("model") if isinstance(ids[ident], Mapping) else None)
              for role, ident in (("agent", "policy"), ("user", "user"), ("judge", "judge"))}
    return Attempt(uid=uid, repetition=_rep(d.get("repetition"), where, "repetition", True),
                   passed=not sys_err and bool(verdict.get("passed")), system_error=str(sys_err) if sys_err else None,
                   where=where, scenario=d.get("scenario") or None, fingerprint=d.get("fingerprint") or None,
                   usage={r: _tokens(usage.get(r), where, f"usage.{r}") for r in ("agent", "user", "judge")},
                   models=models, identities=ids, format="ours")


def _tb(d: dict[str, Any], uid: str, where: str) -> Attempt:
    tr = d["test_result"]
    if not isinstance(tr, Mapping):
        raise AttemptError(f"{where}: test_result: expected {{result, reward, is_system_error}}")
    meta = d.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise AttemptError(f"{where}: metadata: expected an object")
    rep = _rep(meta.get("repetition", d.get("repetition")), where, "metadata.repetition", False)
    sys_err = tr.get("is_system_error") or meta.get("error")
    cause = None
    if sys_err:
        cause = f"tb: {meta.get('error') or tr.get('result') or 'is_system_error'}"
    turns = d.get("usage") or []
    if isinstance(turns, Mapping):
        turns = [turns]
    if not isinstance(turns, list):
        raise AttemptError(f"{where}: usage: expected a list of {{input_tokens, cached, output_tokens}}")
    agent = Usage(records=1)
    for i, u in enumerate(turns):
        t = _tokens(u, where, f"usage[{i}]", cached_key="cached")
        t.records = 0
        agent.add(t)
    return Attempt(uid=uid, repetition=rep, passed=not sys_err and tb_result_passed(tr.get("result"), tr.get("reward")),
                   system_error=cause, where=where, scenario=meta.get("scenario") or None,
                   usage={"agent": agent}, models={"agent": None}, format="tb")


__all__ = ["Attempt", "AttemptError", "ReadResult", "parse_attempt", "read_attempts"]
