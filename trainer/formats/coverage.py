"""Coverage: does a set of records hold every task × repetition of the protocol exactly once?

The expected keys are every uid of the test list (or dataset; without either, every uid seen)
× repetitions 0..R−1 (R = --repeat, else the most any record shows). Records count from 0 (ours);
a tb infer file whose repetitions start at 1 (none is 0) is read as counting from 1.

What is found wrong, per key:
- missing      no record at all (a task the run left out, `--skip-judged`, says why);
- unresolved   only system-error attempts (the episode was never scored: re-run it);
- duplicated   scored more than once (the first one is kept);
- unexpected   a uid outside the expected set, or a repetition past R (not used);
- stale        a record whose task fingerprint is not the task's current one (the task changed
               since; not used) and whose key has no record of the current version;
- unnumbered   a record without a repetition (its key cannot be checked).

Not a fault: `replaced`, a record of an older version of the task whose key was re-run on the
current version (what `tbt run` / `tbt eval` do with a changed task: trainer/rollout/runner.py);
the old record is not used, and listed.

Profile `full` refuses to aggregate while any of these is found and names each; profile `none`
aggregates what there is and reports the same lists in agg.json's `coverage`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from trainer.formats.attempts import Attempt

PROFILES = ("full", "none")


@dataclass
class Expected:
    """What the protocol asked for (None: learn it from the records)."""

    uids: list[str] | None = None
    repeat: int | None = None
    domains: dict[str, str] = field(default_factory=dict)  # uid -> domain
    tags: dict[str, list[str]] = field(default_factory=dict)  # uid -> tags
    fingerprints: dict[str, str] = field(default_factory=dict)  # uid -> Task.fingerprint()
    source: str = "the records"  # what the uids came from, for messages
    left_out: dict[str, str] = field(default_factory=dict)  # uid -> why the run did not play it (--skip-judged)


@dataclass
class Coverage:
    profile: str
    source: str
    repeat: int
    first_repetition: int
    expected: int  # keys
    scored: int  # keys with a scored record
    missing: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    unnumbered: list[str] = field(default_factory=list)
    system_error_attempts: int = 0
    replaced: list[str] = field(default_factory=list)  # records of an older task version, re-run since (not a fault)
    left_out: dict[str, str] = field(default_factory=dict)  # uid -> why the run did not play it

    KINDS = ("missing", "unresolved", "duplicated", "unexpected", "stale", "unnumbered")

    @property
    def complete(self) -> bool:
        return not any(getattr(self, k) for k in self.KINDS)

    def problems(self) -> list[str]:
        """One line per fault, `kind  what`, in the order of KINDS."""
        return [f"{kind:<10}  {line}" for kind in self.KINDS for line in getattr(self, kind)]

    def summary(self) -> str:
        found = ", ".join(f"{len(getattr(self, k))} {k}" for k in self.KINDS if getattr(self, k)) or "nothing wrong"
        replaced = (f" ({len(self.replaced)} record(s) of an older version of their task replaced by a re-run, "
                    "not used)") if self.replaced else ""
        left = (f" ({len(self.left_out)} task(s) left out by the run: "
                + "; ".join(sorted(set(self.left_out.values()))) + ")") if self.left_out else ""
        return (f"coverage ({self.profile}): {self.scored} of {self.expected} task × repetition keys scored "
                f"(tasks from {self.source}, {self.repeat} repetitions); {found}{replaced}{left}")

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("profile", "source", "repeat", "first_repetition", "expected", "scored",
                                           "system_error_attempts")}
        out = {**d, "complete": self.complete, **{k: getattr(self, k) for k in self.KINDS}}
        out = {**out, "replaced": self.replaced} if self.replaced else out
        return {**out, "left_out": self.left_out} if self.left_out else out


def check(attempts: Sequence[Attempt], expected: Expected, profile: str = "full") -> tuple[Coverage, list[Attempt]]:
    """The coverage of `attempts` and the scored attempts to aggregate (one per key, stale and
    unexpected ones left out)."""
    if profile not in PROFILES:
        raise ValueError(f"coverage profile {profile!r}: expected one of {', '.join(PROFILES)}")
    unexpected, unnumbered, usable = [], [], []
    old: list[tuple[Attempt, str]] = []
    known = set(expected.uids) if expected.uids is not None else None
    for a in attempts:
        fp = expected.fingerprints.get(a.uid)
        if known is not None and a.uid not in known:
            unexpected.append(f"{a.uid} #{a.repetition} ({a.where}): not in {expected.source}")
        elif fp and a.fingerprint and a.fingerprint != fp:
            old.append((a, f"{a.uid} #{a.repetition} ({a.where}): recorded for another version of the task "
                           f"(fingerprint {a.fingerprint[:12]}, now {fp[:12]})"))
        else:
            usable.append(a)
    reps = [a.repetition for a in usable if a.repetition is not None]
    # ours count from 0; a tb infer file with no repetition 0 counts from 1
    first = 1 if reps and 0 not in reps and all(a.format == "tb" for a in usable) else 0
    repeat = expected.repeat or (max(reps) - first + 1 if reps else 0)
    scored: dict[tuple[str, int | None], list[Attempt]] = defaultdict(list)
    errors: dict[tuple[str, int], list[Attempt]] = defaultdict(list)
    kept: list[Attempt] = []
    for a in usable:
        if a.repetition is None:
            unnumbered.append(f"{a.uid} ({a.where}): no repetition number")
            if a.system_error is None:
                kept.append(a)
            continue
        if not (first <= a.repetition < first + repeat):
            unexpected.append(f"{a.uid} #{a.repetition} ({a.where}): repetition outside {first}..{first + repeat - 1}")
            continue
        (errors if a.system_error else scored)[a.key].append(a)  # type: ignore[index]
    stale, replaced = [], []
    for a, line in old:  # re-run on the current version since: replaced, not a fault
        (replaced if a.repetition is not None and a.key in scored else stale).append(line)
    duplicated = []
    for key, recs in scored.items():
        kept.append(recs[0])
        if len(recs) > 1:
            duplicated.append(f"{key[0]} #{key[1]}: scored {len(recs)} times ({', '.join(r.where for r in recs)}; "
                              "the first kept)")
    uids = expected.uids if expected.uids is not None else list(dict.fromkeys(a.uid for a in usable))
    missing, unresolved, wanted = [], [], set(uids)
    for uid in uids:
        for rep in range(first, first + repeat):
            if (uid, rep) in scored:
                continue
            errs = errors.get((uid, rep))
            if errs:
                unresolved.append(f"{uid} #{rep}: {len(errs)} system-error attempt(s), the last {errs[-1].system_error} "
                                  f"({errs[-1].where})")
            else:
                why = expected.left_out.get(uid)
                missing.append(f"{uid} #{rep}" + (f": left out ({why})" if why else ""))
    cov = Coverage(profile=profile, source=expected.source, repeat=repeat, first_repetition=first,
                   expected=len(uids) * repeat, scored=sum(1 for k in scored if k[0] in wanted),
                   missing=missing, unresolved=unresolved, duplicated=duplicated, unexpected=unexpected,
                   stale=stale, unnumbered=unnumbered,
                   system_error_attempts=sum(1 for a in usable if a.system_error), replaced=replaced,
                   left_out={u: w for u, w in expected.left_out.items() if u in wanted})
    return cov, kept


def system_errors_by_uid(attempts: Sequence[Attempt]) -> Mapping[str, int]:
    return Counter(a.uid for a in attempts if a.system_error)


__all__ = ["PROFILES", "Coverage", "Expected", "check", "system_errors_by_uid"]
