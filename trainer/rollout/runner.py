"""The runner: every (task, repetition) of a run played once, recorded, resumable.

`run(spec, plan)` is the one assembly of a run, used by `tbt run`, `tbt probe`, `tbt eval` and
`tbt quickstart`: it loads the spec's dataset, builds the policy, user, judge and server registry
(trainer/rollout/setup.py), plays the plan's episodes here or on Ray, resumes, and returns the
tally (`RunResult`); printing it is the CLI's. Training plays its episodes inside verl's agent
loop (trainer/verl/agent_loop.py) with the same setup functions, the same retry policy
(`play_with_retries`) and the same seeds (`episode_seed`, with `step_seed` as the run seed of a
training step).

`run_episodes` plays the planned episodes with `concurrency` in flight (asyncio) and appends each
record to the output as it finishes (one line, flushed and fsynced: `RecordWriter`). Scored
records go to `output` (a record that cannot be encoded is that episode's system error instead);
every system-error attempt goes to `errors_output` and is re-run, up to
`retries` more times in this run (at once, with a fresh sandbox: `play_with_retries`), then
reported as unresolved (exit status 1 in the CLI).

Identity: every record carries its run's identity (`run`: the policy, user and judge specs, the
run seed, the dataset; trainer/formats/identity.py). A run into a file holding records of another
identity (a different policy or parameter, sampling, user, judge, budget or seed), or of
none (an older tbt), is refused before any episode (`IdentityError`, naming the fields that
differ). A recorded key whose task has changed since (its `fingerprint` is not the task's now) is
not reused: it is re-run and listed in `RunResult.changed` (the old record stays in the file;
coverage counts it as replaced, trainer/formats/coverage.py).

Resume: a rerun reads `output` first and skips every (uid, repetition) already recorded; a torn
last line (a crash mid-write) is cut off and that episode re-run. So Ctrl-C or a crash loses at
most the episodes in flight; deleting lines and rerunning restores exactly those; a rerun retries
episodes that ended in system errors (their earlier attempts stay in `errors_output`, and the
attempt number goes on from there).

Seeds: an episode's seed is `stable_seed("episode", run seed, uid, repetition)`: the same in
every process and on every attempt, so a re-run replays the same sampling where the policy can.
In training, a step's run seed is `step_seed(thinkingbox.seed, step)`, mixed with the row's
dispatch number so that a refilled group draws new episodes (trainer/verl/agent_loop.py
`member_seed`), and a group member's repetition is its index in the group.

Where episodes run is an `Execute` function: `local_execute` (this process) or `RayExecute`
(async actors on a Ray cluster's CPU workers, each building the setup from the picklable
`RunSpec`): same records, same resume, the driver alone writes the files.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from trainer.core.timings import Breakdown
from trainer.env.errors import DatasetError
from trainer.env.taskformat.tasks import Task
from trainer.rollout.episode import EpisodeSetup, run_episode
from trainer.formats.identity import Identity, check_file, dataset_block, of_setup, run_block, stamp
from trainer.rollout.config import RunPlan, episode_seed, step_seed  # noqa: F401  (declared with a run's options; re-exported)
from trainer.rollout.preflight import check_endpoints, refuse_judged
from trainer.formats.record import EpisodeRecord, RecordWriter, read_records
from trainer.rollout.setup import RunSpec, build_setup, close_setup, load_run_dataset, role_names

Execute = Callable[[Task, int, int, int], Awaitable[EpisodeRecord]]  # (task, repetition, seed, attempt)


async def play_with_retries(play: Callable[[int], Awaitable[EpisodeRecord]], *, retries: int, first_attempt: int = 0,
                            on_system_error: Callable[[EpisodeRecord], None] | None = None) -> EpisodeRecord:
    """The retry policy of every run: play attempt `first_attempt`, and after each system error
    (reported to `on_system_error`) the next attempt, at most `retries` more times. Returns the
    scored record, or the last system error when every attempt failed (never scored)."""
    attempt = first_attempt
    while True:
        rec = await play(attempt)
        if rec.system_error is None:
            return rec
        if on_system_error is not None:
            on_system_error(rec)
        if attempt - first_attempt >= retries:
            return rec
        attempt += 1


def writable(rec: EpisodeRecord, task: Task) -> EpisodeRecord:
    """`rec`, or, when JSON cannot hold it (a circular or too deeply nested value: our bug or a
    backend's, never the model's text, which records always take), the system error that stands
    for it: that episode is re-run, the run goes on."""
    try:
        rec.to_json()
    except (TypeError, ValueError, RecursionError) as e:
        return _crashed(task, rec.repetition, rec.seed, rec.attempt, e, "record cannot be written")
    return rec


def default_errors_path(output: str | Path) -> Path:
    p = Path(output)
    return p.with_name(p.stem + ".errors.jsonl")


@dataclass
class RunResult:
    tasks: int = 0  # tasks played (after `only`)
    load_errors: list[str] = field(default_factory=list)  # dataset entries that did not load
    planned: int = 0  # tasks x repeats
    already: int = 0  # recorded before this run
    changed: list[str] = field(default_factory=list)  # "uid #rep" recorded for an older version of the task: re-run
    written: int = 0  # scored records written now
    passed: int = 0  # of those written now
    attempts_failed: int = 0  # system-error attempts written to the errors file
    unresolved: list[tuple[str, int, str]] = field(default_factory=list)  # (uid, rep, cause) after the retries
    left_out: dict[str, str] = field(default_factory=dict)  # uid -> why it was not played (--skip-judged)
    interrupted: bool = False
    seconds: float = 0.0
    timings: Breakdown = field(default_factory=Breakdown)  # where the time went: every attempt played now

    @property
    def rate(self) -> float:
        return (self.written + self.attempts_failed) / self.seconds if self.seconds else 0.0

    def tally(self, repeat: int, output: str | Path) -> str:
        """The run's one-line tally, as every command that plays a run prints it."""
        rate = f"{self.passed / self.written:.1%}" if self.written else "-"
        return (f"{self.tasks} task(s) × {repeat} = {self.planned} episode(s): {self.already} already recorded, "
                f"{self.written} written now (pass {rate}), {self.attempts_failed} system-error attempt(s), "
                f"{len(self.unresolved)} unresolved, {self.seconds:.1f} s ({self.rate:.1f} episodes/s) → {output}")


def local_execute(setup: EpisodeSetup) -> Execute:
    async def execute(task: Task, repetition: int, seed: int, attempt: int) -> EpisodeRecord:
        return await run_episode(task, setup, repetition=repetition, seed=seed, attempt=attempt)

    return execute


def _crashed(task: Task, repetition: int, seed: int, attempt: int, e: BaseException,
             where: str = "runner") -> EpisodeRecord:
    cause = f"{where}: {type(e).__name__}: {str(e)[:500]}"
    return EpisodeRecord(uid=task.uid, repetition=repetition, seed=seed, attempt=attempt, scenario=task.scenario.name,
                         fingerprint=task.fingerprint(), end_reason="system_error", system_error=cause,
                         verdict={"passed": False, "reward": 0.0, "system_error": cause,
                                  "explanation": traceback.format_exc(limit=6), "lineno": None, "judge_calls": [],
                                  "diff": {}})


class _Progress:
    """A rich progress bar with rate, ETA and running pass rate (nothing when disabled)."""

    def __init__(self, enabled: bool, total: int, done: int):
        self.bar = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.bar = Progress(TextColumn("episodes"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]} ep/s"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), TextColumn("pass {task.fields[pass_rate]}"),
                            TextColumn("sys-err {task.fields[errors]}"), console=Console(stderr=True, emoji=False))
        self.task = self.bar.add_task("run", total=total, completed=done, rate="-", pass_rate="-", errors=0)
        self.t0 = time.perf_counter()
        self.bar.start()

    def update(self, r: RunResult, advance: int) -> None:
        if self.bar is None:
            return
        dt = time.perf_counter() - self.t0
        rate = f"{(r.written + r.attempts_failed) / dt:.1f}" if dt > 0 else "-"
        pr = f"{r.passed / r.written:.1%}" if r.written else "-"
        self.bar.update(self.task, advance=advance, rate=rate, pass_rate=pr, errors=r.attempts_failed)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


async def run_episodes(tasks: Sequence[Task], repeat: int, execute: Execute, *, output: str | Path,
                       errors_output: str | Path | None = None, concurrency: int = 8, retries: int = 2,
                       seed: int = 0, progress: bool = False, identity: Identity | None = None) -> RunResult:
    """Play every (task, repetition) not yet in `output` (module docstring); returns the tally.
    With `identity`, every record written carries its run block, and files holding records of
    another identity (or of none) are refused before any episode (`IdentityError`)."""
    if repeat < 1 or concurrency < 1 or retries < 0:
        raise ValueError("repeat and concurrency must be at least 1, retries at least 0")
    errors_output = Path(errors_output) if errors_output else default_errors_path(output)
    recorded = read_records(output, repair=True)
    failed_before = read_records(errors_output, repair=True)
    if identity is not None:
        check_file(output, recorded, identity)
        check_file(errors_output, failed_before, identity)
    current = {t.uid: t.fingerprint() for t in tasks}
    done: set[tuple[str, int]] = set()
    outdated: set[tuple[str, int]] = set()
    for r in recorded:
        if r.fingerprint and r.uid in current and r.fingerprint != current[r.uid]:
            outdated.add(r.key)
        else:
            done.add(r.key)
    tried = Counter(r.key for r in failed_before if not (r.fingerprint and r.uid in current
                                                          and r.fingerprint != current[r.uid]))
    result = RunResult(planned=len(tasks) * repeat)
    todo: asyncio.Queue[tuple[Task, int, int]] = asyncio.Queue()
    for task in tasks:
        for rep in range(repeat):
            if (task.uid, rep) in done:
                result.already += 1
            else:
                if (task.uid, rep) in outdated:
                    result.changed.append(f"{task.uid} #{rep}")
                todo.put_nowait((task, rep, tried[(task.uid, rep)]))
    left = todo.qsize()
    bar = _Progress(progress, result.planned, result.already)
    t0 = time.perf_counter()
    writer, errors = RecordWriter(output), RecordWriter(errors_output)

    async def worker() -> None:
        nonlocal left
        while left > 0:
            try:
                task, rep, first = todo.get_nowait()
            except asyncio.QueueEmpty:  # the last ones are in flight
                await asyncio.sleep(0.01)
                continue
            s = episode_seed(seed, task.uid, rep)

            async def play(attempt: int) -> EpisodeRecord:
                try:
                    rec = await execute(task, rep, s, attempt)
                    result.timings.add(rec.timings, rec.phase_counts())
                    return writable(rec, task)
                except Exception as e:  # an executor that broke (a dead worker): a system error like any other
                    return _crashed(task, rep, s, attempt, e)

            def failed(rec: EpisodeRecord) -> None:
                if identity is not None:
                    stamp(rec, identity)
                errors.write(rec)
                result.attempts_failed += 1
                bar.update(result, 0)

            rec = await play_with_retries(play, retries=retries, first_attempt=first, on_system_error=failed)
            left -= 1
            if rec.system_error is None:
                if identity is not None:
                    stamp(rec, identity)
                writer.write(rec)
                result.written += 1
                result.passed += rec.passed
            else:
                result.unresolved.append((task.uid, rep, rec.system_error))
            bar.update(result, 1)

    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, max(left, 1)))))
    except (asyncio.CancelledError, KeyboardInterrupt):
        result.interrupted = True
        raise
    finally:
        result.seconds = time.perf_counter() - t0
        bar.stop()
        writer.close()
        errors.close()
    return result


# ---------------------------------------------------------------------------- Ray

class EpisodeWorker:
    """A Ray actor body: builds the run's setup once from the `RunSpec` dict, then plays episodes
    (async: several in flight per actor)."""

    def __init__(self, spec: dict[str, Any]):
        run = RunSpec.from_dict(spec)
        self.dataset = load_run_dataset(run)
        self.setup = build_setup(run, self.dataset)

    async def run(self, uid: str, repetition: int, seed: int, attempt: int) -> dict[str, Any]:
        rec = await run_episode(self.dataset.tasks[uid], self.setup, repetition=repetition, seed=seed, attempt=attempt)
        return rec.to_dict()

    def pid(self) -> int:
        return os.getpid()


class RayExecute:
    """Episodes on Ray actors (`RAY_ADDRESS`, or a local cluster when unset): `workers` actors,
    `concurrency` episodes in flight over all of them."""

    def __init__(self, spec: Any, *, workers: int | None = None, concurrency: int = 8):
        # Under `uv run`, Ray would package the whole working directory (the virtualenv included)
        # for its workers; a local cluster runs them with this interpreter instead. (Read when ray
        # is first imported: a process that imported it before keeps its setting.)
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        import ray

        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = max(1, min(workers or cpus, concurrency))
        per = math.ceil(concurrency / n)
        actor = ray.remote(num_cpus=max(0.01, min(1.0, cpus / n)), max_concurrency=per)(EpisodeWorker)
        self.actors = [actor.remote(spec.to_dict()) for _ in range(n)]
        self._next = itertools.cycle(range(n))

    async def __call__(self, task: Task, repetition: int, seed: int, attempt: int) -> EpisodeRecord:
        d = await self.actors[next(self._next)].run.remote(task.uid, repetition, seed, attempt)
        return EpisodeRecord.from_dict(d)

    def worker_pids(self) -> list[int]:
        import ray

        return ray.get([a.pid.remote() for a in self.actors])

    def shutdown(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


# ---------------------------------------------------------------------------- the assembly

class NothingToRun(ValueError):
    """A run whose dataset (or test list, or `only`) leaves no task to play."""


def run_identity(spec: RunSpec, setup: EpisodeSetup, tasks: Sequence[Task], *, seed: int) -> Identity:
    """The identity of a run's records (trainer/formats/identity.py) over the dataset's `tasks`
    (as loaded, the test list applied), the defaults of its user and judge resolved as
    `build_setup` resolves them."""
    user, judge = role_names(spec.user, spec.judge, setup.judge_identity, synthetic_policy=setup.policy.synthetic)
    block = run_block(policy=spec.policy, user=user, judge=judge, seed=seed,
                      dataset=dataset_block(tasks, spec.dataset, spec.test_list))
    return of_setup(setup, block)


async def _preflight(setup: EpisodeSetup, tasks: list[Task], plan: RunPlan,
                     notify: Callable[[str], None] | None, left: dict[str, str]) -> list[Task]:
    """The tasks to play, once nothing found before the first episode stops the run (trainer/rollout/
    preflight.py: judge-needing tasks without a judge, endpoints that cannot serve): `PreflightError`."""
    play, left_out = refuse_judged(tasks, setup.judge_identity, skip=plan.skip_judged)
    left.update(dict.fromkeys(left_out, "asks a judge; the run has none (--skip-judged)"))
    if left_out and notify is not None:
        notify(f"{len(left_out)} task(s) that ask a judge left out (no judge): {', '.join(left_out)}")
    if plan.preflight:
        await check_endpoints(setup)
    return play


def run(spec: RunSpec, plan: RunPlan, *, notify: Callable[[str], None] | None = None) -> RunResult:
    """Play a run (module docstring): load, build, play (here or on Ray), resume, close.

    Raises what the inputs cause, before any episode: `DatasetError` (every dataset entry that did
    not load: task files, scenarios, test-list entries, each with its file and line; with
    `plan.skip_invalid` the rest runs and `notify` gets a line per error), `TaskFormatError`,
    `NothingToRun`, `SpecError` (a policy, user or judge spec), `KeyError` (an agent name),
    `PreflightError` (tasks that ask a judge in a run without one; an endpoint that cannot serve:
    each named), `RecordFileError` (an output that is not a records file), `IdentityError` (an output or
    errors file holding records of another run identity, or of none)."""
    ds = load_run_dataset(spec)
    if ds.errors and not plan.skip_invalid:
        raise DatasetError(list(ds.errors))
    load_errors = [str(e) for e in ds.errors]
    for line in load_errors:
        if notify is not None:
            notify(line)
    tasks = [t for t in ds.tasks.values() if not t.skip and (plan.only is None or t.uid in plan.only)]
    if not tasks and plan.only != frozenset():
        raise NothingToRun(f"{spec.test_list or spec.dataset}: no task to run"
                           + (f" ({len(ds.errors)} entr{'y' if len(ds.errors) == 1 else 'ies'} did not load)"
                              if ds.errors else ""))
    setup = build_setup(spec, ds)
    identity = run_identity(spec, setup, [t for t in ds.tasks.values() if not t.skip], seed=plan.seed)
    ray_exec = None
    try:
        if plan.use_ray or os.environ.get("RAY_ADDRESS"):
            ray_exec = RayExecute(spec, workers=plan.ray_workers, concurrency=plan.concurrency)
        execute = ray_exec or local_execute(setup)

        left_out: dict[str, str] = {}

        async def play_then_close() -> RunResult:  # one event loop: endpoint clients close in the loop they were made in
            try:
                return await run_episodes(await _preflight(setup, tasks, plan, notify, left_out), plan.repeat, execute,
                                          output=plan.output,
                                          errors_output=plan.errors_output, concurrency=plan.concurrency,
                                          retries=plan.retries, seed=plan.seed, progress=plan.progress,
                                          identity=identity)
            finally:
                await close_setup(setup)

        result = asyncio.run(play_then_close())
    finally:
        if ray_exec is not None:
            ray_exec.shutdown()
    result.tasks, result.load_errors, result.left_out = len(tasks), load_errors, left_out
    return result


__all__ = ["EpisodeWorker", "Execute", "RayExecute", "RunPlan", "RunResult", "default_errors_path", "episode_seed",
           "local_execute", "NothingToRun", "play_with_retries", "run", "run_episodes", "run_identity", "step_seed"]
