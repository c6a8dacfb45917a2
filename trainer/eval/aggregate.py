"""Records (ours and `tb infer` JSONL) -> `agg.json`: tallies, metrics, coverage and cost.

`aggregate_doc` builds the document as an `AggDoc` (trainer/formats/aggfile.py, which describes
every field and reads it back: `read_agg`); `write_json` writes it.

Coverage profile `full` refuses (`CoverageError`, naming every fault) unless every expected
task × repetition is scored exactly once; `none` aggregates what there is.

Records of several runs (run identities, trainer/formats/identity.py: another policy or
parameter, sampling, user, judge, budgets or seed) are refused (`MixedRunsError`, each
run named with its id) under either profile, unless `keep_identity` names the one to aggregate
(the others are then left out and counted in `identities.left_out`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.env.taskformat.tasks import Task
from trainer.eval import metrics
from trainer.formats.aggfile import AGG_VERSION, AggDoc, Block, TaskRow, UsageRow, read_agg
from trainer.eval.cost import ROLES, Price, campaign_cost
from trainer.formats.coverage import Coverage, Expected, check, system_errors_by_uid
from trainer.formats.attempts import Attempt, Usage, identity_groups, mixed_message, tally


class CoverageError(ValueError):
    """Profile `full` found gaps: `coverage.problems()` names each."""

    def __init__(self, coverage: Coverage):
        self.coverage = coverage
        super().__init__(coverage.summary())


class MixedRunsError(ValueError):
    """Records of several run identities, none chosen (the message names each, with its id)."""


def task_domain(task: Task) -> str:
    """The task's `domain:` tag (the first), else its scenario's name."""
    for t in task.tags:
        if t.startswith("domain:") and t[len("domain:"):]:
            return t[len("domain:"):]
    return task.scenario.name


def expected_from_tasks(tasks: Sequence[Task], repeat: int | None, source: str) -> Expected:
    """The expected keys of a protocol over these tasks (skipped tasks left out)."""
    tasks = [t for t in tasks if not t.skip]
    return Expected(uids=[t.uid for t in tasks], repeat=repeat, domains={t.uid: task_domain(t) for t in tasks},
                    tags={t.uid: [x for x in t.tags if not x.startswith("domain:")] for t in tasks},
                    fingerprints={t.uid: t.fingerprint() for t in tasks}, source=source)


def aggregate_doc(attempts: Sequence[Attempt], expected: Expected, *, profile: str = "full",
                  prices: Mapping[str, Price] | None = None, price_models: Mapping[str, str] | None = None,
                  label: str | None = None, sources: Sequence[str] = (), resamples: int = metrics.RESAMPLES,
                  seed: int = 0, keep_identity: str | None = None) -> AggDoc:
    """The agg.json document; `CoverageError` under `full` with gaps, `MixedRunsError` for
    records of several runs (unless `keep_identity` names one)."""
    groups = identity_groups(attempts)
    left_out: dict[str, int] = {}
    if keep_identity is not None:
        chosen = [g for g in groups if g.id == keep_identity]
        if not chosen:
            raise MixedRunsError(f"--keep-identity {keep_identity}: no record of that run identity; the records "
                                 "have: " + "; ".join(g.describe() for g in groups))
        left_out = {g.id: len(g.attempts) for g in groups if g.id != keep_identity}
        attempts = chosen[0].attempts
    elif len(groups) > 1:
        raise MixedRunsError(mixed_message(groups, "aggregate") + "\n  aggregate each run's records on their own, "
                             "or choose one with --keep-identity ID")
    cov, kept = check(attempts, expected, profile)
    if profile == "full" and not cov.complete:
        raise CoverageError(cov)
    price_models = dict(price_models or {})
    uids = expected.uids if expected.uids is not None else list(dict.fromkeys(a.uid for a in attempts))
    scenario = {a.uid: a.scenario for a in attempts if a.scenario}
    sys_errs = system_errors_by_uid(attempts)  # every system error, the stale and unexpected ones too
    scored = tally(kept)
    usage: dict[str, dict[str, dict[str | None, Usage]]] = {}  # uid -> role -> model -> tokens
    for a in kept:
        per_role = usage.setdefault(a.uid, {})
        for role, u in a.usage.items():
            model = price_models.get(role) or a.models.get(role)
            per_role.setdefault(role, {}).setdefault(model, Usage()).add(u)
    tasks: dict[str, TaskRow] = {}
    for uid in uids:
        t = scored.get(uid)
        tasks[uid] = TaskRow(n=t.n if t else 0, c=t.c if t else 0,
                             domain=expected.domains.get(uid) or scenario.get(uid) or "unknown",
                             tags=expected.tags.get(uid), system_errors=sys_errs.get(uid, 0))

    def block(members: Sequence[str]) -> Block:
        live = [u for u in members if tasks[u].n > 0]
        b = metrics.summarize([tasks[u].tally for u in live], resamples=resamples, seed=seed)
        if prices is not None:
            b["cost"] = campaign_cost(_sum_usage(usage.get(u, {}) for u in live), prices, passes=b["passes"],
                                      dependable=b["observed_k_of_k"]["tasks"])
        return Block.from_dict(b)

    first = next((a for a in attempts if a.identities), None)
    identities = dict(first.identities) if first else {}
    if first is not None and first.identity is not None:
        identities.update(run=first.identity.run, id=first.identity.id)
    if left_out:
        identities["left_out"] = left_out
    return AggDoc(
        label=label or _label(attempts, sources), sources=list(sources), profile=profile, coverage=cov, tasks=tasks,
        overall=block(uids),
        by_domain={d: block(us) for d, us in metrics.groups({u: [t.domain] for u, t in tasks.items()}).items()},
        by_tag=({t: block(us) for t, us in metrics.groups({u: t.tags or [] for u, t in tasks.items()}).items()}
                if expected.tags else None),
        identities=identities,
        usage={role: [UsageRow(m, **u.to_dict()) for m, u in per.items()]
               for role, per in _sum_usage(usage.values()).items()},
        resamples=resamples, seed=seed)


def aggregate(attempts: Sequence[Attempt], expected: Expected, **options: Any) -> dict[str, Any]:
    """`aggregate_doc(...).to_json()`: the agg.json document as the dict written (for callers that
    index it; new code takes the `AggDoc`)."""
    return aggregate_doc(attempts, expected, **options).to_json()


def _sum_usage(parts: Any) -> dict[str, dict[str | None, Usage]]:
    total: dict[str, dict[str | None, Usage]] = {}
    for per_role in parts:
        for role, per_model in per_role.items():
            for model, u in per_model.items():
                total.setdefault(role, {}).setdefault(model, Usage()).add(u)
    return {r: total[r] for r in ROLES if r in total} | {r: v for r, v in total.items() if r not in ROLES}


def _label(attempts: Sequence[Attempt], sources: Sequence[str]) -> str:
    """The policy spec of the first record with a run identity (`synthetic:p=0.9`, what tells two
    runs apart), else its policy's model (or kind), else the first file's name."""
    for a in attempts:
        if a.identity is not None:
            return a.identity.spec
    for a in attempts:
        pol = a.identities.get("policy") or {}
        if pol.get("model") or pol.get("kind"):
            return str(pol.get("model") or pol.get("kind"))
    return Path(sources[0]).stem if sources else "run"


def write_json(doc: AggDoc | Any, path: str | Path) -> None:
    """An AggDoc (or any JSON value), written whole or not at all (a temporary file renamed over
    the target)."""
    if isinstance(doc, AggDoc):
        doc = doc.to_json()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = ["AGG_VERSION", "CoverageError", "MixedRunsError", "aggregate", "aggregate_doc", "expected_from_tasks", "read_agg",
           "task_domain", "write_json"]
