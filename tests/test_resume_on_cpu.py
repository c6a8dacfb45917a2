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

Fully-async (configs/cpu_smoke_async.yaml: the CPU smoke's model, pool and reward under
verl.experimental.fully_async_policy.fully_async_main, one rollout slot and one trainer slot,
weights through trainer/verl/cpu/checkpoint_engine.py; here 6 prompts, 3 updates of 2 groups of 8):
a launch killed while step 2 trains (the rollouter playing the next prompts beside it), a relaunch
killed in the middle of step 2's save, a last relaunch that finishes. Its order of training is not
reproducible (the rollouter and the trainer race), so no straight run: each relaunch must restore
the prompts in flight at step 1's save, and the records must hold every drawn prompt's group once,
whole, the same task under the same id as the killed attempts played it; each update logged once.
The same run, as it ends, is also what a straight fully-async run must show (the `test_async_*`
tests after the resume ones): every update trained and checkpointed; every kept episode played by
the served weights through the loop and graded; the trained samples' weight versions and the
staleness bound; the rollouts corrected against the trainer's log-probs.

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_resume_on_cpu.py     (~17 min on 2 cores)
    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_resume_on_cpu.py -k async   (the fully-async run alone)

`TBT_CPU_ASYNC_RUN=DIR` re-checks a finished fully-async run in DIR instead of playing it
(DIR/checkpoints, DIR/kills.txt, and the launches' logs DIR/killed-update.log, killed-save.log,
finish.log: the directory the fixture played it in, kept with `--basetemp`):

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_resume_on_cpu.py -k async --basetemp=B   # B/cpu_smoke0
    TBT_CPU_ASYNC_RUN=B/cpu_smoke0 uv run pytest -m engine tests/test_resume_on_cpu.py -k async
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
from test_train_on_cpu import actor_state, check_agreement_table, check_engine_follows_the_actor, metrics, smoke_work
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
    out: dict = {"straight": straight / "checkpoints", "killed": killed / "checkpoints", "smoke": smoke,
                 "probe": straight / "probe.jsonl"}
    rc, log = launch(straight, smoke, "straight.log", TBT_CPU_PROBE_FILE=str(straight / "probe.jsonl"))
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


def test_after_each_sync_the_engine_scores_a_fixed_prompt_as_the_saved_actor(runs):
    """The uninterrupted full-parameter run: after step N's sync the engine's log-probs of the probe
    equal step N's saved actor's (1e-4), and the weights moved between the syncs; every step's
    agreement table (by turn and token kind, patch 0020) holds hf_cpu's float32 to the actor's."""
    by_step = check_engine_follows_the_actor(runs["probe"], runs["smoke"] / "model", runs["straight"], range(1, STEPS + 1))
    assert len({tuple(by_step[s]) for s in range(STEPS + 1)}) == STEPS + 1
    # configs/cpu_smoke.yaml's 64-token window holds one turn (the vLLM smokes' holds several)
    check_agreement_table(metrics(runs["straight"] / "metrics.jsonl"), range(1, STEPS + 1), max_tol=1e-4, mean_tol=1e-5,
                          later_turns=False)


def test_the_killed_run_ends_with_the_straight_runs_weights(runs):
    """Killed three times and resumed, the run trains to the uninterrupted one's weights: every
    tensor of the last step's saved actor within 1e-5, where one step's update moves them by far
    more (a resume that lost or repeated an update would be that far off). Not bit for bit: two
    launches of the same step already differ by ~4e-6 (measured at step 1, before any kill; CPU
    float reductions in another order), and the gap does not grow with the kills (4.0e-6 at
    steps 1, 2 and 3)."""
    def gap(a: dict, b: dict) -> float:
        assert a.keys() == b.keys() and a
        return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)

    last = actor_state(runs["straight"] / f"global_step_{STEPS}")
    assert gap(last, actor_state(runs["killed"] / f"global_step_{STEPS}")) < 1e-5
    assert gap(last, actor_state(runs["straight"] / f"global_step_{STEPS - 1}")) > 5e-4  # one update moves ~lr, 1e-3


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
UPDATES, GROUPS = 3, 2  # updates, groups an update (actor_rollout_ref.actor.ppo_mini_batch_size)
STALENESS = 1.0  # async_training.staleness_threshold


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
    """The records the run kept (not the rolled-back ones), each with `_step`, its file's step."""
    return [{**r, "_step": int(p.name[5:-6])} for p in sorted((ckpt / "records").glob("step_*.jsonl"))
            if ".errors" not in p.name for r in lines(p)]


@pytest.fixture(scope="module")
def async_runs(tmp_path_factory) -> dict:
    work, fresh = smoke_work(tmp_path_factory, "TBT_CPU_ASYNC_RUN",
                             "the killed and resumed fully-async CPU smoke (~9 min on 2 cores)")
    smoke, ckpt = work / "smoke", work / "checkpoints"
    if fresh:
        args = (f"rollout.total_rollout_steps={PROMPTS}",)
        kills = []
        for name, when, env in (("update", async_mid_update(work / "killed-update.log"), {}),
                                ("save", mid_save, {"TBT_TEST_PAUSE_IN_SAVE": "120"})):
            seen, log = launch(work, smoke, f"killed-{name}.log", when, config=ASYNC, args=args, **env)
            assert isinstance(seen, str) and seen.startswith(f"mid-{name}"), (seen, log[-6000:])
            kills.append(seen)
        (work / "kills.txt").write_text("".join(f"{k}\n" for k in kills))  # what each kill saw, for a re-check
        rc, log = launch(work, smoke, "finish.log", config=ASYNC, args=args)
        assert rc == 0, log[-6000:]
    rows = lines(ckpt / "metrics.jsonl")
    # verl's fully-async trainer logs the rollouter's statistics once per weight version and the
    # trainer's metrics of each version's own update: the rows with an actor loss
    return {"work": work, "ckpt": ckpt, "kills": (work / "kills.txt").read_text().splitlines(),
            "logs": {name: (work / f"{log}.log").read_text() for name, log in
                     (("update", "killed-update"), ("save", "killed-save"), ("finish", "finish"))},
            "rows": rows, "trained": [r["data"] for r in rows if "actor/pg_loss" in r["data"]],
            "records": final_records(ckpt)}


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
    recs = async_runs["records"]
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
    rows = async_runs["rows"]
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


# What a straight fully-async run shows, read off the killed and resumed one: what the kills changed
# (the replayed update's records and metrics lines moved aside) is out of what is read here.

def test_async_every_update_trains_and_checkpoints(async_runs):
    assert async_runs["trained"], [sorted(r["data"]) for r in async_runs["rows"]]
    for data in async_runs["trained"]:
        for key in ("timing_s/old_log_prob", "timing_s/update_actor", "critic/score/mean"):
            assert key in data, key
        assert data["actor/grad_norm"] > 0  # shaped rewards: non-zero advantages, a real update
    for step in range(1, UPDATES + 1):
        assert (async_runs["ckpt"] / f"global_step_{step}" / "actor").is_dir()
    assert tracker(async_runs["ckpt"]) == str(UPDATES)
    assert "Training completed" in async_runs["logs"]["finish"]


def test_async_every_episode_is_played_by_the_served_weights_through_the_loop_and_graded(async_runs):
    recs = async_runs["records"]
    # no episode failed (a failed one is recorded in step_N.errors.jsonl)
    assert not list((async_runs["ckpt"] / "records").glob("step_*.errors.jsonl"))
    # the rollouter may start groups past the last update (staleness lets it run ahead): at least
    # what was trained, every one whole
    assert len(recs) >= UPDATES * GROUPS * GROUP and len(recs) % GROUP == 0
    for r in recs:
        assert r["tokens"]["response_ids"] and any(r["tokens"]["response_mask"])
        assert r["end_reason"] and r["verdict"]["explanation"]
        assert r["policy"]["kind"] == "tokens"
    # members counted per group uid on the worker (the fully-async rollouter passes no index):
    # each group is members 0..7, and no two episodes share a seed
    counts = {rep: sum(1 for r in recs if r["repetition"] == rep) for rep in range(GROUP)}
    assert set(counts.values()) == {len(recs) // GROUP}, counts
    assert len({r["seed"] for r in recs}) == len(recs)


def test_async_trained_samples_carry_their_weight_versions_and_the_staleness_bound_holds(async_runs):
    """verl reads each sample's weight versions from the `min_/max_global_steps` the agent loop
    passes (the versions the rollout server stamped on its turns): its partial-rollout span comes
    from them; the rollouter never had more than (1 + staleness_threshold) updates' worth of groups
    started on one version, and dropped none as too stale."""
    for data in async_runs["trained"]:
        assert 0 <= data["fully_async/partial/max_partial_span"] <= 1
        assert data["fully_async/static/staleness_threshold"] == STALENESS
        assert data["fully_async/count/staleness_samples"] <= GROUPS * (1 + STALENESS)
        assert data["fully_async/count/dropped_stale_samples"] == 0
        assert data["fully_async/count/dropped_failed_samples"] == 0
    # an episode's records file is named by the version of its first turn + 1 (as in the
    # synchronous trainer: step N's episodes are generated on the weights of step N - 1): no
    # trained episode was started on weights newer than the last update's
    files = sorted(p.name for p in (async_runs["ckpt"] / "records").glob("step_*.jsonl"))
    assert files and files[0] == "step_1.jsonl"
    assert all(1 <= int(f[5:-6]) <= UPDATES for f in files), files
    # each record keeps the versions of its own turns: its first on the weights its file names
    # (a relaunch's on the weights it resumed from), none older, none newer than the last update,
    # and a turn spans at most one weight sync
    for r in async_runs["records"]:
        versions = r["tokens"]["weight_versions"]
        assert versions and None not in versions, versions
        assert versions[0][0] == r["_step"] - 1, (r["_step"], versions)
        flat = [v for turn in versions for v in turn]
        assert flat == sorted(flat) and flat[-1] <= UPDATES, versions
        assert all(hi - lo <= 1 for lo, hi in versions), versions


def test_async_the_rollouts_are_corrected_against_the_trainers_log_probs(async_runs):
    """Decoupled PPO: the trainer recomputes the old log-probs (only at the response positions:
    patches 0005/0006) and weighs each token by rollout-vs-old, truncated at 2 (token-level IS).
    An update whose samples were all generated on the trainer's own weights sees rollout and old
    log-probs agree (after a resume too: the relaunch's rollout serves the weights the trainer
    restored); one with samples generated a version back (staleness 1, logged since patch 0014)
    is corrected by weights away from 1, still within the truncation."""
    stale = []
    for data in async_runs["trained"]:
        assert 0 < data["rollout_corr/rollout_is_min"] <= data["rollout_corr/rollout_is_max"] <= 2.0 + 1e-6
        if data["fully_async/count/stale_trajectory_processed"] == 0:
            assert data["training/rollout_actor_probs_pearson_corr"] > 0.99
            assert data["actor/rollout_actor/ppo_kl"] < 1e-5
        else:
            stale.append(data)
    assert len(async_runs["trained"]) == UPDATES  # every update's metrics, the last one's too (patch 0014)
    for data in stale:
        assert data["actor/rollout_actor/ppo_kl"] > 1e-5  # a real correction: the versions differ
