"""Run identity: what produced a record, so that records of different runs are never mixed.

Every record `runner.run` writes carries a `run` block (trainer/formats/record.py):

    run   {"policy": the policy spec as given (secrets removed: a URL's user, password and query),
           "user": the user spec, "judge": the judge spec (the defaults resolved: "scripted",
           "synthetic", "none", "$TBT_JUDGE_URL"), "seed": the run seed,
           "dataset": {"name": the dataset directory's name, "test_list": the list's file name or
                       null, "tasks": tasks in the run, "fingerprint": SHA-256 (16 hex) over the
                       run's (uid, Task.fingerprint()) pairs}}

A record's **identity** (`Identity`) is that block together with the identities the record holds
anyway: `policy` (kind, model, url, family, thinking, the spec's parameters), `sampling`,
`family`, `user`, `judge` and the outcome-changing `budgets` (every `EpisodeConfig` field but
`call_timeout`, `open_timeout` and `isolate_tests`, which can only turn an episode into a system
error, never change its score; a budget field absent from one side, one a newer tbt added, is
not a difference when appending). Compared (`Identity.fields`): those and the run seed. Not
compared: the spec strings (the parsed identities are, so `synthetic` and `synthetic:p=0.7` are
the same policy) and the dataset block: a record is of one task, known by its uid and its content
`fingerprint` (a task whose content changed is re-run, not reused), so one policy's records over
several datasets or test lists belong together (probes of several datasets are prepared at once).

A record without a `run` block (written before records carried one, or by `tb infer`) has no
identity (`of_record` returns None): it cannot be told apart from any run, so it is never mixed
with one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import httpx

UNCOMPARED_BUDGETS = ("call_timeout", "open_timeout", "isolate_tests")
COMPARED = ("policy", "sampling", "family", "user", "judge", "budgets", "seed")


def public_spec(spec: str | None) -> str | None:
    """A policy, user or judge spec without secrets: an `openai:` / `tokens:` URL loses its user,
    password and query (where keys travel); key_env names a variable, never a key."""
    if spec is None:
        return None
    kind, colon, rest = spec.partition(":")
    if kind.strip() not in ("openai", "tokens") or "#" not in rest:
        return spec
    url, _, tail = rest.partition("#")
    try:
        url = str(httpx.URL(url).copy_with(username=None, password=None, query=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        url = "[unreadable url]"
    return f"{kind}{colon}{url}#{tail}"


def dataset_block(tasks: Iterable[Any], root: str | Path, test_list: str | Path | None) -> dict[str, Any]:
    """The `run.dataset` block of a run over these tasks (`Task`s)."""
    pairs = sorted((t.uid, t.fingerprint()) for t in tasks)
    fp = hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()[:16]
    return {"name": Path(root).name, "test_list": Path(test_list).name if test_list else None, "tasks": len(pairs),
            "fingerprint": fp}


def run_block(*, policy: str, user: str | None, judge: str | None, seed: int, dataset: Mapping[str, Any]) -> dict[str, Any]:
    return {"policy": public_spec(policy), "user": public_spec(user), "judge": public_spec(judge), "seed": seed,
            "dataset": dict(dataset)}


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Identity:
    """A record's identity: `fields` are compared, `run` is the record's whole run block."""

    fields: dict[str, Any]
    run: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict)  # of_setup: the record fields as the episode writes them

    @property
    def id(self) -> str:
        """12 hex digits naming the compared fields (`--keep-identity ID`)."""
        return hashlib.sha256(_canon(self.fields).encode()).hexdigest()[:12]

    @property
    def spec(self) -> str:
        """The policy spec as given (what tells two runs apart in a label)."""
        return str(self.run.get("policy") or self.fields["policy"].get("model") or self.fields["policy"].get("kind")
                   or "unknown policy")

    def describe(self) -> str:
        s = self.fields
        samp = s.get("sampling") or {}
        sampling = ", ".join(f"{k} {samp[k]}" for k in ("temperature", "top_p", "top_k", "max_tokens") if k in samp)
        ds = self.run.get("dataset")
        name = ds.get("name") if isinstance(ds, Mapping) else None
        return (f"policy {self.spec}, user {self.run.get('user')}, judge {self.run.get('judge')}, seed {s['seed']}"
                + (f", sampling {sampling}" if sampling else "") + (f" (dataset {name})" if name else ""))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and _canon(self.fields) == _canon(other.fields)

    def __hash__(self) -> int:
        return hash(self.id)


def of_fields(*, policy: Any, sampling: Any, family: Any, user: Any, judge: Any, budgets: Any,
              run: Any) -> Identity | None:
    """The identity of a record's fields (None without a run block)."""
    if not isinstance(run, Mapping) or not run:
        return None
    budgets = {k: v for k, v in (budgets or {}).items() if k not in UNCOMPARED_BUDGETS} if isinstance(budgets, Mapping) else budgets
    fields = {"policy": policy or {}, "sampling": sampling or {}, "family": family, "user": user or {},
              "judge": judge or {}, "budgets": budgets or {}, "seed": run.get("seed")}
    return Identity(json.loads(_canon(fields)), dict(run))


def of_record(d: Any) -> Identity | None:
    """The identity of a record: a JSON dict or an `EpisodeRecord` (None: it carries none)."""
    get = d.get if isinstance(d, Mapping) else (lambda k: getattr(d, k, None))
    return of_fields(policy=get("policy"), sampling=get("sampling"), family=get("family"), user=get("user"),
                     judge=get("judge"), budgets=get("budgets"), run=get("run"))


def of_setup(setup: Any, run: Mapping[str, Any]) -> Identity:
    """The identity the records of an `EpisodeSetup` will carry (what the episode writes in them)."""
    raw = {"policy": setup.policy.identity(), "sampling": dataclasses.asdict(setup.policy.sampling),
           "family": setup.policy.family,
           "user": setup.user.identity() if setup.user is not None else {"kind": "none"},
           "judge": dict(setup.judge_identity), "budgets": dataclasses.asdict(setup.config)}
    ident = of_fields(**raw, run=run)
    assert ident is not None
    return Identity(ident.fields, ident.run, raw)


def stamp(rec: Any, ident: Identity) -> None:
    """Give a record its run block; a record made without the setup (an executor that crashed
    before the episode began) also gets the setup's identities, so it reads as the run's."""
    rec.run = dict(ident.run)
    if not rec.policy and ident.raw:
        for k, v in ident.raw.items():
            setattr(rec, k, json.loads(_canon(v)))


def _flat(x: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(x, Mapping) and x:
        out: dict[str, Any] = {}
        for k, v in x.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: x}


def differences(a: Identity, b: Identity, names: tuple[str, str] = ("recorded", "this run")) -> list[str]:
    """`field: a's value (names[0]) ≠ b's value (names[1])`, one per compared field that differs
    (dotted paths: `policy.p`, `sampling.temperature`, `seed`)."""
    fa, fb = _flat(a.fields), _flat(b.fields)
    out = []
    for k in sorted(set(fa) | set(fb)):
        if k.startswith("budgets.") and (k not in fa or k not in fb):
            continue  # a budget a newer tbt added (its default is how the older one ran)
        va, vb = _canon(fa.get(k, "(absent)")), _canon(fb.get(k, "(absent)"))
        if va != vb:
            out.append(f"{k}: {va} ({names[0]}) ≠ {vb} ({names[1]})")
    return out


class IdentityError(ValueError):
    """Records of another run identity (or of none) in a file a run would append to."""


def check_file(path: str | Path, records: Iterable[Any], now: Identity) -> None:
    """Raise `IdentityError` unless every record of `path` has identity `now` (names the fields
    that differ and how to proceed). A system-error record without a policy identity (an executor
    that crashed before the episode began: it says nothing of what would have played) is not
    checked."""
    other: list[tuple[Identity, list[str]]] = []
    unknown = 0
    total = 0
    for r in records:
        total += 1
        get = r.get if isinstance(r, Mapping) else (lambda k: getattr(r, k, None))
        if not get("policy") and get("system_error"):
            continue
        ident = of_record(r)
        if ident is None:
            unknown += 1
        elif ident != now:
            diff = differences(ident, now)
            if diff:
                other.append((ident, diff))
    if not other and not unknown:
        return
    path = Path(path)
    new = path.with_name(f"{path.stem}-{now.id[:6]}{path.suffix}")
    how = (f"write this run to a new --output (e.g. {new}), or rerun with the recorded settings to resume "
           f"({path}'s records are kept as they are)")
    if other:
        first, diff = other[0]
        kinds = len({i for i, _ in other})
        raise IdentityError(f"{path}: {len(other)} of {total} record(s) were written by another run "
                            f"({'' if kinds == 1 else f'{kinds} identities; the first: '}{first.describe()}); "
                            f"nothing was run. Differs: " + "; ".join(diff) + f". To proceed: {how}")
    raise IdentityError(f"{path}: {unknown} of {total} record(s) carry no run identity (written by an older tbt, "
                        f"or not by tbt run): they cannot be told apart from this run's, so they are not mixed with "
                        f"it; nothing was run. To proceed: write this run to a new --output (e.g. {new}); the old "
                        f"file still aggregates on its own (tbt aggregate)")


def groups(identities: Iterable[Identity | None]) -> dict[str, tuple[Identity | None, int]]:
    """{id: (identity, records)} in first-seen order; records without one under the id "unknown"."""
    out: dict[str, list[Any]] = {}
    for ident in identities:
        key = ident.id if ident is not None else "unknown"
        out.setdefault(key, [ident, 0])[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


__all__ = ["COMPARED", "Identity", "IdentityError", "UNCOMPARED_BUDGETS", "check_file", "dataset_block",
           "differences", "groups", "of_fields", "of_record", "of_setup", "public_spec", "run_block", "stamp"]
