"""Rollouts that never wait for the slowest episode: synchronous GRPO vs verl's one-step-off vs
its fully-async trainer, simulated on the episode shapes of the sample tasks (no GPU, seconds).

    uv run python bench/async.py [--rollout-gpus 12 --trainer-gpus 12] [--sweep] [--json]

**Episodes.** The sample tasks (data/samples) are played `--probe-repeat` times each by the
synthetic policy (`synthetic:p=0.7`: golden actions or deviations, through the real runner,
sandbox and grader: `runner.run`, as `tbt run`) into a temporary directory (nothing is kept;
`--test-list` plays a list's tasks only), or `--records FILE` reads a `tbt run` records file.
Each record gives one episode's shape (agent turns, user turns, tool calls); its duration is
modelled per turn:

    agent turn   tokens / decode_tps   tokens = --tokens-per-turn x a mean-1 lognormal factor
                                       (sigma --token-spread, drawn per turn, seeded)
    tool call    --tool-latency        user turn   --user-latency

A group is `--group` episodes of one task (tasks drawn uniformly, each member one of that task's
played shapes) and is done when its last member is. `--equal-durations` gives every episode the
mean shape and no spread: the control, where nothing waits for a straggler.

**GPUs.** Rollout GPUs are one fluid server (`Engine`): `--slots-per-gpu` sequences per GPU
decode at `decode_tps` each (default: the synchronous batch exactly fills all G GPUs, so sync is
not penalised for a small batch); more than that share the throughput. Tool calls and user turns
need no GPU. Training a step of `--batch` groups takes `--train-step-s` on all G GPUs and
G / trainer_gpus times that on the trainer GPUs of a split; a weight sync `--sync-s`.

**Modes** (the same G GPUs and, under one `--seed`, the same episode draws in all three):

    sync          verl's colocated trainer (configs/train_single_node.yaml, reference_3x8.yaml): all
                  G GPUs roll out the batch, wait for its slowest episode, train, sync
    one_step_off  verl.experimental.one_step_off_policy: after each sync the rollout GPUs generate
                  batch k+1 while the trainer GPUs train batch k; each step still waits for its
                  slowest episode and for the trainer; staleness 1
    fully_async   verl.experimental.fully_async_policy as verl 0.9.0's rollouter and trainer run
                  it: a group starts whenever fewer than max_concurrent_samples are in flight and
                  fewer than max_required_samples = mini x (1 + --staleness) x --trigger-sync were
                  started since the last sync (staleness_samples, reset to in-flight + queued at
                  each sync); the trainer takes `--mini-batch` finished groups (ppo_mini_batch_size
                  x require_batches; default --batch) in finish order, and syncs every
                  `--trigger-sync` updates; groups in flight carry on through a sync
                  (partial_rollout: the engine pauses, tools and users do not)

**Reported** per mode: samples_per_hour (trained episodes), gpu_idle_share {rollout: unused
decoding throughput of the rollout GPUs over the time that role holds them; trainer: share of the
trainer GPUs' time not training; all: idle GPU-seconds over all GPU-seconds}, mean_staleness
(weight syncs between the weights an episode started on and the update that trains on it: verl's
`trajectory_staleness_worst`), mean_update_lag (the same in trainer updates), partial_share
(trained episodes that ran across a sync), and vs_sync: samples_per_hour over sync's in this run.
`--sweep` also tries every rollout/trainer split of G in steps of `--tp` for the two split
modes and prints the best. With `--json` the last line is
{"sync": {...}, "one_step_off": {...}, "fully_async": {...}}.

Left out: prefill, and the re-prefill of a resumed partial rollout (a sync frees the KV cache);
per-sequence speed below saturation; the trainer's extra forward pass of decoupled IS
(`rollout_correction.bypass_mode: false`); colocated wake/sleep beyond `--sync-s`; system-error
re-runs. It shows where the time goes under these assumptions, not what one cluster will do.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SAMPLES = ROOT / "data" / "samples"
MODES = ("sync", "one_step_off", "fully_async")


@dataclass(frozen=True)
class Shape:
    """One played episode: what its duration is made of."""

    agent_turns: int
    user_turns: int
    tool_calls: int


@dataclass
class Model:
    """The latency model and the run (module docstring; every field is a flag)."""

    tokens_per_turn: float = 500.0
    decode_tps: float = 40.0  # tokens/s per sequence
    tool_latency: float = 0.5  # s per tool call
    user_latency: float = 4.0  # s per simulated-user turn
    token_spread: float = 0.6  # sigma of the per-turn lognormal token factor (0: none)
    group: int = 8
    batch: int = 18  # groups per training step
    steps: int = 50
    train_step_s: float = 90.0  # one training step of `batch` groups on all G GPUs
    sync_s: float = 15.0  # one weight sync
    rollout_gpus: int = 12  # configs/reference_3x8_async.yaml: rollout 3 x 4, trainer 3 x 4
    trainer_gpus: int = 12
    tp: int = 4  # GPUs per rollout replica (the split sweep moves in these steps)
    slots_per_gpu: int | None = None  # None: ceil(batch x group / G)
    staleness: float = 1.0  # async_training.staleness_threshold
    concurrent_per_replica: int = 16  # async_training.concurrent_samples_per_replica (groups)
    trigger_sync: int = 1  # async_training.trigger_parameter_sync_step
    mini_batch: int | None = None  # fully_async: groups per update (ppo_mini_batch_size x require_batches); None: batch
    equal_durations: bool = False
    seed: int = 0

    @property
    def gpus(self) -> int:
        return self.rollout_gpus + self.trainer_gpus

    @property
    def mini(self) -> int:
        return self.mini_batch or self.batch

    @property
    def spg(self) -> int:
        return self.slots_per_gpu or math.ceil(self.batch * self.group / self.gpus)


@dataclass
class Episode:
    duration: float  # seconds of work: decoding, tools, user
    gen_share: float  # the part of it that is decoding (what a weight sync stalls)


# ---------------------------------------------------------------- episodes from real data


def shapes_from_records(lines: list[dict]) -> dict[str, list[Shape]]:
    """{task uid: [its episodes' shapes]} from records (system-error attempts left out)."""
    out: dict[str, list[Shape]] = {}
    for r in lines:
        if r.get("system_error"):
            continue
        turns = r.get("turns") or {}
        out.setdefault(str(r["uid"]), []).append(Shape(int(turns.get("agent", 0)), int(turns.get("user", 0)),
                                                       len(r.get("tool_calls") or [])))
    if not out:
        raise SystemExit("no scored episodes in the records")
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def play_samples(repeat: int, test_list: Path | None = None) -> list[dict]:
    """Every sample task (or a test list's) played `repeat` times by the synthetic policy (the one
    run assembly)."""
    from trainer.rollout.runner import RunPlan, run
    from trainer.rollout.setup import RunSpec

    spec = RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.7", user="scripted", judge="synthetic",
                   test_list=str(test_list.resolve()) if test_list else None)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.jsonl"
        run(spec, RunPlan(output=out, repeat=repeat, concurrency=8))
        return read_jsonl(out)


# ---------------------------------------------------------------- the latency model


class Draws:
    """The groups every mode rolls out, in order: the same sequence for every mode (one seed)."""

    def __init__(self, shapes: dict[str, list[Shape]], m: Model):
        self.tasks = sorted(shapes)
        self.shapes, self.m = shapes, m
        self.rng = random.Random(m.seed)
        every = [s for v in shapes.values() for s in v]
        self.mean = Shape(round(statistics.fmean(s.agent_turns for s in every)),
                          round(statistics.fmean(s.user_turns for s in every)),
                          round(statistics.fmean(s.tool_calls for s in every)))

    def episode(self, s: Shape) -> Episode:
        m = self.m
        sigma = 0.0 if m.equal_durations else m.token_spread
        gen = sum(m.tokens_per_turn * math.exp(sigma * self.rng.gauss(0.0, 1.0) - sigma * sigma / 2)
                  for _ in range(s.agent_turns)) / m.decode_tps
        rest = s.tool_calls * m.tool_latency + s.user_turns * m.user_latency
        return Episode(gen + rest, gen / (gen + rest) if gen + rest > 0 else 0.0)

    def group(self) -> list[Episode]:
        if self.m.equal_durations:
            return [self.episode(self.mean) for _ in range(self.m.group)]
        task = self.tasks[self.rng.randrange(len(self.tasks))]
        return [self.episode(self.rng.choice(self.shapes[task])) for _ in range(self.m.group)]


class Engine:
    """The rollout GPUs as one fluid server: `slots` sequences decode at full speed (decode_tps
    each); with more decoding at once they share that throughput (vLLM's batch saturates). An
    episode's decoding share `g` is the load it puts on the engine, the rest of its time (tools,
    the user) needs no GPU. An episode of work `w` (seconds at full speed) progresses at
    1 / (g / f + 1 - g), f = min(1, slots / load); while a weight sync pauses the engine only
    its non-decoding part goes on (rate 1 - g)."""

    def __init__(self, slots: int):
        self.slots = slots
        self.running: list[list] = []  # [remaining work, g, owner]
        self.busy = 0.0  # slot-seconds of decoding throughput used
        self.paused = False

    def add(self, episodes: list[Episode], owner: object) -> None:
        self.running += [[e.duration, e.gen_share, owner] for e in episodes]

    def _rates(self) -> tuple[list[float], float]:
        load = sum(r[1] for r in self.running)
        if self.paused:
            return [1.0 - r[1] for r in self.running], 0.0
        f = min(1.0, self.slots / load) if load > 0 else 1.0
        return [1.0 / (r[1] / f + 1.0 - r[1]) for r in self.running], min(load, self.slots)

    def next_done(self) -> float:
        """Seconds until the next episode finishes (inf: none can)."""
        rates, _ = self._rates()
        return min((r[0] / x for r, x in zip(self.running, rates) if x > 0), default=math.inf)

    def advance(self, dt: float) -> list[object]:
        """Run `dt` seconds; the owners of the episodes that finished, one entry per episode."""
        rates, used = self._rates()
        self.busy += used * dt
        done, keep = [], []
        for r, x in zip(self.running, rates):
            r[0] -= x * dt
            (done if r[0] <= 1e-9 else keep).append(r)
        self.running = keep
        return [r[2] for r in done]

    def run_out(self) -> float:
        """Seconds until everything running has finished."""
        t = 0.0
        while self.running:
            dt = self.next_done()
            self.advance(dt)
            t += dt
        return t


@dataclass
class Tally:
    wall: float = 0.0
    trained: int = 0  # episodes
    rollout_busy: float = 0.0  # slot-seconds of decoding throughput used
    rollout_held: float = 0.0  # slot-seconds the rollout role held
    trainer_busy: float = 0.0  # GPU-seconds training
    trainer_held: float = 0.0  # GPU-seconds the trainer role held
    idle_gpu_s: float = 0.0
    staleness: list[int] = field(default_factory=list)  # per trained episode: weight syncs behind
    lag: list[int] = field(default_factory=list)  # per trained episode: trainer updates behind
    partial: int = 0  # trained episodes that ran across a sync

    def split_idle(self, m: Model, slots: int) -> None:
        """The idle GPU-seconds of a split run (rollout and trainer GPUs held for the whole wall)."""
        self.rollout_held, self.trainer_held = slots * self.wall, m.trainer_gpus * self.wall
        self.idle_gpu_s = (m.rollout_gpus * (1 - self.rollout_busy / self.rollout_held) * self.wall
                           + self.trainer_held - self.trainer_busy)

    def result(self, m: Model) -> dict:
        return {"samples_per_hour": round(self.trained / self.wall * 3600, 1),
                "gpu_idle_share": {"rollout": round(1 - self.rollout_busy / self.rollout_held, 4),
                                   "trainer": round(1 - self.trainer_busy / self.trainer_held, 4),
                                   "all": round(self.idle_gpu_s / (m.gpus * self.wall), 4)},
                "mean_staleness": round(statistics.fmean(self.staleness), 3) if self.staleness else 0.0,
                "mean_update_lag": round(statistics.fmean(self.lag), 3) if self.lag else 0.0,
                "partial_share": round(self.partial / max(1, self.trained), 4),
                "wall_s": round(self.wall, 1), "trained": self.trained,
                "split": {"rollout_gpus": m.rollout_gpus, "trainer_gpus": m.trainer_gpus}}


def batch_of(m: Model, draws: Draws) -> list[Episode]:
    return [e for _ in range(m.batch) for e in draws.group()]


def sync(m: Model, draws: Draws) -> dict:
    """Colocated: all G GPUs roll out the batch (all of it at once, as verl sends it), wait for its
    slowest episode, train on it, sync."""
    t, engine, train = Tally(), Engine(m.gpus * m.spg), m.train_step_s
    for _ in range(m.steps):
        eps = batch_of(m, draws)
        engine.add(eps, None)
        busy0 = engine.busy
        span = engine.run_out()
        t.wall += span + train + m.sync_s
        t.rollout_held += engine.slots * span
        t.trainer_busy += m.gpus * train
        t.trainer_held += m.gpus * (train + m.sync_s)
        t.idle_gpu_s += m.gpus * (span * (1 - (engine.busy - busy0) / (engine.slots * span)) + m.sync_s)
        t.trained += len(eps)
        t.staleness += [0] * len(eps)
        t.lag += [0] * len(eps)
    t.rollout_busy = engine.busy
    return t.result(m)


def one_step_off(m: Model, draws: Draws) -> dict:
    """Split: after each sync the rollout GPUs generate batch k+1 (weights of step k-1) while the
    trainer GPUs train batch k; the step ends when both are done."""
    t, engine = Tally(), Engine(m.rollout_gpus * m.spg)
    train = m.train_step_s * m.gpus / m.trainer_gpus
    engine.add(batch_of(m, draws), None)
    t.wall = engine.run_out()
    for k in range(m.steps):
        if k < m.steps - 1:
            engine.add(batch_of(m, draws), None)
        t.wall += m.sync_s + max(engine.run_out(), train)
        t.trained += m.batch * m.group
        t.staleness += [0 if k == 0 else 1] * (m.batch * m.group)
        t.lag += [0 if k == 0 else 1] * (m.batch * m.group)
    t.rollout_busy, t.trainer_busy = engine.busy, m.trainer_gpus * train * m.steps
    t.split_idle(m, engine.slots)
    return t.result(m)


@dataclass(eq=False)
class Flight:
    """A group in flight: members still running, the weight version it started on."""

    version: int  # weight syncs done when it started
    left: int
    updates: int  # trainer updates done when it started (the weights it runs on are older)
    crossed: bool = False  # ran across a weight sync (partial rollout)


def fully_async(m: Model, draws: Draws) -> dict:
    """verl 0.9.0's rollouter and trainer (module docstring), event by event."""
    t, engine, mini = Tally(), Engine(m.rollout_gpus * m.spg), m.mini
    train = m.train_step_s * m.gpus / m.trainer_gpus * mini / m.batch  # one trainer step of `mini` groups
    max_required = int(mini * (m.staleness + 1) * m.trigger_sync)  # set_max_required_samples
    max_concurrent = min(m.rollout_gpus // m.tp * m.concurrent_per_replica, max_required)
    now, version, stale_count, local, updates = 0.0, 0, 0, 0, 0
    active: set[Flight] = set()
    queue: list[Flight] = []
    train_end = sync_end = math.inf

    def admit() -> None:
        nonlocal stale_count
        while len(active) < max_concurrent and stale_count < max_required and len(queue) < max_required:
            f = Flight(version, m.group, updates)
            engine.add(draws.group(), f)
            active.add(f)
            stale_count += 1

    admit()
    while t.trained < m.steps * m.batch * m.group:
        if train_end == math.inf and sync_end == math.inf and len(queue) >= mini:
            for f in queue[:mini]:
                t.staleness += [version - f.version] * m.group
                t.lag += [updates - f.updates] * m.group
                t.partial += m.group if f.crossed else 0
            del queue[:mini]
            train_end = now + train
        nxt = min(now + engine.next_done(), train_end, sync_end)
        if nxt == math.inf:
            raise RuntimeError("fully_async: nothing can happen (the staleness bound holds no batch)")
        for f in engine.advance(nxt - now):
            f.left -= 1
            if f.left == 0:
                active.remove(f)
                queue.append(f)
        now = nxt
        if train_end <= now:
            train_end, local, updates = math.inf, local + 1, updates + 1
            t.trained += mini * m.group
            if local == m.trigger_sync:  # abort, sync, resume: in-flight groups carry on (partial rollout)
                local, sync_end, engine.paused = 0, now + m.sync_s, True
                for f in active:
                    f.crossed = True
        if sync_end <= now:
            sync_end, version, engine.paused = math.inf, version + 1, False
            stale_count = len(active) + len(queue)  # reset_staleness
        admit()
    t.wall = now
    t.rollout_busy, t.trainer_busy = engine.busy, m.trainer_gpus * train * updates
    t.split_idle(m, engine.slots)
    return t.result(m)


SIMULATE = {"sync": sync, "one_step_off": one_step_off, "fully_async": fully_async}


def simulate(mode: str, shapes: dict[str, list[Shape]], m: Model) -> dict:
    """One mode on a fresh draw sequence (the same for every mode under one seed)."""
    return SIMULATE[mode](m, Draws(shapes, m))


def compare(shapes: dict[str, list[Shape]], m: Model) -> dict[str, dict]:
    res = {mode: simulate(mode, shapes, m) for mode in MODES}
    base = res["sync"]["samples_per_hour"]
    for r in res.values():
        r["vs_sync"] = round(r["samples_per_hour"] / base, 3)
    return res


def sweep(shapes: dict[str, list[Shape]], m: Model) -> dict[str, dict]:
    """The best rollout/trainer split of the same G for each split mode (by samples_per_hour)."""
    best: dict[str, dict] = {}
    for r in range(m.tp, m.gpus, m.tp):
        mm = Model(**{**m.__dict__, "rollout_gpus": r, "trainer_gpus": m.gpus - r,
                      "slots_per_gpu": m.spg})  # the same engine concurrency per GPU at every split
        for mode in ("one_step_off", "fully_async"):
            res = simulate(mode, shapes, mm)
            if mode not in best or res["samples_per_hour"] > best[mode]["samples_per_hour"]:
                best[mode] = res
    return best


def row(name: str, r: dict) -> str:
    idle = r["gpu_idle_share"]
    return (f"{name:<13}{r['split']['rollout_gpus']:>3}/{r['split']['trainer_gpus']:<4}{r['samples_per_hour']:>10.0f}"
            f"{r['vs_sync']:>8.2f}x{idle['rollout']:>9.1%}{idle['trainer']:>9.1%}{idle['all']:>8.1%}"
            f"{r['mean_staleness']:>8.2f}{r['mean_update_lag']:>6.2f}{r['partial_share']:>9.1%}")


HEAD = (f"{'mode':<13}{'r/t':<7}{'samples/h':>10}{'vs sync':>9}{'idle:rol':>9}{'trainer':>9}{'all':>8}"
        f"{'stale':>8}{'lag':>6}{'partial':>9}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = Model()
    ap.add_argument("--records", type=Path, help="a tbt run records file (default: play data/samples now)")
    ap.add_argument("--probe-repeat", type=int, default=2, help="plays of each sample task (without --records)")
    ap.add_argument("--test-list", type=Path, help="play only this list's sample tasks (data/samples/lists/*.yaml)")
    for name, help_ in [("tokens_per_turn", "mean tokens per agent turn"),
                        ("decode_tps", "decode tokens/s per sequence"),
                        ("tool_latency", "s per tool call"), ("user_latency", "s per simulated-user turn"),
                        ("token_spread", "sigma of the per-turn token factor"),
                        ("train_step_s", "s per training step of --batch groups on all GPUs"),
                        ("sync_s", "s per weight sync"), ("staleness", "async_training.staleness_threshold")]:
        ap.add_argument("--" + name.replace("_", "-"), dest=name, type=float, default=getattr(d, name),
                        help=f"{help_} (default {getattr(d, name)})")
    for name, help_ in [("group", "episodes per group (rollout.n)"), ("batch", "groups per training step"),
                        ("steps", "training steps"), ("rollout_gpus", "rollout GPUs (split modes)"),
                        ("trainer_gpus", "trainer GPUs (split modes)"), ("tp", "GPUs per rollout replica"),
                        ("trigger_sync", "async_training.trigger_parameter_sync_step"),
                        ("concurrent_per_replica", "async_training.concurrent_samples_per_replica"), ("seed", "seed")]:
        ap.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=getattr(d, name),
                        help=f"{help_} (default {getattr(d, name)})")
    ap.add_argument("--mini-batch", type=int, default=None,
                    help="fully_async: groups per trainer update (ppo_mini_batch_size x require_batches; default --batch)")
    ap.add_argument("--slots-per-gpu", type=int, default=None,
                    help="sequences decoding at full speed per GPU (default: the sync batch fills G)")
    ap.add_argument("--equal-durations", action="store_true", help="every episode the mean shape, no token spread")
    ap.add_argument("--sweep", action="store_true", help="also the best rollout/trainer split of G per split mode")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    m = Model(**{k: getattr(a, k) for k in Model.__dataclass_fields__})
    lines = read_jsonl(a.records) if a.records else play_samples(a.probe_repeat, a.test_list)
    shapes = shapes_from_records(lines)
    every = [s for v in shapes.values() for s in v]
    turns = sorted(s.agent_turns for s in every)
    res = compare(shapes, m)
    source = a.records or f"{a.test_list or 'data/samples'}, synthetic:p=0.7 x {a.probe_repeat}"
    spread = 0 if m.equal_durations else m.token_spread
    print(f"# {len(every)} episodes of {len(shapes)} tasks ({source}): agent turns {turns[0]}-{turns[-1]} "
          f"(median {statistics.median(turns):g}); {m.tokens_per_turn:g} tokens/turn at {m.decode_tps:g} tok/s, "
          f"spread {spread:g}, tool {m.tool_latency:g} s, user {m.user_latency:g} s"
          + (", EQUAL durations" if m.equal_durations else ""))
    print(f"# G={m.gpus} GPUs, {m.spg} sequences per GPU at full speed, {m.steps} steps x {m.batch} groups x "
          f"{m.group}, train {m.train_step_s:g} s on G, sync {m.sync_s:g} s; fully_async: {m.mini} groups per update, "
          f"staleness {m.staleness:g}, trigger {m.trigger_sync}; seed {m.seed}")
    print(HEAD)
    for mode in MODES:
        print(row(mode, res[mode]))
    if a.sweep:
        base = res["sync"]["samples_per_hour"]
        print("# best split of the same G (same engine concurrency per GPU):")
        for mode, r in sweep(shapes, m).items():
            r["vs_sync"] = round(r["samples_per_hour"] / base, 3)
            print(row(mode, r))
    if a.json:
        print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
