"""Where the time goes: the per-phase seconds of episodes (and golden replays) summed into one
breakdown, the table `tbt run`, `tbt eval` and `tbt validate-golden` print at the end.

An episode's `timings` (trainer/formats/record.py) holds seconds per phase:

    open        opening the sandbox, of which (trainer/env/sandbox/mcp_host.py, `OPEN_PARTS`)
                open_in_process, open_spawn, open_fork, open_reuse, open_remote (each server's
                connection by how it started), open_proof (proving a fork/reuse start), open_init
                (the `__reserved__init` calls); the rest of `open` is listing tools and the like
    agent       waiting on the policy (every model call)
    user        waiting on the simulated user
    tools       tool calls on the servers
    effects     `__reserved__geteffects`
    grade       the test, of which `judge` is waiting on the judge and `grade_wait` the time the
                grading (in a worker thread) waited to start and to be resumed: the thread pool's
                queue and an event loop busy with other episodes (it grows with concurrency)
    close       teardown (`__reserved__teardown`, the connections closed)
    total       the episode's wall time, from opening to the verdict

The phases are disjoint parts of `total` (`judge` and `grade_wait` inside `grade`, the `open_*`
inside `open`);
what is left (the loop itself: interpreting model output, prompts, the record) is the row
`framework`. Counts come from beside the timings: model calls per role, server tool calls, judge
questions (`Breakdown.add(timings, counts)`).

A record without timings (written before they existed) is counted in `untimed` and left out of
the sums; one with the older keys only (no `open_*`, no `judge`) adds what it has: its whole
`open` is then "session start, not split" and its grading is all "test". A phase is wall time: with several episodes in flight on one event loop,
each phase also holds the moments the loop spent on other episodes (most of it lands in
`grade_wait`, the one long await of an in-process episode).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

OPEN_PARTS = ("in_process", "spawn", "fork", "reuse", "remote", "proof", "init")  # Sandbox.open_seconds (mcp_host)
OPEN_LABELS = {"in_process": "in-process servers", "spawn": "spawned processes", "fork": "forked processes",
               "reuse": "reused processes", "remote": "remote sessions", "proof": "start proofs",
               "init": "init (__reserved__init)"}
# (key, label, the count beside it) of the rows after the session start, in the table's order
MAIN = (("agent", "policy (model calls)", "agent"), ("user", "simulated user", "user"),
        ("tools", "tool calls", "tools"), ("effects", "effects", None),
        ("test", "test (grading, judge aside)", None), ("judge", "judge", "judge"),
        ("grade_wait", "grading queued (threads, event loop)", None), ("close", "teardown", None))
KEYS = ("open", *(f"open_{p}" for p in OPEN_PARTS), "agent", "user", "tools", "effects", "grade", "judge",
        "grade_wait", "close", "total")


@dataclass
class PhaseRow:
    """One line of the breakdown: seconds summed over the episodes, their share of the summed
    wall time, the mean per episode, and with a count (model calls, tool calls, judge questions)
    the calls and the mean per call. `part`: a part of the row above (the session start's)."""

    key: str
    label: str
    seconds: float
    share: float | None
    per_episode: float | None
    calls: int | None = None
    per_call: float | None = None
    part: bool = False


class Breakdown:
    """Per-phase seconds summed over episodes (module docstring)."""

    def __init__(self) -> None:
        self.episodes = 0  # timed episodes added
        self.untimed = 0  # records without timings (left out of every sum)
        self.seconds: dict[str, float] = dict.fromkeys(KEYS, 0.0)
        self.counts: dict[str, int] = {"agent": 0, "user": 0, "tools": 0, "judge": 0}

    def add(self, timings: Mapping[str, Any] | None, counts: Mapping[str, int] | None = None) -> None:
        if not timings or not isinstance(timings.get("total"), (int, float)):
            self.untimed += 1
            return
        self.episodes += 1
        for k in KEYS:
            v = timings.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.seconds[k] += float(v)
        for k, n in (counts or {}).items():
            if k in self.counts and isinstance(n, int):
                self.counts[k] += n

    def merge(self, other: Breakdown) -> None:
        self.episodes += other.episodes
        self.untimed += other.untimed
        for k, v in other.seconds.items():
            self.seconds[k] += v
        for k, n in other.counts.items():
            self.counts[k] += n

    @property
    def total(self) -> float:
        return self.seconds["total"]

    def rows(self) -> list[PhaseRow]:
        """The table's rows: session start and its non-zero parts, the phases (zero ones without
        calls left out), framework (the rest of the wall time), and the episodes' wall time."""
        s, n, wall = self.seconds, self.episodes, self.total

        def row(key: str, label: str, secs: float, calls: int | None = None, part: bool = False) -> PhaseRow:
            secs = max(0.0, secs)  # a difference of sums: never below 0 from rounding
            return PhaseRow(key, label, secs, secs / wall if wall > 0 else None, secs / n if n else None, calls,
                            secs / calls if calls else None, part)

        out = [row("open", "session start", s["open"])]
        parts = sum(s[f"open_{p}"] for p in OPEN_PARTS)
        out += [row(f"open_{p}", OPEN_LABELS[p], s[f"open_{p}"], part=True) for p in OPEN_PARTS if s[f"open_{p}"] > 0]
        if parts > 0 or s["open"] > 0:
            out.append(row("open_rest", "other (tool listing, ...)" if parts > 0 else "not split (older records)",
                           s["open"] - parts, part=True))
        values = {"agent": s["agent"], "user": s["user"], "tools": s["tools"], "effects": s["effects"],
                  "test": s["grade"] - s["judge"] - s["grade_wait"], "judge": s["judge"],
                  "grade_wait": s["grade_wait"], "close": s["close"]}
        for key, label, count in MAIN:
            calls = self.counts[count] if count else None
            if values[key] > 0 or calls:
                out.append(row(key, label, values[key], calls))
        phases = s["open"] + s["agent"] + s["user"] + s["tools"] + s["effects"] + s["grade"] + s["close"]
        out.append(row("framework", "framework (parsing, prompts, records)", wall - phases))
        out.append(row("total", "wall time (summed)", wall))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "untimed": self.untimed, "seconds": dict(self.seconds),
                "counts": dict(self.counts), "rows": [asdict(r) for r in self.rows()]}

    @classmethod
    def of(cls, items: Iterable[tuple[Mapping[str, Any] | None, Mapping[str, int] | None]]) -> Breakdown:
        b = cls()
        for timings, counts in items:
            b.add(timings, counts)
        return b


def seconds_text(x: float | None) -> str:
    """3.21 s, 48.2 ms, 310 µs (— for None): a duration at a readable scale."""
    if x is None:
        return "—"
    if x >= 1 or x == 0:
        return f"{x:,.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} µs"


__all__ = ["KEYS", "OPEN_PARTS", "Breakdown", "PhaseRow", "seconds_text"]
