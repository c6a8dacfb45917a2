"""Probe records -> per-task tallies (n valid probes, k successes), checked against the dataset.

Two record formats are read, line by line, told apart per line:
- ours (`trainer/rollout/record.py`, `version` present): `passed` is the verdict's, a record
  with `system_error` set is not a probe;
- the ThinkingBox framework's `tb infer` JSONL (TASK_FORMAT.md §7: `uid`, `test_result {result,
  reward, is_system_error}`, `metadata {repetition}`): passed when `result` is true (or "pass",
  "passed", "success") or the reward is 1; `is_system_error` (or `metadata.error`) is not a probe.

A probe counts once per (uid, repetition) (a repeated line is reported, the first one kept).
An unreadable line is reported with its file and line number and the rest of the file is still
used. A record whose uid is not in the dataset, or whose `fingerprint` (ours) differs from the
task's current `Task.fingerprint()` (the task changed since it was probed), is reported and not
counted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainer.env.taskformat.tasks import Task
from trainer.rollout.record import tb_result_passed


@dataclass
class Tally:
    n: int = 0  # valid probes
    k: int = 0  # of them passed
    system_errors: int = 0  # attempts that were not probes


@dataclass
class ProbeReport:
    tallies: dict[str, Tally] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # "file:line: what" for every line not used
    unknown_uids: dict[str, int] = field(default_factory=dict)  # uid -> records
    changed: dict[str, int] = field(default_factory=dict)  # uid -> records of an older version of the task
    duplicates: int = 0
    lines: int = 0


def read_probe_line(d: Mapping[str, Any]) -> tuple[str, Any, bool | None, str | None]:
    """(uid, repetition, passed or None for a system error, fingerprint or None) of one record;
    KeyError/TypeError/ValueError when it is neither format."""
    uid = d["uid"]
    if not isinstance(uid, str) or not uid:
        raise ValueError("uid is not a string")
    if "version" in d:  # ours
        v = d.get("verdict") or {}
        sys_err = d.get("system_error") or v.get("system_error")
        return uid, int(d["repetition"]), None if sys_err else bool(v.get("passed")), d.get("fingerprint") or None
    tr = d["test_result"]
    if not isinstance(tr, Mapping):
        raise ValueError("test_result is not an object")
    meta = d.get("metadata") or {}
    rep = meta.get("repetition", d.get("repetition"))
    sys_err = tr.get("is_system_error") or meta.get("error")
    return uid, rep, None if sys_err else tb_result_passed(tr.get("result"), tr.get("reward")), None


def tally_probes(paths: Iterable[str | Path], tasks: Mapping[str, Task]) -> ProbeReport:
    report = ProbeReport()
    seen: set[tuple[str, Any]] = set()
    fingerprints = {uid: t.fingerprint() for uid, t in tasks.items()}
    tallies: dict[str, Tally] = defaultdict(Tally)
    for path in paths:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise FileNotFoundError(f"{path}: {e.strerror}") from None
        for lineno, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            report.lines += 1
            try:
                uid, rep, passed, fp = read_probe_line(json.loads(raw))
            except (ValueError, KeyError, TypeError) as e:
                what = "not JSON" if isinstance(e, json.JSONDecodeError) else f"not a probe record ({type(e).__name__}: {e})"
                report.problems.append(f"{path}:{lineno}: {what}")
                continue
            if uid not in tasks:
                report.unknown_uids[uid] = report.unknown_uids.get(uid, 0) + 1
                continue
            if fp is not None and fp != fingerprints[uid]:
                report.changed[uid] = report.changed.get(uid, 0) + 1
                continue
            if passed is None:
                tallies[uid].system_errors += 1
                continue
            key = (uid, rep)
            if rep is not None and key in seen:
                report.duplicates += 1
                report.problems.append(f"{path}:{lineno}: {uid} repetition {rep} counted already (kept the first)")
                continue
            seen.add(key)
            t = tallies[uid]
            t.n += 1
            t.k += passed
    report.tallies = dict(tallies)
    return report


__all__ = ["ProbeReport", "Tally", "read_probe_line", "tally_probes"]
