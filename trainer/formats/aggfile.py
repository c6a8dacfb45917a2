"""`agg.json` as types: `AggDoc` and its parts, written by trainer/eval/aggregate.py and read back
by `read_agg` for `tbt compare`, `tbt report` and the summary (trainer/eval/summary.py).

The JSON (version `AGG_VERSION`; `to_json()` writes it key for key, in this order, and
`from_json()` reads it back; docs/evaluation.md):

    version, label, sources (the record files), profile
    coverage      `Coverage` (trainer/formats/coverage.py): expected and scored keys, and every key
                  missing / unresolved / duplicated / unexpected / stale / unnumbered; `complete`;
                  `replaced` (optional: records of an older task version re-run since, not used)
    tasks         {uid: `TaskRow` {n, c, domain, tags?, system_errors}}: n scored attempts, c passed
    overall       `Block`: tasks, attempts, passes, pass_at_1 {value, level, jeffreys [lo, hi],
                  bootstrap [lo, hi]}, pass_at_k {"k": v}, pass_hat_k {"k": v}, observed_k_of_k
                  {k, tasks, over, share}, solved_at_least_once {tasks, over, share}, (k_tasks,
                  note when n is uneven), cost (`Cost`, with a price table), the noise floor
                  (`metrics.noise_floor`): flip_rate, min_detectable_difference, noise
                  {within_task_variance, icc, design_effect, effective_samples, level, power}
    by_domain     {domain: `Block`}
    by_tag        {tag: `Block`} when the dataset's tags are known
    identities    the policy / user / judge identities of the first record (ours; free-form)
    usage         {role: [`UsageRow` {model, records, input_tokens, cached_tokens, output_tokens}]}
    resamples, seed   of the bootstrap intervals

Reading is strict: a file without `version` (not an agg.json), of another version (written by
another tbt: aggregate its records again), or missing or mistyping any field is an
`AggFileError` naming the file and the field (`overall.pass_at_1.value`). Only `by_tag`, `coverage.replaced`, the noise floor (files
before it), `overall.cost`, `k_tasks`, `note` and a task's `tags` are optional, as the writer leaves them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from trainer.formats.coverage import Coverage
from trainer.formats.attempts import Tally

AGG_VERSION = 1
T = TypeVar("T")


class AggFileError(ValueError):
    """An agg.json that cannot be read (`file: field: what`)."""


class _At:
    """Where a value is: the file and the dotted field path, for messages."""

    def __init__(self, file: str, path: str = ""):
        self.file, self.path = file, path

    def __truediv__(self, key: str) -> _At:
        return _At(self.file, f"{self.path}.{key}" if self.path else key)

    def fail(self, what: str) -> AggFileError:
        return AggFileError(f"{self.file}: {self.path or '(the document)'}: {what}")

    def obj(self, v: Any) -> Mapping[str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(f"expected an object, got {_kind(v)}")
        return v

    def get(self, d: Mapping[str, Any], key: str, read: Callable[[Any, _At], T], optional: bool = False) -> T | None:
        if key not in d:
            if optional:
                return None
            raise (self / key).fail("missing")
        return read(d[key], self / key)


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _int(v: Any, at: _At) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise at.fail(f"expected an integer, got {v!r}")
    return v


def _num(v: Any, at: _At) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise at.fail(f"expected a number, got {v!r}")
    return v


def _str(v: Any, at: _At) -> str:
    if not isinstance(v, str):
        raise at.fail(f"expected a string, got {v!r}")
    return v


def _or_none(read: Callable[[Any, _At], T]) -> Callable[[Any, _At], T | None]:
    def or_none(v: Any, at: _At) -> T | None:
        return None if v is None else read(v, at)
    return or_none


_num_or_none, _str_or_none = _or_none(_num), _or_none(_str)


def _bool(v: Any, at: _At) -> bool:
    if not isinstance(v, bool):
        raise at.fail(f"expected true or false, got {v!r}")
    return v


def _strs(v: Any, at: _At) -> list[str]:
    if not isinstance(v, list):
        raise at.fail(f"expected a list of strings, got {_kind(v)}")
    return [_str(x, at / str(i)) for i, x in enumerate(v)]


def _pair(v: Any, at: _At) -> tuple[float, float] | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 2:
        raise at.fail(f"expected [low, high] or null, got {v!r}")
    return _num(v[0], at / "0"), _num(v[1], at / "1")


def _by_k(read: Callable[[Any, _At], T]) -> Callable[[Any, _At], dict[int, T]]:
    def by_k(v: Any, at: _At) -> dict[int, T]:
        out = {}
        for k, x in at.obj(v).items():
            if not (isinstance(k, str) and k.isdigit() and int(k) >= 1):
                raise at.fail(f"key {k!r}: expected k = 1, 2, ...")
            out[int(k)] = read(x, at / k)
        return out
    return by_k


def _mapping(read: Callable[[Any, _At], T]) -> Callable[[Any, _At], dict[str, T]]:
    def mapping(v: Any, at: _At) -> dict[str, T]:
        return {k: read(x, at / k) for k, x in at.obj(v).items()}
    return mapping


def _rows(read: Callable[[Any, _At], T]) -> Callable[[Any, _At], list[T]]:
    def rows(v: Any, at: _At) -> list[T]:
        if not isinstance(v, list):
            raise at.fail(f"expected a list, got {_kind(v)}")
        return [read(x, at / str(i)) for i, x in enumerate(v)]
    return rows


@dataclass(frozen=True)
class PassAt1:
    value: float | None  # Σc / Σn (None without attempts)
    level: float
    jeffreys: tuple[float, float] | None
    bootstrap: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "level": self.level, "jeffreys": _list(self.jeffreys),
                "bootstrap": _list(self.bootstrap)}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> PassAt1:
        d = at.obj(v)
        return cls(at.get(d, "value", _num_or_none), at.get(d, "level", _num), at.get(d, "jeffreys", _pair),
                   at.get(d, "bootstrap", _pair))


def _list(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else list(pair)


@dataclass(frozen=True)
class Share:
    """`tasks` of `over` tasks (`share` = tasks / over, None when over = 0)."""

    tasks: int
    over: int
    share: float | None

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "over": self.over, "share": self.share}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> Share:
        d = at.obj(v)
        return cls(at.get(d, "tasks", _int), at.get(d, "over", _int), at.get(d, "share", _num_or_none))


@dataclass(frozen=True)
class KOfK(Share):
    """Observed k/k: `tasks` passed all k attempts, of the `over` tasks with k attempts."""

    k: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, **super().to_json()}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> KOfK:
        d = at.obj(v)
        return cls(at.get(d, "tasks", _int), at.get(d, "over", _int), at.get(d, "share", _num_or_none),
                   at.get(d, "k", _int))


@dataclass(frozen=True)
class UsageRow:
    """Tokens one role spent under one model (None: the records name none)."""

    model: str | None
    records: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "records": self.records, "input_tokens": self.input_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> UsageRow:
        d = at.obj(v)
        return cls(at.get(d, "model", _str_or_none), *(at.get(d, k, _int) for k in
                                                       ("records", "input_tokens", "cached_tokens", "output_tokens")))


@dataclass(frozen=True)
class CostRow(UsageRow):
    cost: float | None = None  # None: no price for the model

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "cost": self.cost}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> CostRow:
        u = UsageRow.from_json(v, at)
        return cls(u.model, u.records, u.input_tokens, u.cached_tokens, u.output_tokens,
                   at.get(at.obj(v), "cost", _num_or_none))


@dataclass(frozen=True)
class Cost:
    """`cost.campaign_cost` of a block's records."""

    campaign: float
    per_successful_attempt: float | None
    per_dependable_task: float | None
    passes: int
    dependable_tasks: int
    by_role: dict[str, list[CostRow]]
    unpriced: list[str]
    complete: bool

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "per_successful_attempt": self.per_successful_attempt,
                "per_dependable_task": self.per_dependable_task, "passes": self.passes,
                "dependable_tasks": self.dependable_tasks,
                "by_role": {r: [x.to_json() for x in rows] for r, rows in self.by_role.items()},
                "unpriced": list(self.unpriced), "complete": self.complete}

    @classmethod
    def from_json(cls, v: Any, at: _At) -> Cost:
        d = at.obj(v)
        return cls(at.get(d, "campaign", _num), at.get(d, "per_successful_attempt", _num_or_none),
                   at.get(d, "per_dependable_task", _num_or_none), at.get(d, "passes", _int),
                   at.get(d, "dependable_tasks", _int), at.get(d, "by_role", _mapping(_rows(CostRow.from_json))),
                   at.get(d, "unpriced", _strs), at.get(d, "complete", _bool))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cost:
        """From `cost.campaign_cost`'s dict (the writer's side)."""
        return cls.from_json(d, _At("campaign_cost"))


@dataclass(frozen=True)
class Block:
    """Every metric of a set of tasks (`metrics.summarize`), with its cost when priced."""

    tasks: int
    attempts: int
    passes: int
    pass_at_1: PassAt1
    pass_at_k: dict[int, float | None]
    pass_hat_k: dict[int, float | None]
    observed_k_of_k: KOfK
    solved_at_least_once: Share
    k_tasks: dict[int, int] | None = None  # only when n is uneven
    note: str | None = None  # only when n is uneven
    cost: Cost | None = None
    flip_rate: float | None = None  # the noise floor (metrics.noise_floor; absent in older files)
    min_detectable_difference: float | None = None
    noise: dict[str, Any] | None = None  # within_task_variance, icc, design_effect, effective_samples, level, power

    @property
    def k(self) -> int:
        return self.observed_k_of_k.k

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tasks": self.tasks, "attempts": self.attempts, "passes": self.passes, "pass_at_1": self.pass_at_1.to_json(),
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "pass_hat_k": {str(k): v for k, v in self.pass_hat_k.items()},
            "observed_k_of_k": self.observed_k_of_k.to_json(), "solved_at_least_once": self.solved_at_least_once.to_json()}
        if self.k_tasks is not None:
            out["k_tasks"] = {str(k): v for k, v in self.k_tasks.items()}
        if self.note is not None:
            out["note"] = self.note
        if self.cost is not None:
            out["cost"] = self.cost.to_json()
        if self.noise is not None:
            out["flip_rate"], out["min_detectable_difference"] = self.flip_rate, self.min_detectable_difference
            out["noise"] = dict(self.noise)
        return out

    @classmethod
    def from_json(cls, v: Any, at: _At) -> Block:
        d = at.obj(v)
        noise = at.get(d, "noise", lambda x, where: dict(where.obj(x)), True)
        return cls(at.get(d, "tasks", _int), at.get(d, "attempts", _int), at.get(d, "passes", _int),
                   at.get(d, "pass_at_1", PassAt1.from_json), at.get(d, "pass_at_k", _by_k(_num_or_none)),
                   at.get(d, "pass_hat_k", _by_k(_num_or_none)), at.get(d, "observed_k_of_k", KOfK.from_json),
                   at.get(d, "solved_at_least_once", Share.from_json), at.get(d, "k_tasks", _by_k(_int), True),
                   at.get(d, "note", _str, True), at.get(d, "cost", Cost.from_json, True),
                   at.get(d, "flip_rate", _num_or_none, True) if noise is not None else None,
                   at.get(d, "min_detectable_difference", _num_or_none, True) if noise is not None else None, noise)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Block:
        """From `metrics.summarize`'s dict (the writer's side)."""
        return cls.from_json(d, _At("metrics.summarize"))


@dataclass(frozen=True)
class TaskRow:
    n: int  # scored attempts
    c: int  # of them passed
    domain: str
    tags: list[str] | None  # None: the dataset's tags are not known
    system_errors: int

    @property
    def tally(self) -> Tally:
        return Tally(self.n, self.c, self.system_errors)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n, "c": self.c, "domain": self.domain}
        if self.tags is not None:
            out["tags"] = list(self.tags)
        out["system_errors"] = self.system_errors
        return out

    @classmethod
    def from_json(cls, v: Any, at: _At) -> TaskRow:
        d = at.obj(v)
        row = cls(at.get(d, "n", _int), at.get(d, "c", _int), at.get(d, "domain", _str), at.get(d, "tags", _strs, True),
                  at.get(d, "system_errors", _int))
        if not (0 <= row.c <= row.n) or row.system_errors < 0:
            raise at.fail(f"expected 0 <= c <= n and system_errors >= 0, got n={row.n}, c={row.c}, "
                          f"system_errors={row.system_errors}")
        return row


def _coverage(v: Any, at: _At) -> Coverage:
    d = at.obj(v)
    cov = Coverage(**{k: at.get(d, k, _str) for k in ("profile", "source")},
                   **{k: at.get(d, k, _int) for k in ("repeat", "first_repetition", "expected", "scored",
                                                      "system_error_attempts")},
                   **{k: at.get(d, k, _strs) for k in Coverage.KINDS},
                   replaced=at.get(d, "replaced", _strs, True) or [])
    if at.get(d, "complete", _bool) != cov.complete:
        raise (at / "complete").fail(f"{d['complete']} disagrees with the lists of faults")
    return cov


@dataclass(frozen=True)
class AggDoc:
    """One agg.json (module docstring)."""

    label: str
    sources: list[str]
    profile: str
    coverage: Coverage
    tasks: dict[str, TaskRow]
    overall: Block
    by_domain: dict[str, Block]
    by_tag: dict[str, Block] | None
    identities: dict[str, Any]
    usage: dict[str, list[UsageRow]]
    resamples: int
    seed: int
    version: int = AGG_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version, "label": self.label, "sources": list(self.sources), "profile": self.profile,
            "coverage": self.coverage.to_dict(), "tasks": {u: t.to_json() for u, t in self.tasks.items()},
            "overall": self.overall.to_json(), "by_domain": {d: b.to_json() for d, b in self.by_domain.items()}}
        if self.by_tag is not None:
            out["by_tag"] = {t: b.to_json() for t, b in self.by_tag.items()}
        out["identities"] = self.identities
        out["usage"] = {r: [x.to_json() for x in rows] for r, rows in self.usage.items()}
        out["resamples"], out["seed"] = self.resamples, self.seed
        return out

    @classmethod
    def from_json(cls, v: Any, where: str = "agg.json") -> AggDoc:
        """`where` names the source (the file) in every `AggFileError`."""
        at = _At(where)
        d = at.obj(v)
        if "version" not in d:
            raise (at / "version").fail(f"missing: not an agg.json (tbt aggregate / tbt eval write version {AGG_VERSION})")
        if d["version"] != AGG_VERSION:
            raise (at / "version").fail(f"{d['version']!r}: this tbt reads agg.json version {AGG_VERSION} only "
                                        "(aggregate the records again: tbt aggregate)")
        block = Block.from_json
        return cls(
            label=at.get(d, "label", _str), sources=at.get(d, "sources", _strs), profile=at.get(d, "profile", _str),
            coverage=at.get(d, "coverage", _coverage), tasks=at.get(d, "tasks", _mapping(TaskRow.from_json)),
            overall=at.get(d, "overall", block), by_domain=at.get(d, "by_domain", _mapping(block)),
            by_tag=at.get(d, "by_tag", _mapping(block), True), identities=dict(at.get(d, "identities", lambda v, where: where.obj(v))),
            usage=at.get(d, "usage", _mapping(_rows(UsageRow.from_json))), resamples=at.get(d, "resamples", _int),
            seed=at.get(d, "seed", _int))


def as_doc(doc: AggDoc | Mapping[str, Any], where: str = "agg.json") -> AggDoc:
    """An AggDoc as it is, or the dict of one (what `json.load` of an agg.json gives) read strictly."""
    return doc if isinstance(doc, AggDoc) else AggDoc.from_json(doc, where)


def read_agg(path: str | Path) -> AggDoc:
    """An agg.json file; `AggFileError` (a ValueError) naming the file and the field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise AggFileError(f"{path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise AggFileError(f"{path}: not JSON (not UTF-8: {e.reason})") from None
    try:
        v = json.loads(text)
    except ValueError as e:
        raise AggFileError(f"{path}: not JSON ({e})") from None
    return AggDoc.from_json(v, str(path))


__all__ = ["AGG_VERSION", "AggDoc", "AggFileError", "Block", "Cost", "CostRow", "KOfK", "PassAt1", "Share", "TaskRow",
           "UsageRow", "as_doc", "read_agg"]
