"""verl's fully-async trainer runs real updates on CPU with our agent loop
(configs/cpu_smoke_async.yaml: the CPU smoke's model, pool and reward under
verl.experimental.fully_async_policy.fully_async_main, one rollout slot and one trainer slot,
weights through trainer/verl/cpu/checkpoint_engine.py, 2 updates of 2 groups of 8).

One run is shared by the engine tests (~8 min on 2 cores), so they run when asked
(`TBT_CPU_SMOKE=1`, which CI's engine step sets); `TBT_CPU_ASYNC_RUN=DIR` re-checks a finished
run in DIR (DIR/checkpoints, DIR/run.log) instead:

    TBT_CPU_SMOKE=1 uv run pytest -m engine tests/test_async_on_cpu.py
    CKPT_DIR=D/checkpoints SMOKE_DIR=D/smoke CONFIG=configs/cpu_smoke_async.yaml scripts/run_train.sh
    TBT_CPU_ASYNC_RUN=D uv run pytest -m engine tests/test_async_on_cpu.py     # re-check that run
"""

from __future__ import annotations

import json

import pytest

from test_train_on_cpu import smoke, smoke_work

pytestmark = [pytest.mark.engine, pytest.mark.timeout(3000)]
UPDATES, GROUPS, N = 2, 2, 8  # cpu_smoke_async.yaml: rollout.total_rollout_steps 4, 2 groups an update, rollout.n 8
STALENESS = 1.0  # async_training.staleness_threshold


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    work, fresh = smoke_work(tmp_path_factory, "TBT_CPU_ASYNC_RUN", "the fully-async CPU smoke (~8 min on 2 cores)")
    if fresh:
        rc = smoke(work, config="configs/cpu_smoke_async.yaml")
        assert rc == 0, (work / "run.log").read_text()[-6000:]
    ckpt = work / "checkpoints"
    recs = [{**json.loads(x), "_step": int(p.name[5:-6])} for p in sorted((ckpt / "records").glob("step_*.jsonl"))
            for x in p.read_text().splitlines() if x.strip()]
    rows = [json.loads(x) for x in (ckpt / "metrics.jsonl").read_text().splitlines() if x.strip()]
    # verl's fully-async trainer logs the rollouter's statistics once per weight version and the
    # trainer's metrics aggregated over the updates between two logs: the rows with an actor loss
    trained = [r["data"] for r in rows if "actor/pg_loss" in r["data"]]
    return {"work": work, "ckpt": ckpt, "rows": rows, "trained": trained, "records": recs}


def test_both_updates_train_and_checkpoint(run):
    assert run["trained"], [sorted(r["data"]) for r in run["rows"]]
    for data in run["trained"]:
        for key in ("timing_s/old_log_prob", "timing_s/update_actor", "critic/score/mean"):
            assert key in data, key
        assert data["actor/grad_norm"] > 0  # shaped rewards: non-zero advantages, a real update
    for step in range(1, UPDATES + 1):
        assert (run["ckpt"] / f"global_step_{step}" / "actor").is_dir()
    assert (run["ckpt"] / "latest_checkpointed_iteration.txt").read_text().strip() == str(UPDATES)
    assert "Training completed" in (run["work"] / "run.log").read_text()


def test_every_episode_is_played_by_the_served_weights_through_the_loop_and_graded(run):
    recs = run["records"]
    # the rollouter may start groups past the last update (staleness lets it run ahead): at least
    # what was trained, every one whole
    assert len(recs) >= UPDATES * GROUPS * N and len(recs) % N == 0
    for r in recs:
        assert r["tokens"]["response_ids"] and any(r["tokens"]["response_mask"])
        assert r["end_reason"] and r["verdict"]["explanation"]
        assert r["policy"]["kind"] == "tokens"
    # members counted per group uid on the worker (the fully-async rollouter passes no index):
    # each group is members 0..7, and no two episodes share a seed
    counts = {rep: sum(1 for r in recs if r["repetition"] == rep) for rep in range(N)}
    assert set(counts.values()) == {len(recs) // N}, counts
    assert len({r["seed"] for r in recs}) == len(recs)


def test_trained_samples_carry_their_weight_versions_and_the_staleness_bound_holds(run):
    """verl reads each sample's weight versions from the `min_/max_global_steps` the agent loop
    passes (the versions the rollout server stamped on its turns): its partial-rollout span comes
    from them; the rollouter never had more than (1 + staleness_threshold) updates' worth of groups
    started on one version, and dropped none as too stale."""
    for data in run["trained"]:
        assert 0 <= data["fully_async/partial/max_partial_span"] <= 1
        assert data["fully_async/static/staleness_threshold"] == STALENESS
        assert data["fully_async/count/staleness_samples"] <= GROUPS * (1 + STALENESS)
        assert data["fully_async/count/dropped_stale_samples"] == 0
        assert data["fully_async/count/dropped_failed_samples"] == 0
    # an episode's records file is named by the version of its first turn + 1 (as in the
    # synchronous trainer: step N's episodes are generated on the weights of step N - 1): no
    # trained episode was started on weights newer than the last update's
    files = sorted(p.name for p in (run["ckpt"] / "records").glob("step_*.jsonl"))
    assert files and files[0] == "step_1.jsonl"
    assert all(1 <= int(f[5:-6]) <= UPDATES for f in files), files
    # each record keeps the versions of its own turns: its first on the weights its file names,
    # none older, none newer than the last update, and a turn spans at most one weight sync
    for r in run["records"]:
        versions = r["tokens"]["weight_versions"]
        assert versions and None not in versions, versions
        assert versions[0][0] == r["_step"] - 1, (r["_step"], versions)
        flat = [v for turn in versions for v in turn]
        assert flat == sorted(flat) and flat[-1] <= UPDATES, versions
        assert all(hi - lo <= 1 for lo, hi in versions), versions


def test_the_rollouts_are_corrected_against_the_trainers_log_probs(run):
    """Decoupled PPO: the trainer recomputes the old log-probs (only at the response positions:
    patches 0005/0006) and weighs each token by rollout-vs-old, truncated at 2 (token-level IS).
    An update whose samples were all generated on the trainer's own weights sees rollout and old
    log-probs agree; one with samples generated a version back (staleness 1: update 2's, logged
    since patch 0014) is corrected by weights away from 1, still within the truncation."""
    stale = []
    for data in run["trained"]:
        assert 0 < data["rollout_corr/rollout_is_min"] <= data["rollout_corr/rollout_is_max"] <= 2.0 + 1e-6
        if data["fully_async/count/stale_trajectory_processed"] == 0:
            assert data["training/rollout_actor_probs_pearson_corr"] > 0.99
            assert data["actor/rollout_actor/ppo_kl"] < 1e-5
        else:
            stale.append(data)
    assert len(run["trained"]) == UPDATES  # every update's metrics, the last one's too (patch 0014)
    for data in stale:
        assert data["actor/rollout_actor/ppo_kl"] > 1e-5  # a real correction: the versions differ
