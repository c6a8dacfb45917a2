"""Records (ours and `tb infer` JSONL) -> `agg.json`: tallies, metrics, coverage and cost.

`agg.json` (version 1):

    version, label, sources (the record files), profile
    coverage      `Coverage.to_dict()` (trainer/eval/coverage.py): expected and scored keys, and
                  every key missing / unresolved / duplicated / unexpected / stale / unnumbered
    tasks         {uid: {n, c, domain, tags?, system_errors}}: n scored attempts, c passed
    overall       `metrics.summarize` of every task with n > 0: tasks, attempts, passes,
                  pass_at_1 {value, level, jeffreys [lo, hi], bootstrap [lo, hi]},
                  pass_at_k {"k": v}, pass_hat_k {"k": v}, observed_k_of_k {k, tasks, over, share},
                  solved_at_least_once {tasks, over, share}, (k_tasks, note when n is uneven),
                  cost (with a price table: `cost.campaign_cost`)
    by_domain     {domain: the same block}: a task's domain is its `domain:` tag (dataset given),
                  else its scenario
    by_tag        {tag: the same block} when the dataset's tags are known (`domain:` tags excluded)
    identities    the policy / user / judge identities of the first record (ours)
    usage         {role: [{model, records, input_tokens, cached_tokens, output_tokens}]}
    resamples, seed   of the bootstrap intervals

Coverage profile `full` refuses (`CoverageError`, naming every fault) unless every expected
task × repetition is scored exactly once; `none` aggregates what there is.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.env.taskformat.tasks import Task
from trainer.eval import metrics
from trainer.eval.attempts import Attempt
from trainer.eval.cost import ROLES, Price, Usage, campaign_cost
from trainer.eval.coverage import Coverage, Expected, check

AGG_VERSION = 1


class CoverageError(ValueError):
    """Profile `full` found gaps: `coverage.problems()` names each."""

    def __init__(self, coverage: Coverage):
        self.coverage = coverage
        super().__init__(coverage.summary())


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


def aggregate(attempts: Sequence[Attempt], expected: Expected, *, profile: str = "full",
              prices: Mapping[str, Price] | None = None, price_models: Mapping[str, str] | None = None,
              label: str | None = None, sources: Sequence[str] = (), resamples: int = metrics.RESAMPLES,
              seed: int = 0) -> dict[str, Any]:
    """The agg.json document (module docstring); `CoverageError` under `full` with gaps."""
    cov, kept = check(attempts, expected, profile)
    if profile == "full" and not cov.complete:
        raise CoverageError(cov)
    price_models = dict(price_models or {})
    uids = expected.uids if expected.uids is not None else list(dict.fromkeys(a.uid for a in attempts))
    scenario = {a.uid: a.scenario for a in attempts if a.scenario}
    sys_errs = Counter(a.uid for a in attempts if a.system_error)
    n, c = Counter(), Counter()
    usage: dict[str, dict[str, dict[str | None, Usage]]] = {}  # uid -> role -> model -> tokens
    for a in kept:
        n[a.uid] += 1
        c[a.uid] += a.passed
        per_role = usage.setdefault(a.uid, {})
        for role, u in a.usage.items():
            model = price_models.get(role) or a.models.get(role)
            per_role.setdefault(role, {}).setdefault(model, Usage()).add(u)
    tasks: dict[str, dict[str, Any]] = {}
    for uid in uids:
        row: dict[str, Any] = {"n": n[uid], "c": c[uid],
                               "domain": expected.domains.get(uid) or scenario.get(uid) or "unknown"}
        if uid in expected.tags:
            row["tags"] = expected.tags[uid]
        row["system_errors"] = sys_errs[uid]
        tasks[uid] = row

    def block(members: Sequence[str]) -> dict[str, Any]:
        live = [u for u in members if tasks[u]["n"] > 0]
        tallies = [metrics.Tally(tasks[u]["n"], tasks[u]["c"]) for u in live]
        b = metrics.summarize(tallies, resamples=resamples, seed=seed)
        if prices is not None:
            b["cost"] = campaign_cost(_sum_usage(usage.get(u, {}) for u in live), prices, passes=b["passes"],
                                      dependable=b["observed_k_of_k"]["tasks"])
        return b

    first = next((a for a in attempts if a.identities), None)
    doc: dict[str, Any] = {
        "version": AGG_VERSION, "label": label or _label(attempts, sources), "sources": list(sources),
        "profile": profile, "coverage": cov.to_dict(), "tasks": tasks, "overall": block(uids),
        "by_domain": {d: block(us) for d, us in metrics.groups({u: [t["domain"]] for u, t in tasks.items()}).items()},
    }
    if expected.tags:
        doc["by_tag"] = {t: block(us) for t, us in metrics.groups({u: t.get("tags", []) for u, t in tasks.items()}).items()}
    doc["identities"] = first.identities if first else {}
    doc["usage"] = {role: [{"model": m, **u.to_dict()} for m, u in per.items()]
                    for role, per in _sum_usage(usage.values()).items()}
    doc["resamples"], doc["seed"] = resamples, seed
    return doc


def _sum_usage(parts: Any) -> dict[str, dict[str | None, Usage]]:
    total: dict[str, dict[str | None, Usage]] = {}
    for per_role in parts:
        for role, per_model in per_role.items():
            for model, u in per_model.items():
                total.setdefault(role, {}).setdefault(model, Usage()).add(u)
    return {r: total[r] for r in ROLES if r in total} | {r: v for r, v in total.items() if r not in ROLES}


def _label(attempts: Sequence[Attempt], sources: Sequence[str]) -> str:
    """The policy's model (or kind) of the first record, else the first file's name."""
    for a in attempts:
        pol = a.identities.get("policy") or {}
        if pol.get("model") or pol.get("kind"):
            return str(pol.get("model") or pol.get("kind"))
    return Path(sources[0]).stem if sources else "run"


def write_json(doc: Any, path: str | Path) -> None:
    """Written whole or not at all (a temporary file renamed over the target)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_agg(path: str | Path) -> dict[str, Any]:
    """An agg.json; ValueError naming the file and what is wrong."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    except ValueError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("version") != AGG_VERSION:
        raise ValueError(f"{path}: version: not an agg.json of version {AGG_VERSION} (written by tbt aggregate / tbt eval)")
    for key in ("tasks", "overall", "by_domain"):
        if not isinstance(doc.get(key), dict):
            raise ValueError(f"{path}: {key}: missing (not an agg.json)")
    return doc


__all__ = ["AGG_VERSION", "CoverageError", "aggregate", "expected_from_tasks", "read_agg", "task_domain",
           "write_json"]
