"""Probe records -> per-task tallies (n valid probes, c successes), checked against the dataset.

The records are read by the one reader of episode records, `trainer/formats/attempts.py`: ours
and the ThinkingBox framework's `tb infer` JSONL alike, told apart per line. A record with a
system error is not a probe (it counts in the tally's `system_errors`).

A probe counts once per (uid, repetition) (a repeated line is reported, the first one kept).
An unreadable line is reported with its file, line number and field (`AttemptError`), a cut-off
last line (a write interrupted by a crash) as such, and the rest of the file is still used. A
record whose uid is not in the dataset, or whose `fingerprint` (ours) differs from the task's
current `Task.fingerprint()` (the task changed since it was probed), is reported and not counted.
A file that cannot be read is an `AttemptError` naming it.

Probes of several runs (records of different run identities: another policy or parameter, seed,
sampling, user, judge or budgets; trainer/formats/identity.py) are never pooled: they are
a `MixedProbesError` naming each identity with its id and record count, unless `keep_identity`
names the one to use (its id, or "unknown" for records without an identity), and then the report
says how many records of the others were left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from trainer.env.taskformat.tasks import Task
from trainer.formats.attempts import Attempt, Tally, identity_groups, mixed_message, read_attempts, tally


class MixedProbesError(ValueError):
    """Probe records of several run identities, none chosen (the message names each)."""


@dataclass
class ProbeReport:
    tallies: dict[str, Tally] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # "file:line: what" for every line not used
    unknown_uids: dict[str, int] = field(default_factory=dict)  # uid -> records
    changed: dict[str, int] = field(default_factory=dict)  # uid -> records of an older version of the task
    duplicates: int = 0
    lines: int = 0
    identity: str | None = None  # the run identity the tallies are of (its id; "unknown": records without one)
    left_out: dict[str, int] = field(default_factory=dict)  # identity id -> records not used (another run)


def tally_probes(paths: Iterable[str | Path], tasks: Mapping[str, Task], *,
                 keep_identity: str | None = None) -> ProbeReport:
    paths = [Path(p) for p in paths]
    read = read_attempts(paths, skip_bad=True)
    report = ProbeReport(lines=read.lines)
    groups = identity_groups(a for a in read.attempts if a.uid in tasks)
    if keep_identity is not None:
        chosen = [g for g in groups if g.id == keep_identity]
        if not chosen:
            raise MixedProbesError(f"--keep-identity {keep_identity}: no probe record of that run identity; the "
                                   "records have: " + "; ".join(g.describe() for g in groups))
        report.left_out = {g.id: len(g.attempts) for g in groups if g.id != keep_identity}
        keep = {id(a) for a in chosen[0].attempts}
        read.attempts = [a for a in read.attempts if a.uid not in tasks or id(a) in keep]
        groups = chosen
    elif len(groups) > 1:
        raise MixedProbesError(mixed_message(groups, "probes") + "\n  choose one with --keep-identity ID "
                               "(its records are used, the others' left out and counted), or probe into separate files")
    report.identity = groups[0].id if groups else None
    problems = [(where, f"{where}: a cut-off last line (a write interrupted by a crash)") for where in read.torn]
    problems += [(e.where, str(e)) for e in read.problems]
    fingerprints = {uid: t.fingerprint() for uid, t in tasks.items()}
    seen: set[tuple[str, int | None]] = set()
    counted: list[Attempt] = []
    for a in read.attempts:
        if a.uid not in tasks:
            report.unknown_uids[a.uid] = report.unknown_uids.get(a.uid, 0) + 1
            continue
        if a.fingerprint is not None and a.fingerprint != fingerprints[a.uid]:
            report.changed[a.uid] = report.changed.get(a.uid, 0) + 1
            continue
        if a.system_error is None and a.repetition is not None:
            if a.key in seen:
                report.duplicates += 1
                problems.append((a.where, f"{a.where}: {a.uid} repetition {a.repetition} counted already (kept the first)"))
                continue
            seen.add(a.key)
        counted.append(a)
    report.tallies = tally(counted)
    order = {str(p): i for i, p in reversed(list(enumerate(paths)))}

    def as_read(where: str) -> tuple[int, int]:  # problems in file and line order, as read
        path, _, line = where.rpartition(":")
        return order.get(path, len(order)), int(line) if line.isdigit() else 0

    report.problems = [text for _, text in sorted(problems, key=lambda p: as_read(p[0]))]
    return report


__all__ = ["MixedProbesError", "ProbeReport", "tally_probes"]
