"""The runner: records appended as episodes finish, resume without duplicates or losses, system
errors re-run, a run killed at random points, and the same run on a local Ray cluster.

Real components throughout: the sample dataset, the in-process domains, the synthetic policy (its
turns go through tb_interpret), the scripted user, the real records file; the kill test runs the
real `tbt run` in a subprocess and SIGKILLs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.formats.record import EpisodeRecord, RecordFileError, RecordWriter, read_records
from trainer.rollout.runner import default_errors_path, local_execute, run_episodes
from trainer.rollout.setup import RunSpec, build_setup, load_run_dataset

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY_LIST = SAMPLES / "lists" / "toy.yaml"


@pytest.fixture(scope="module")
def toy():
    spec = RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.6", test_list=str(TOY_LIST))
    ds = load_run_dataset(spec)
    return spec, ds, build_setup(spec, ds)


def run(ds, setup, out, repeat=3, **kw):
    return asyncio.run(run_episodes(list(ds.tasks.values()), repeat, kw.pop("execute", local_execute(setup)),
                                    output=out, **kw))


def said(messages):
    """What the agent and the user said (tool results carry the domains' wall-clock stamps)."""
    return [m for m in messages if m["role"] != "tool"]


def keys(path):
    return [r.key for r in read_records(path)]


def test_run_records_every_episode_once_and_rerun_adds_nothing(toy, tmp_path):
    spec, ds, setup = toy
    out = tmp_path / "r.jsonl"
    res = run(ds, setup, out, concurrency=4)
    n = len(ds.tasks) * 3
    assert (res.planned, res.written, res.already, res.unresolved) == (n, n, 0, [])
    recs = read_records(out)
    assert sorted(r.key for r in recs) == sorted((uid, rep) for uid in ds.tasks for rep in range(3))
    assert all(r.synthetic and r.policy["kind"] == "synthetic" and r.user["kind"] == "scripted" for r in recs)
    assert res.passed == sum(r.passed for r in recs)
    before = out.read_bytes()
    again = run(ds, setup, out, concurrency=4)
    assert (again.written, again.already) == (0, n) and out.read_bytes() == before


def test_deleted_lines_are_restored_exactly_and_replayed_the_same(toy, tmp_path):
    spec, ds, setup = toy
    out = tmp_path / "r.jsonl"
    run(ds, setup, out)
    lines = out.read_text().splitlines()
    drop = {1, 4, 9}
    gone = {(d["uid"], d["repetition"]): d for d in (json.loads(lines[i]) for i in drop)}
    out.write_text("".join(line + "\n" for i, line in enumerate(lines) if i not in drop))
    res = run(ds, setup, out)
    assert res.written == len(drop) and res.already == len(lines) - len(drop)
    recs = read_records(out)
    assert len(recs) == len(lines) and len(set(r.key for r in recs)) == len(lines)
    for r in recs[-len(drop):]:  # the same seed: the same episode, message for message
        assert r.key in gone and said(r.messages) == said(gone[r.key]["messages"])
        assert r.verdict["passed"] == gone[r.key]["verdict"]["passed"]


def test_a_torn_last_line_is_cut_off_and_its_episode_rerun(toy, tmp_path):
    spec, ds, setup = toy
    out = tmp_path / "r.jsonl"
    run(ds, setup, out, repeat=1)
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 40])  # a crash in the middle of the last write
    assert len(read_records(out)) == len(ds.tasks) - 1
    res = run(ds, setup, out, repeat=1)
    assert res.written == 1 and len(keys(out)) == len(set(keys(out))) == len(ds.tasks)
    assert out.read_bytes().endswith(b"\n")


def test_a_line_that_is_not_a_record_is_an_error_naming_the_line(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"version": 1, "uid": "a", "repetition": 0, "seed": 0}\nnot json\n')
    with pytest.raises(RecordFileError, match=r"r\.jsonl:2"):
        read_records(out)
    out.write_text('{"version": 99, "uid": "a", "repetition": 0, "seed": 0}\n')
    with pytest.raises(RecordFileError, match="version 99"):
        read_records(out)


def test_system_errors_go_to_the_errors_file_and_are_rerun(toy, tmp_path):
    """An attempt that hits a system error is written to the errors file, never to the records,
    and re-run (same seed, next attempt number); past the retry limit it is reported, and the
    next run tries it again from where the attempts stopped."""
    spec, ds, setup = toy
    inner = local_execute(setup)
    flaky = sorted(ds.tasks)[0]
    always = sorted(ds.tasks)[1]

    async def execute(task, rep, seed, attempt):
        rec = await inner(task, rep, seed, attempt)
        if (task.uid == flaky and attempt == 0) or task.uid == always:
            rec.system_error = rec.verdict["system_error"] = "policy endpoint: HTTP 503 (injected)"
            rec.end_reason = "system_error"
        return rec

    out = tmp_path / "r.jsonl"
    res = run(ds, setup, out, repeat=2, execute=execute, retries=2)
    errs = read_records(default_errors_path(out))
    assert sorted((r.uid, r.attempt) for r in errs if r.uid == flaky) == [(flaky, 0), (flaky, 0)]
    assert sorted(r.attempt for r in errs if r.uid == always) == [0, 0, 1, 1, 2, 2]
    assert sorted(res.unresolved) == [(always, 0, "policy endpoint: HTTP 503 (injected)"),
                                      (always, 1, "policy endpoint: HTTP 503 (injected)")]
    recs = read_records(out)
    assert all(r.system_error is None for r in recs) and {r.uid for r in recs} == set(ds.tasks) - {always}
    assert {r.attempt for r in recs if r.uid == flaky} == {1}
    res2 = run(ds, setup, out, repeat=2, retries=0)  # the endpoint is back: the rerun retries it
    assert res2.written == 2 and res2.unresolved == []
    assert {r.attempt for r in read_records(out) if r.uid == always} == {3}
    assert len(keys(out)) == len(set(keys(out))) == len(ds.tasks) * 2


def test_an_executor_that_raises_is_a_system_error_not_a_crash(toy, tmp_path):
    spec, ds, setup = toy

    async def broken(task, rep, seed, attempt):
        raise ConnectionError("worker died")

    res = run(ds, setup, tmp_path / "r.jsonl", repeat=1, execute=broken, retries=1)
    assert len(res.unresolved) == len(ds.tasks) and "worker died" in res.unresolved[0][2]
    assert not (tmp_path / "r.jsonl").read_text()
    assert len(read_records(tmp_path / "r.errors.jsonl")) == 2 * len(ds.tasks)


def test_writer_appends_whole_lines(tmp_path):
    p = tmp_path / "w.jsonl"
    with RecordWriter(p) as w:
        w.write(EpisodeRecord(uid="a:b", repetition=0, seed=1))
    with RecordWriter(p) as w:
        w.write(EpisodeRecord(uid="a:b", repetition=1, seed=2))
    assert [r.key for r in read_records(p)] == [("a:b", 0), ("a:b", 1)]


def test_a_run_killed_at_random_points_ends_with_every_record_exactly_once(tmp_path):
    """`tbt run` SIGKILLed several times mid-run, then rerun to the end: exactly tasks × repeats
    records, no duplicate, none lost, no torn line."""
    out = tmp_path / "k.jsonl"
    cmd = [sys.executable, "-m", "trainer.cli", "run", str(SAMPLES), "--policy", "synthetic", "--repeat", "1",
           "--concurrency", "6", "--output", str(out), "--no-progress"]
    rng = random.Random(7)
    total = 141
    for _ in range(4):  # four kills, each 5-30 records further on (at most 120 of the 141 before the rerun)
        before = len(out.read_text().splitlines()) if out.exists() else 0
        want = before + rng.randint(5, 30)
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= want:
                break
            time.sleep(0.005)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    partial = read_records(out, repair=False)
    assert 0 < len(partial) < total and len({r.key for r in partial}) == len(partial)
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    recs = [EpisodeRecord.from_dict(json.loads(line)) for line in lines]  # every line whole
    assert len(recs) == total and len({x.key for x in recs}) == total


@pytest.mark.engine
def test_the_same_run_on_a_local_ray_cluster(toy, tmp_path):
    """Ray actors build the setup from the RunSpec and play the episodes; the driver writes the
    same records (same seeds: the same messages and verdicts) and resumes the same way."""
    ray = pytest.importorskip("ray")
    from trainer.rollout.runner import RayExecute

    spec, ds, setup = toy
    local = tmp_path / "local.jsonl"
    run(ds, setup, local, repeat=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ex = RayExecute(spec, concurrency=4)
        assert len(set(ex.worker_pids())) == 2 and os.getpid() not in ex.worker_pids()
        out = tmp_path / "ray.jsonl"
        res = run(ds, setup, out, repeat=2, execute=ex, concurrency=4)
        assert res.written == len(ds.tasks) * 2
        lines = out.read_text().splitlines()
        out.write_text("".join(x + "\n" for x in lines[2:]))
        res = run(ds, setup, out, repeat=2, execute=ex, concurrency=4)
        assert res.written == 2 and res.already == len(lines) - 2
        ex.shutdown()
    finally:
        ray.shutdown()
    by_key = {r.key: r for r in read_records(local)}
    recs = read_records(out)
    assert len(recs) == len(lines) and len({r.key for r in recs}) == len(recs)
    for r in recs:
        assert said(r.messages) == said(by_key[r.key].messages)
        assert r.verdict["passed"] == by_key[r.key].verdict["passed"]
