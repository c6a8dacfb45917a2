"""A synchronous training run killed mid-rollout, mid-update and mid-save resumes exactly.

configs/cpu_smoke.yaml (verl's trainer on CPU, online difficulty on, a checkpoint every step),
three steps, played twice from the same model, pool and seeds:

- **uninterrupted**: one launch;
- **killed**: a launch killed while step 2's episodes are being played, a relaunch killed during
  step 2's update (its sampling ended, nothing saved), a relaunch killed in the middle of step 2's
  save (every shard written, data.pt and the tracker not: the failpoint TBT_TEST_PAUSE_IN_SAVE
  holds the save there), and a last relaunch that finishes.

A kill ends every process of the launch's session at once (SIGKILL), as a node loss does: verl's
driver makes itself a process-group leader for Ray's reaper, so the launch's process group alone
would miss it and Ray's daemons.

The killed run must equal the uninterrupted one: the same groups picked for each step (online
difficulty's log), the same episodes in each step's records, once each, and each step's metrics
once, with the same scores; every checkpoint complete. What the killed attempts wrote is not
lost: it is in records/rolled_back/ and metrics.rolled_back.jsonl.

Fully-async (configs/cpu_smoke_async.yaml, 6 prompts, 3 updates of 2 groups): a launch killed
while step 2 trains (the rollouter playing the next prompts beside it), a relaunch killed in the
middle of step 2's save, a last relaunch that finishes. Its order of training is not reproducible
(the rollouter and the trainer race), so no straight run: each relaunch must restore the prompts
in flight at step 1's save, and the records must hold every drawn prompt's group once, whole, the
same task under the same id as the killed attempts played it; each update logged once.

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_resume_on_cpu.py     (~17 min on 2 cores)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from test_start_ray import end_session, session_pids
from trainer.verl import checkpoint as ck

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.engine, pytest.mark.timeout(3000)]
ENV = {k: v for k, v in os.environ.items()
       if not k.startswith(("TBT_", "GPUS_PER_NODE", "NODE_GPUS", "NNODES", "CKPT_DIR", "CONFIG", "MODEL_PATH",
                            "RAY_ADDRESS", "SMOKE_"))}
STEPS = 3


def launch(work: Path, smoke: Path, log: str, kill_when: Callable[[Path], str | None] | None = None,
           config: str = "configs/cpu_smoke.yaml", args: tuple[str, ...] = (f"trainer.total_training_steps={STEPS}",),
           **env: str) -> tuple[int | str, str]:
    """One launch of a CPU smoke into work/checkpoints; `kill_when(ckpt)` is polled every 50 ms and
    the launch's whole session is killed once it names what it saw. Returns (exit code, or what the
    kill saw; the log)."""
    ckpt = work / "checkpoints"
    full = {**ENV, "CONFIG": config, "SMOKE_DIR": str(smoke), "CKPT_DIR": str(ckpt), **env}
    with open(work / log, "w") as f:
        proc = subprocess.Popen(["./scripts/run_train.sh", *args], cwd=ROOT,
                                env=full, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 1500
        outcome: int | str | None = None
        while outcome is None and time.monotonic() < deadline:
            if proc.poll() is not None:
                outcome = proc.returncode
            elif kill_when is not None and (seen := kill_when(ckpt)):
                kill_session(proc.pid)
                proc.wait(timeout=60)
                outcome = seen
            else:
                time.sleep(0.05)
        if outcome is None:
            end_session(proc.pid)
            outcome = "timed out"
    return outcome, (work / log).read_text()


def kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` at once, as a node loss ends them; none may be left."""
    import signal

    deadline = time.monotonic() + 30
    while (pids := session_pids(sid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    assert not session_pids(sid), f"processes left after the kill: {session_pids(sid)}"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def tracker(ckpt: Path) -> str:
    f = ckpt / ck.TRACKER
    return f.read_text().strip() if f.exists() else ""


def groups_log(ckpt: Path) -> list[dict]:
    return lines(ckpt / "thinkingbox_difficulty" / "groups.jsonl")


def mid_rollout(ckpt: Path) -> str | None:
    """Step 1 saved, step 2's episodes being played (some recorded), its sampling not ended."""
    step2 = lines(ckpt / "records" / "step_2.jsonl")
    ended = any(r.get("end_step") == 2 for r in groups_log(ckpt))
    if tracker(ckpt) == "1" and step2 and not ended:
        return f"mid-rollout: {len(step2)} episode(s) of step 2 recorded"
    return None


def mid_update(ckpt: Path) -> str | None:
    """Step 2's sampling ended, nothing of step 2 saved yet: its update is running."""
    if tracker(ckpt) == "1" and any(r.get("end_step") == 2 for r in groups_log(ckpt)) \
            and not (ckpt / "global_step_2").exists():
        return "mid-update"
    return None


def mid_save(ckpt: Path) -> str | None:
    """Step 2's shards written, its data.pt and the tracker not (the failpoint holds the save)."""
    actor = ckpt / "global_step_2" / "actor"
    if tracker(ckpt) == "1" and (actor / "fsdp_config.json").exists() and not (ckpt / "global_step_2" / "data.pt").exists():
        return "mid-save"
    return None


def episodes(ckpt: Path, step: int) -> list[tuple]:
    """A step's episodes as the comparison reads them: what was played and how it was scored."""
    return sorted((r["uid"], r["repetition"], r["seed"], tuple(r["tokens"]["response_ids"]), json.dumps(r["verdict"],
                   sort_keys=True)) for r in lines(ckpt / "records" / f"step_{step}.jsonl"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    if os.environ.get("TBT_CPU_SMOKE") != "1":
        pytest.skip("the killed and resumed training runs only with TBT_CPU_SMOKE=1 (~8.5 min on 2 cores)")
    root = tmp_path_factory.mktemp("resume")
    smoke, straight, killed = root / "smoke", root / "straight", root / "killed"
    straight.mkdir()
    killed.mkdir()
    out: dict = {"straight": straight / "checkpoints", "killed": killed / "checkpoints"}
    rc, log = launch(straight, smoke, "straight.log")
    assert rc == 0, log[-6000:]
    out["kills"] = []
    for name, when, env in (("rollout", mid_rollout, {}), ("update", mid_update, {}),
                            ("save", mid_save, {"TBT_TEST_PAUSE_IN_SAVE": "120"})):
        seen, log = launch(killed, smoke, f"killed-{name}.log", when, **env)
        assert isinstance(seen, str) and seen.startswith(f"mid-{name}"), (seen, log[-6000:])
        out["kills"].append(seen)
        out[f"log_{name}"] = log
    rc, log = launch(killed, smoke, "finish.log")
    assert rc == 0, log[-6000:]
    out["finish"] = log
    return out


def test_each_kill_landed_where_it_was_aimed(runs):
    rollout, update, save = runs["kills"]
    assert rollout.startswith("mid-rollout") and update == "mid-update" and save == "mid-save"
    # the relaunch after each kill resumed from step 1 and said what it moved aside
    assert "# resume from step 1: records of a rolled-back attempt moved to" in runs["log_update"]
    assert "# resume from step 1: " in runs["finish"] and "metrics lines of steps 2 moved to" in runs["finish"]


def test_the_killed_run_picked_the_same_groups_for_every_step(runs):
    def picked(ckpt):  # (verl names each group by a fresh uuid: the tasks are what was picked; the log
        # lists a step's groups in the order they finished, which the agent loop's threads decide)
        return sorted((r["step"], r["task"]) for r in groups_log(ckpt) if "task" in r)

    assert picked(runs["killed"]) == picked(runs["straight"]) and picked(runs["straight"])


def test_every_step_is_recorded_once_with_the_same_episodes(runs):
    for step in range(1, STEPS + 1):
        straight, killed = episodes(runs["straight"], step), episodes(runs["killed"], step)
        assert straight and killed == straight, step
        assert len({e[:3] for e in killed}) == len(killed)  # no episode twice
    aside = list((runs["killed"] / "records" / "rolled_back").glob("*/step_2.jsonl"))
    assert len(aside) >= 2  # the killed attempts' episodes: kept, not counted


def test_every_step_is_logged_once_with_the_same_scores(runs):
    key = "training/episode/score/mean"
    straight, killed = lines(runs["straight"] / "metrics.jsonl"), lines(runs["killed"] / "metrics.jsonl")
    assert [r["step"] for r in killed] == [r["step"] for r in straight] == list(range(1, STEPS + 1))
    assert [r["data"][key] for r in killed] == [r["data"][key] for r in straight]
    # the same updates: the shaped reward the advantages came from, and each update's gradient norm
    # (equal but for the last digits of CPU float reductions: 1e-6 relative was seen at step 3)
    for a, b in zip(killed, straight):
        assert a["data"]["critic/score/mean"] == pytest.approx(b["data"]["critic/score/mean"], rel=1e-6)
        assert a["data"]["actor/grad_norm"] == pytest.approx(b["data"]["actor/grad_norm"], rel=1e-4)
    assert [r["step"] for r in lines(runs["killed"] / "metrics.rolled_back.jsonl")] == [2]  # the mid-save attempt's


def test_every_checkpoint_is_complete_and_the_tracker_names_the_last(runs):
    report = ck.verify(runs["killed"])
    assert report.ok and [s.step for s in report.steps] == list(range(1, STEPS + 1)), ck.report_text(report)
    assert tracker(runs["killed"]) == str(STEPS)


# ---- fully-async: configs/cpu_smoke_async.yaml, 3 updates of 2 groups, a checkpoint every update ----

ASYNC = "configs/cpu_smoke_async.yaml"
PROMPTS, GROUP = 6, 8  # rollout.total_rollout_steps (3 updates x 2 groups), rollout.n


def log_count(path: Path, text: str) -> Callable[[], int]:
    """How many times `text` has appeared in the growing log `path` (read on from where it stopped)."""
    state = {"offset": 0, "count": 0, "tail": b""}

    def count() -> int:
        if path.exists():
            with open(path, "rb") as f:
                f.seek(state["offset"])
                chunk = state["tail"] + f.read()
                state["offset"] = f.tell()
            state["count"] += chunk.count(text.encode())
            state["tail"] = chunk[-len(text) + 1:]  # a match cut at the chunk's end is counted next time
        return state["count"]

    return count


def async_mid_update(log: Path) -> Callable[[Path], str | None]:
    """Step 1 saved (its in-flight prompts with it), step 2's batch collected and being trained on,
    nothing of step 2 saved; the rollouter meanwhile plays the next prompts on version 1."""
    collected = log_count(log, "[FullyAsyncTrainer] Loop collection completed")

    def seen(ckpt: Path) -> str | None:
        if tracker(ckpt) == "1" and collected() >= 2 and not (ckpt / "global_step_2").exists():
            later = {r["run"]["group"] for p in (ckpt / "records").glob("step_*.jsonl") for r in lines(p)}
            return f"mid-update: step 2 training, {len(later)} group(s) recorded so far"
        return None

    return seen


def final_records(ckpt: Path) -> list[dict]:
    return [r for p in sorted((ckpt / "records").glob("step_*.jsonl")) if ".errors" not in p.name for r in lines(p)]


@pytest.fixture(scope="module")
def async_runs(tmp_path_factory) -> dict:
    if os.environ.get("TBT_CPU_SMOKE") != "1":
        pytest.skip("the killed and resumed fully-async run only with TBT_CPU_SMOKE=1 (~9 min on 2 cores)")
    root = tmp_path_factory.mktemp("resume_async")
    work, smoke = root / "killed", root / "smoke"
    work.mkdir()
    args = (f"rollout.total_rollout_steps={PROMPTS}",)
    out: dict = {"ckpt": work / "checkpoints", "kills": [], "logs": {}}
    for name, when, env in (("update", async_mid_update(work / "killed-update.log"), {}),
                            ("save", mid_save, {"TBT_TEST_PAUSE_IN_SAVE": "120"})):
        seen, log = launch(work, smoke, f"killed-{name}.log", when, config=ASYNC, args=args, **env)
        assert isinstance(seen, str) and seen.startswith(f"mid-{name}"), (seen, log[-6000:])
        out["kills"].append(seen)
        out["logs"][name] = log
    rc, log = launch(work, smoke, "finish.log", config=ASYNC, args=args)
    assert rc == 0, log[-6000:]
    out["logs"]["finish"] = log
    return out


def test_async_each_kill_landed_and_each_relaunch_fed_the_prompts_in_flight_first(async_runs):
    update, save = async_runs["kills"]
    assert update.startswith("mid-update") and save == "mid-save"
    # both relaunches resumed from step 1, whose save had the prompts drawn and not trained (3-6)
    import re

    for name in ("save", "finish"):
        restored = re.findall(r"Restored (\d+) prompts in flight at the save \(([^)]*)\)", async_runs["logs"][name])
        assert restored and int(restored[0][0]) == PROMPTS - 2, async_runs["logs"][name][-4000:]
        assert "# resume from step 1: " in async_runs["logs"][name]


def test_async_every_prompt_is_trained_once_under_its_own_id(async_runs):
    ckpt = async_runs["ckpt"]
    recs = final_records(ckpt)
    groups: dict[str, list[dict]] = {}
    for r in recs:
        groups.setdefault(r["run"]["group"], []).append(r)
    # every drawn prompt's group is recorded once, whole: none skipped, none played twice
    assert sorted(int(g.rsplit("_", 1)[1]) for g in groups) == list(range(1, PROMPTS + 1)), sorted(groups)
    for g, members in groups.items():
        assert sorted(r["repetition"] for r in members) == list(range(GROUP)), g
        assert len({r["uid"] for r in members}) == 1, g  # a group is one task
    # a prompt played again after a resume is the same prompt under the same id: the killed attempts'
    # episodes of a group (moved aside) are of the same task as the kept ones
    aside = [r for p in (ckpt / "records" / "rolled_back").glob("*/step_*.jsonl") if ".errors" not in p.name
             for r in lines(p)]
    assert aside
    for r in aside:
        assert r["uid"] == groups[r["run"]["group"]][0]["uid"], r["run"]["group"]


def test_async_every_update_is_logged_once_and_every_checkpoint_is_complete(async_runs):
    ckpt = async_runs["ckpt"]
    rows = lines(ckpt / "metrics.jsonl")
    trained = [r for r in rows if "actor/pg_loss" in r["data"]]
    # one line of each version's own update (its trainer step the version's), and one of its sync,
    # none twice (the killed attempts' are in metrics.rolled_back.jsonl)
    assert [r["step"] for r in trained] == [1, 2, 3]
    assert [r["data"]["training/global_step"] for r in trained] == [1, 2, 3]
    assert sorted(r["step"] for r in rows if "actor/pg_loss" not in r["data"]) == [0, 1, 2, 3]
    assert lines(ckpt / "metrics.rolled_back.jsonl")
    report = ck.verify(ckpt)
    assert report.ok and [s.step for s in report.steps] == [1, 2, 3], ck.report_text(report)
    assert tracker(ckpt) == "3"
