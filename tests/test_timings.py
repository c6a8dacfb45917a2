"""Where the time goes (issue 28.4): every episode record carries per-phase timings (the session
start split as the sandbox measures it, tool calls, effects, test, teardown; policy, user and judge
latency with their counts), and `tbt run`, `tbt eval` and `tbt validate-golden` end with the
breakdown table (`tbt run` also with `tbt eval`'s per-domain table).

Real components: the sample dataset with the synthetic policy through `runner.run` and the real
CLI, a judge behind a real local endpoint that takes 50 ms an answer, one that cannot be reached,
golden replays on stdio servers (spawned) and forked ones; old records written without the new
fields read and aggregated.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainer.cli import app
from trainer.core.timings import KEYS, OPEN_PARTS, Breakdown
from trainer.env.golden import validate_golden
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.formats.record import EpisodeRecord, read_records, timing_breakdown
from trainer.rollout.runner import RunPlan, run
from trainer.rollout.setup import RunSpec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"
SANDBOX = ROOT / "tests" / "fixtures" / "datasets" / "sandbox"
PHASES = ("open", "agent", "user", "tools", "effects", "grade", "close")  # disjoint parts of total
EPS = 1e-6


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def check_timings(t: dict[str, float]) -> None:
    """Every phase there and >= 0; the phases within the wall time; the parts within their phase."""
    assert set(KEYS) <= set(t), sorted(set(KEYS) - set(t))
    assert all(v >= 0 for v in t.values()), t
    assert sum(t[p] for p in PHASES) <= t["total"] + EPS, t
    assert sum(t[f"open_{p}"] for p in OPEN_PARTS) <= t["open"] + EPS, t
    assert t["judge"] + t["grade_wait"] <= t["grade"] + EPS, t


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("timings") / "toy.jsonl"
    res = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=0.6", test_list=str(TOY)),
              RunPlan(output=out, repeat=3, concurrency=4))
    assert res.written == 15
    return res, read_records(out)


def test_every_record_carries_timings_that_sum_within_its_wall_time(toy_run):
    res, recs = toy_run
    for r in recs:
        t = r.timings
        check_timings(t)
        assert t["total"] > 0 and t["open"] > 0 and t["grade"] > 0 and t["agent"] > 0
        assert t["open_in_process"] > 0 and t["open_init"] > 0  # the toy domain: in-process, one init
        assert t["open_spawn"] == t["open_fork"] == t["open_remote"] == 0
        calls = [c for c in r.tool_calls if "seconds" in c]
        assert sum(c["seconds"] for c in calls) <= t["tools"] + 1e-5
        assert r.phase_counts() == {"agent": r.usage["agent"]["calls"], "user": r.usage["user"]["calls"],
                                    "judge": r.usage["judge"]["calls"], "tools": len(calls)}
    # the run's breakdown is every attempt it played: the same sums as the records'
    b = timing_breakdown(recs).to_json()
    got = res.timings.to_json()
    assert got["episodes"] == 15 and got["counts"] == b["counts"]
    assert got["seconds"] == pytest.approx(b["seconds"], abs=1e-6)
    rows = {row["key"]: row for row in got["rows"]}
    assert rows["total"]["share"] == 1.0 and rows["total"]["seconds"] == pytest.approx(sum(r.timings["total"] for r in recs))
    main = ("open", "agent", "user", "tools", "effects", "test", "judge", "grade_wait", "close", "framework")
    assert sum(rows[k]["seconds"] for k in main if k in rows) == pytest.approx(rows["total"]["seconds"], rel=1e-6)
    parts = [row for row in got["rows"] if row["part"]]
    assert sum(p["seconds"] for p in parts) == pytest.approx(rows["open"]["seconds"], rel=1e-6)
    assert rows["agent"]["calls"] == sum(r.usage["agent"]["calls"] for r in recs) > 0
    assert rows["agent"]["per_episode"] == pytest.approx(rows["agent"]["seconds"] / 15)


def test_judge_latency_is_timed_and_counted(endpoints, tmp_path):
    def answer(path, body):
        time.sleep(0.05)
        return 200, {"choices": [{"message": {"role": "assistant", "content": "Yes"}}]}

    judge = endpoints(answer)
    ds = load_dataset(SAMPLES)
    asking = sorted(u for u, t in ds.tasks.items() if "judge" in t.tags)[:2]
    res = run(RunSpec(dataset=str(SAMPLES), policy="synthetic:p=1", judge=f"openai:{judge.url}#judge"),
              RunPlan(output=tmp_path / "j.jsonl", only=frozenset(asking)))
    assert res.written == 2
    for r in read_records(tmp_path / "j.jsonl"):
        check_timings(r.timings)
        asked = r.usage["judge"]["calls"]
        assert asked >= 1 and r.timings["judge"] >= 0.05 * asked  # each question waited on the endpoint
    rows = {row["key"]: row for row in res.timings.to_json()["rows"]}
    assert rows["judge"]["calls"] >= 2 and rows["judge"]["per_call"] >= 0.05


def test_a_system_error_still_has_sane_timings(tmp_path):
    ds = load_dataset(SAMPLES)
    asking = sorted(u for u, t in ds.tasks.items() if "judge" in t.tags)[:1]
    res = run(RunSpec(dataset=str(SAMPLES), policy="synthetic", judge="openai:http://127.0.0.1:9/v1#j,retries=0,timeout=2"),
              RunPlan(output=tmp_path / "e.jsonl", retries=1, only=frozenset(asking), preflight=False))
    failed = read_records(tmp_path / "e.errors.jsonl")
    assert len(failed) == 2 and res.timings.episodes == 2  # both attempts are in the run's breakdown
    for r in failed:
        assert r.system_error and r.system_error.startswith("grading:")
        check_timings(r.timings)
        assert r.timings["open"] > 0 and r.timings["grade"] > 0


def test_tbt_run_ends_with_the_per_domain_table_and_the_breakdown(tmp_path):
    res = cli("run", SAMPLES, "--test-list", TOY, "--policy", "synthetic", "-n", "2", "-o", tmp_path / "r.jsonl",
              "--no-progress")
    assert res.exit_code == 0, res.output
    out = res.output
    # the per-domain line tbt eval prints (trainer/eval/summary.py domain_lines), over the records
    assert "per domain (" in out and "toy" in out and "5 task(s)  pass@1" in out and "observed 2/2" in out
    tail = out[out.index("Where the time goes: 10 episode(s)"):]
    for label in ("session start", "in-process servers", "init (__reserved__init)", "policy (model calls)",
                  "simulated user", "tool calls", "effects", "test (grading, judge aside)", "teardown",
                  "framework", "wall time (summed)", "per episode", "share"):
        assert label in tail, label
    assert "100.0%" in tail
    # a resumed run that plays nothing prints the domains, and no breakdown of nothing
    again = cli("run", SAMPLES, "--test-list", TOY, "--policy", "synthetic", "-n", "2", "-o", tmp_path / "r.jsonl",
                "--no-progress")
    assert again.exit_code == 0 and "10 already recorded" in again.output and "per domain (" in again.output
    assert "Where the time goes" not in again.output


def test_tbt_eval_prints_the_breakdown_at_the_end(tmp_path):
    res = cli("eval", SAMPLES, "--test-list", TOY, "--policy", "synthetic", "-n", "2", "-o", tmp_path / "e.jsonl",
              "--aggregate-output", tmp_path / "e.agg.json", "--no-progress")
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.index("pass@1") < out.index("Where the time goes: 10 episode(s)") and "wall time (summed)" in out


def test_validate_golden_times_its_replays(tmp_path):
    ds = load_dataset(SANDBOX, strict=False)
    for servers, part in (("servers_stdio.yaml", "open_spawn"), ("servers_fork.yaml", "open_fork")):
        registry = ServerRegistry.from_yaml(SANDBOX / servers)
        try:
            s = asyncio.run(validate_golden(list(ds.tasks.values()), registry))
        finally:
            registry.close()
        t = s["timings"]
        assert t["episodes"] == len(ds.tasks) and s["passed"] == len(ds.tasks)
        assert t["seconds"][part] > 0 and t["seconds"]["open_in_process"] == 0
        assert sum(t["seconds"][p] for p in PHASES) <= t["seconds"]["total"] + EPS
        assert t["counts"]["tools"] == sum(len(task.golden_paths()[0]) for task in ds.tasks.values())
        assert t["run_seconds"] <= t["seconds"]["total"]  # replays overlap (concurrency 4)
        json.dumps(s)  # --json holds it
    res = cli("validate-golden", SAMPLES, "--test-list", TOY)
    assert res.exit_code == 0 and "Where the time goes: 5 replay(s)" in res.output and "per replay" in res.output


def test_records_without_timings_still_read_and_aggregate(toy_run, tmp_path):
    _, recs = toy_run
    lines = [json.loads(r.to_json()) for r in recs]
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:
        for i, d in enumerate(lines):
            if i % 3 == 0:
                del d["timings"]  # a record from before timings
            elif i % 3 == 1:  # the first timings: no session-start split, no judge
                d["timings"] = {k: v for k, v in d["timings"].items()
                                if not k.startswith("open_") and k not in ("judge", "grade_wait")}
            f.write(json.dumps(d) + "\n")
    back = read_records(old)
    assert [r.key for r in back] == [r.key for r in recs]
    assert back[0].timings == {} and back[0].phase_counts()["agent"] == recs[0].usage["agent"]["calls"]
    b = timing_breakdown(back)
    assert (b.episodes, b.untimed) == (10, 5)
    rows = {row.key: row for row in b.rows()}
    unsplit = sum(r.timings["open"] for r in back[1::3])  # the older timings' open: not split
    split = sum(r.timings["open"] - sum(r.timings[f"open_{p}"] for p in OPEN_PARTS) for r in back[2::3])
    assert rows["open_rest"].seconds == pytest.approx(unsplit + split)
    assert rows["framework"].seconds >= 0 and rows["total"].share == 1.0
    only_old = Breakdown.of((d, None) for d in [{}, {"open": 1.0}])  # no total: not a timing
    assert only_old.untimed == 2 and only_old.rows()[-1].share is None
    # and the records still aggregate, and show
    res = cli("aggregate", old, "--dataset", SAMPLES, "--test-list", TOY, "-n", "3", "-o", tmp_path / "old.agg.json")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "old.agg.json").read_text())["overall"]["attempts"] == 15
    assert cli("show", old).exit_code == 0
    assert EpisodeRecord.from_dict({k: v for k, v in lines[0].items()}).timings == {}
