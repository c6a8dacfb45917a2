"""Online policy-relative difficulty: one Beta posterior per task, updated from every training group.

The offline probes of data preparation give each task the Jeffreys posterior
`Beta(k + 1/2, n - k + 1/2)` (trainer/data/bands.py; n, k from `bands.csv`). Training keeps
that posterior moving:

- **update**: a group of rewards r_1..r_G in [0, 1] first fades the task's evidence beyond the
  Jeffreys prior by `forget` (`a <- 1/2 + forget (a - 1/2)`, b likewise: training moves the tasks
  it trains on, so their older groups and the offline probes count less), then adds `sum r` to a
  and `sum (1 - r)` to b (binary rewards: successes and failures; fractional ones count fractionally);
- **discount**: at the end of every training step every task's evidence fades by `discount` the
  same way (the policy moves for all tasks; one not looked at for a while drifts back towards
  Beta(1/2, 1/2), whose chance of a mixed group is 0.61, and becomes a candidate again);
- **the chance of a useful group**: a group of G members has non-zero GRPO advantage unless all
  pass or all fail; under p ~ Beta(a, b) that is

      P(mixed) = 1 - E[p^G] - E[(1 - p)^G],   E[p^G] = prod_{i<G} (a + i) / (a + b + i)

  (exact Beta moments; `mixed_probability`);
- **selection** (`DifficultyState.pick`): the candidate with the highest
  `P(mixed) + tilt * (1 - posterior mean)`; with probability `explore` instead the candidate
  picked longest ago (never-picked ones first), so no task is starved: with N tasks and P picks a
  step every task is rolled out at least every N / (explore * P) steps. The tilt prefers, of two tasks about as likely to give
  a mixed group, the harder one: training raises p, so the harder one stays useful longer while
  the easier one drifts to all-pass, and it is what the policy cannot do yet (bench/selection.py
  measures the effect: more useful rollouts and a higher pass@20 than without it).

State, trace and checkpoints: `to_json()` / `from_json()` hold every task's (a, b), its prior,
its group count, the step, and the trace: the posterior mean of every task after every step
(`trace_png` plots it; `python -m trainer.difficulty_cli STATE.json OUT.png` from the command line).
trainer/verl/difficulty_verl.py plugs this into verl.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from trainer.core.figures import figure_png
from trainer.formats.bandsfile import BandsFileError, read_bands_csv

JEFFREYS = 0.5
STATE_FORMAT = "thinkingbox-difficulty/1"


class DifficultyError(ValueError):
    """A difficulty state or configuration that cannot be used (the message names the field or file)."""


def beta_moment(a: float, b: float, n: int) -> float:
    """E[p^n] for p ~ Beta(a, b)."""
    m = 1.0
    for i in range(n):
        m *= (a + i) / (a + b + i)
    return m


def mixed_probability(a: float, b: float, group_size: int = 8) -> float:
    """P(a group of `group_size` Bernoulli(p) rewards is not all equal), p ~ Beta(a, b)."""
    return max(0.0, 1.0 - beta_moment(a, b, group_size) - beta_moment(b, a, group_size))


def jeffreys(k: int, n: int) -> tuple[float, float]:
    if n < 0 or not 0 <= k <= n:
        raise DifficultyError(f"need 0 <= k <= n, got k={k}, n={n}")
    return k + JEFFREYS, n - k + JEFFREYS


@dataclass(frozen=True)
class DifficultyConfig:
    group_size: int = 8  # rollouts per group (actor_rollout_ref.rollout.n)
    forget: float = 0.85  # per observed group of a task, on its evidence beyond Beta(1/2, 1/2); 1: none
    discount: float = 1.0  # per training step, every task, the same way; 1: none (the default)
    tilt: float = 0.6  # weight of (1 - posterior mean) in the pick score
    explore: float = 0.05  # share of picks that go to the candidate picked longest ago
    seed: int = 0  # the pick RNG's seed

    def __post_init__(self) -> None:
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise DifficultyError(f"difficulty config: group_size={self.group_size!r} must be an integer >= 2")
        for name in ("forget", "discount"):
            if not 0.0 < float(getattr(self, name)) <= 1.0:
                raise DifficultyError(f"difficulty config: {name}={getattr(self, name)!r} must be in (0, 1]")
        if float(self.tilt) < 0.0:
            raise DifficultyError(f"difficulty config: tilt={self.tilt!r} must be >= 0")
        if not 0.0 <= float(self.explore) <= 1.0:
            raise DifficultyError(f"difficulty config: explore={self.explore!r} must be in [0, 1]")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None, where: str = "difficulty config") -> DifficultyConfig:
        m = dict(m or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(m) - known)
        if unknown:
            raise DifficultyError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**m)


@dataclass
class Belief:
    a: float
    b: float
    prior: tuple[float, float]  # (a, b) before training: the offline Jeffreys posterior
    groups: int = 0  # training groups observed
    last_step: int | None = None  # the step of its last observed group
    last_pick: int | None = None  # the pick counter when it was last picked

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)

    @property
    def prior_mean(self) -> float:
        return self.prior[0] / (self.prior[0] + self.prior[1])


@dataclass
class DifficultyState:
    beliefs: dict[str, Belief]
    config: DifficultyConfig = field(default_factory=DifficultyConfig)
    step: int = 0  # the last training step whose end was applied
    picks: int = 0  # picks made so far
    trace_steps: list[int] = field(default_factory=list)
    trace_mean: list[list[float]] = field(default_factory=list)  # per trace step, per sorted uid
    source: str = ""  # where the priors came from

    @classmethod
    def from_counts(cls, counts: Mapping[str, tuple[int, int] | None], config: DifficultyConfig | None = None,
                    source: str = "") -> DifficultyState:
        """Priors from offline probe counts {uid: (n, k)} (None: not probed -> Beta(1/2, 1/2))."""
        beliefs = {}
        for uid, nk in counts.items():
            a, b = jeffreys(nk[1], nk[0]) if nk else (JEFFREYS, JEFFREYS)
            beliefs[uid] = Belief(a, b, (a, b))
        st = cls(beliefs, config or DifficultyConfig(), source=source)
        st._record_trace()
        return st

    # -- the posterior --------------------------------------------------------------------------
    def p_mixed(self, uid: str) -> float:
        b = self.beliefs[uid]
        return mixed_probability(b.a, b.b, self.config.group_size)

    def observe(self, uid: str, rewards: Sequence[float], step: int | None = None) -> None:
        """One training group of `uid` with these rewards (each clipped to [0, 1])."""
        if uid not in self.beliefs:
            self.beliefs[uid] = Belief(JEFFREYS, JEFFREYS, (JEFFREYS, JEFFREYS))
        bel = self.beliefs[uid]
        rs = [min(1.0, max(0.0, float(r))) for r in rewards]
        _fade(bel, float(self.config.forget))
        bel.a += sum(rs)
        bel.b += len(rs) - sum(rs)
        bel.groups += 1
        bel.last_step = step

    def end_step(self, step: int) -> None:
        """The end of training step `step`: discount every task once per elapsed step, record the trace."""
        elapsed = step - self.step
        if elapsed <= 0:
            return
        g = float(self.config.discount) ** elapsed
        for bel in self.beliefs.values():
            _fade(bel, g)
        self.step = step
        self._record_trace()

    def _record_trace(self) -> None:
        self.trace_steps.append(self.step)
        self.trace_mean.append([round(self.beliefs[u].mean, 4) for u in sorted(self.beliefs)])

    # -- selection ------------------------------------------------------------------------------
    def score(self, uid: str) -> float:
        """The pick score: P(mixed) + tilt * (1 - posterior mean) (module docstring)."""
        bel = self.beliefs[uid]
        return mixed_probability(bel.a, bel.b, self.config.group_size) + float(self.config.tilt) * (1.0 - bel.mean)

    def pick(self, rng: random.Random, candidates: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> str:
        """One task to roll out next: the best `score`, or with probability `explore` the
        candidate picked longest ago (never picked first). Tasks in `exclude` (picked already this
        step) are passed over unless nothing else is left. Ties go to the first uid in sorted order."""
        pool = sorted(self.beliefs if candidates is None else candidates)
        if not pool:
            raise DifficultyError("difficulty state: no candidate tasks to pick from")
        skip = set(exclude)
        open_ = [u for u in pool if u not in skip] or pool
        for u in open_:
            if u not in self.beliefs:
                self.beliefs[u] = Belief(JEFFREYS, JEFFREYS, (JEFFREYS, JEFFREYS))
        if rng.random() < float(self.config.explore):
            last = {u: self.beliefs[u].last_pick for u in open_}
            uid = min(open_, key=lambda u: (last[u] is not None, last[u] or 0))
        else:
            uid = max(open_, key=self.score)
        self.beliefs[uid].last_pick = self.picks
        self.picks += 1
        return uid

    def select(self, rng: random.Random, k: int, candidates: Iterable[str] | None = None) -> list[str]:
        """`k` distinct tasks (as `pick` one after another, each excluding those before it)."""
        out: list[str] = []
        for _ in range(k):
            out.append(self.pick(rng, candidates, exclude=out))
        return out

    # -- persistence ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        uids = sorted(self.beliefs)
        return {"format": STATE_FORMAT, "config": asdict(self.config), "step": self.step, "picks": self.picks,
                "source": self.source,
                "tasks": {u: {"a": self.beliefs[u].a, "b": self.beliefs[u].b, "prior": list(self.beliefs[u].prior),
                              "groups": self.beliefs[u].groups, "last_step": self.beliefs[u].last_step,
                              "last_pick": self.beliefs[u].last_pick} for u in uids},
                "trace": {"uids": uids, "steps": list(self.trace_steps), "mean": [list(r) for r in self.trace_mean]}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "difficulty state") -> DifficultyState:
        if not isinstance(d, Mapping) or d.get("format") != STATE_FORMAT:
            got = d.get("format") if isinstance(d, Mapping) else type(d).__name__
            raise DifficultyError(f"{where}: format is {got!r}, expected {STATE_FORMAT!r}")
        try:
            beliefs = {u: Belief(float(t["a"]), float(t["b"]), (float(t["prior"][0]), float(t["prior"][1])),
                                 int(t["groups"]), t.get("last_step"), t.get("last_pick")) for u, t in d["tasks"].items()}
            tr = d["trace"]
            st = cls(beliefs, DifficultyConfig.from_mapping(d["config"], f"{where}: config"), int(d["step"]),
                     int(d.get("picks", 0)), [int(s) for s in tr["steps"]], [list(map(float, r)) for r in tr["mean"]],
                     str(d.get("source", "")))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise DifficultyError(f"{where}: malformed ({type(e).__name__}: {e})") from None
        if tr["uids"] != sorted(beliefs):
            raise DifficultyError(f"{where}: trace.uids do not match the tasks")
        return st

    def save(self, path: Path) -> None:
        """Written atomically (a temporary file renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> DifficultyState:
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")), str(path))
        except OSError as e:
            raise DifficultyError(f"{path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise DifficultyError(f"{path}: not JSON ({e})") from None


def _fade(bel: Belief, g: float) -> None:
    if g < 1.0:
        bel.a = JEFFREYS + g * (bel.a - JEFFREYS)
        bel.b = JEFFREYS + g * (bel.b - JEFFREYS)


def read_probe_counts(path: Path) -> dict[str, tuple[int, int] | None]:
    """{uid: (n, k)} from data preparation's `bands.csv` (trainer/formats/bandsfile.py; columns uid,
    n, k needed); n = 0 -> None."""
    try:
        rows = read_bands_csv(path, need=("uid", "n", "k")).rows
    except BandsFileError as e:
        raise DifficultyError(str(e)) from None
    return {r.uid: (r.n, r.k) if r.n > 0 else None for r in rows}


def trace_png(state_json: Mapping[str, Any], uids: Sequence[str] | None = None) -> bytes:
    """The per-task trace (posterior mean after every step), one line per task, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tr = state_json["trace"]
    cols = {u: i for i, u in enumerate(tr["uids"])}
    chosen = list(uids) if uids is not None else tr["uids"]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    for u in chosen:
        ax.plot(tr["steps"], [row[cols[u]] for row in tr["mean"]], lw=0.8, alpha=0.6)
    ax.set_xlabel("training step")
    ax.set_ylabel("posterior mean of p(solved)")
    ax.set_ylim(0, 1)
    ax.set_title(f"online difficulty: {len(chosen)} task(s), posterior mean per step")
    return figure_png(fig)


__all__ = ["Belief", "DifficultyConfig", "DifficultyError", "DifficultyState", "STATE_FORMAT", "beta_moment",
           "jeffreys", "mixed_probability", "read_probe_counts", "trace_png"]
