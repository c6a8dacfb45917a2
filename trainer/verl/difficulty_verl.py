"""Online difficulty in verl 0.9.0: the dataset picks what is rolled out, the replay buffer reports
what came back (trainer/verl/difficulty.py holds the posterior and the pick rule).

Why two hooks. In verl 0.9.0's V1 trainer the tasks that get rolled out are chosen by the train
dataloader (`PPOTrainer._add_batch_to_generate` at the start of every step, and the replay
buffer's `refill_fn` for DAPO and failed-group refills, both `next(train_dataloader)`; its
sampler is a plain RandomSampler, `create_rl_sampler`). The replay buffer
(`trainer.v1.sampler.custom_sampler`, `sample(global_steps, partition_id, batch_size)`) only
chooses among groups already rolled out, and is the one place that sees whole finished groups.
So:

- `OnlineDifficultyReplayBuffer` (trainer.v1.sampler.custom_sampler): verl's sync `ReplayBuffer`,
  constructed with exactly what trainer_base gives a custom sampler (trainer_mode,
  trainer_config, max_off_policy_threshold, max_off_policy_strategy, sampler_kwargs, refill_fn);
  it reads the rest of the stock buffer's arguments from verl's own config the way
  `_build_replay_buffer` does (algorithm.filter_groups, data.train_batch_size,
  trainer.v1.sampler.sync_refill_failed_groups), so DAPO and the failed-group drop of patch 0001
  work unchanged. Every finished train group is appended once, before any eviction, to
  `<dir>/groups.jsonl` as {step, group, task (extra_info.uid), rewards (each member's reward: its `rm_scores`)};
  a failed group as {failed: true} (no evidence: a system error says nothing of the policy);
  the end of every `sample()` as {end_step}. One change to DAPO: a uniform group is refilled by
  one prompt, not two (stock sync DAPO oversamples 2x because random refills are often uniform
  again; these are picked to be mixed, and the surplus would be discarded).
- `OnlineDifficultyDataset` (data.custom_cls): `ThinkingBoxDataset` whose training instance
  ignores the sampler's index and returns the task `DifficultyState.pick` chooses, after reading
  the log lines written since its last pick (so a refill after a uniform group already knows
  it). It holds the state: `state_dict()` / `load_state_dict()` make the dataloader's state (verl's
  `global_step_N/data.pt`) carry it, so a resume restores exactly the state of the checkpoint
  (log lines written after it are cut off), and every save also writes the state as JSON beside
  verl's checkpoint dirs, `<dir>/global_step_N.json` (trace included: `difficulty.trace_png`).
  The validation instance (its files are not data.train_files) is a plain ThinkingBoxDataset.

Why this way. The updates come from the replay buffer, not from the agent loop reporting each
verdict: only the replay buffer sees a group whole, with its status (finished, failed) and before
DAPO evicts it. The channel is a file because the two objects are built separately by verl, in
the same process (the trainer's), and share nothing else; a Ray actor holding the state would
work too, but costs a process and its own checkpointing, while the dataset is already checkpointed
by verl and the log is a replayable record of every group. `data.dataloader_num_workers` must be
0: picks are made when the trainer asks, never prefetched by worker processes.

Settings: `data.online_difficulty.{dir, bands_csv, forget, discount, tilt, explore, seed}` (all
optional; dir defaults to `<trainer.default_local_dir>/thinkingbox_difficulty`, bands_csv to the
bands.csv beside the first train file). docs/training-verl.md lists the overrides that turn it on.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import transfer_queue as tq
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from trainer.verl.dataset import ThinkingBoxDataset
from trainer.verl.difficulty import DifficultyConfig, DifficultyError, DifficultyState, read_probe_counts

log = logging.getLogger(__name__)

SAMPLER_NAME = "OnlineDifficultyReplayBuffer"
DATASET_NAME = "OnlineDifficultyDataset"
BLOCK = "data.online_difficulty"
PICKER_FORMAT = "thinkingbox-difficulty-picker/1"


def verl_root(node: Any, depth: int) -> Any:
    """The whole verl config from one of its nodes `depth` levels down (None for a detached node)."""
    try:
        root = OmegaConf.select(node, "." * (depth + 1))
    except Exception:  # omegaconf raises ConfigKeyError for a node without parents
        return None
    return root if root is not None and "trainer" in root and "data" in root else None


def _need_root(node: Any, depth: int, what: str) -> Any:
    root = verl_root(node, depth)
    if root is None:
        raise DifficultyError(f"{what}: needs verl's whole config above it (construct it the way verl's trainer does)")
    return root


@dataclass(frozen=True)
class Settings:
    dir: Path
    bands_csv: Path | None
    config: DifficultyConfig

    @classmethod
    def from_root(cls, root: Any) -> Settings:
        block = OmegaConf.select(root, BLOCK, default=None)
        block = dict(OmegaConf.to_container(block, resolve=True)) if block is not None else {}
        d = block.pop("dir", None)
        if not d:
            base = Path(str(OmegaConf.select(root, "trainer.default_local_dir")))
            d = (base if base.is_absolute() else Path.cwd() / base) / "thinkingbox_difficulty"
        csv_path = block.pop("bands_csv", None)
        if csv_path is None:
            files = OmegaConf.select(root, "data.train_files")
            first = files if isinstance(files, str) else list(files)[0]
            csv_path = Path(str(first)).parent / "bands.csv"
        n = int(OmegaConf.select(root, "actor_rollout_ref.rollout.n", default=8) or 8)
        cfg = DifficultyConfig.from_mapping({"group_size": n, **block}, BLOCK)
        return cls(Path(d), Path(csv_path) if csv_path else None, cfg)


def check_switch(root: Any) -> None:
    """The dataset and the replay buffer only work together: both hooks set, no dataloader workers."""
    want = {"data.custom_cls.name": DATASET_NAME, "trainer.v1.sampler.custom_sampler.name": SAMPLER_NAME,
            "data.dataloader_num_workers": 0, "trainer.v1.trainer_mode": "sync"}
    wrong = [f"{k}={OmegaConf.select(root, k)!r} (needs {v!r})" for k, v in want.items() if OmegaConf.select(root, k) != v]
    if wrong:
        raise DifficultyError("online difficulty: " + "; ".join(wrong) + " (docs/training-verl.md, 'Online difficulty')")


class GroupLog:
    """`<dir>/groups.jsonl`: appended by the replay buffer, read from an offset by the dataset."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def append(self, records: list[dict[str, Any]]) -> None:
        if records:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))

    def read(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """The complete lines from `offset` on, and the offset after them."""
        if not self.path.exists():
            return [], offset
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        out = []
        for i, line in enumerate(data[:end].splitlines()):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                raise DifficultyError(f"{self.path}: line {i + 1} after byte {offset} is not JSON") from None
        return out, offset + end

    def truncate(self, offset: int) -> None:
        if self.size() > offset:
            os.truncate(self.path, offset)


def _plain(v: Any) -> Any:
    v = getattr(v, "data", v)
    return v.item() if hasattr(v, "item") else v


def _rows(v: Any) -> list[Any]:
    """A TransferQueue field as one value per key (a stacked or jagged tensor: its rows)."""
    return list(v.unbind(0)) if hasattr(v, "unbind") else list(v)


def _reward(v: Any) -> float | None:
    """A trajectory's reward from its `rm_scores` (verl's `AgentLoopOutput.as_dict()` turns the
    agent loop's `reward_score` into a per-token tensor, zero but at the last response token)."""
    v = getattr(v, "data", v)
    if v is None:
        return None
    return float(v.sum()) if hasattr(v, "sum") else float(v)


class OnlineDifficultyReplayBuffer(ReplayBuffer):
    def __init__(self, trainer_mode: str, trainer_config: Any, max_off_policy_threshold: int,
                 max_off_policy_strategy: str, sampler_kwargs: Any, poll_interval: float = 2.0, refill_fn=None):
        root = _need_root(sampler_kwargs, 4, "trainer.v1.sampler.sampler_kwargs")
        check_switch(root)
        fg = OmegaConf.select(root, "algorithm.filter_groups", default=None)
        metric = None
        if fg is not None and fg.get("enable", False):
            metric = fg.get("metric", None)
            if not metric:
                raise DifficultyError("algorithm.filter_groups.metric must be set when group filtering is enabled")
        refill_failed = bool(OmegaConf.select(root, "trainer.v1.sampler.sync_refill_failed_groups", default=False))
        train_bs = int(root.data.train_batch_size)
        # what trainer_base._build_replay_buffer passes the stock sync ReplayBuffer
        super().__init__(trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                         sampler_kwargs, poll_interval=poll_interval, refill_fn=refill_fn,
                         filter_groups_metric=str(metric) if metric else None, sync_refill_failed_groups=refill_failed,
                         train_batch_size=train_bs,
                         gen_batch_size=1 if metric or refill_failed else (root.data.get("gen_batch_size") or train_bs),
                         max_inflight_gen_batches=int(fg.get("max_inflight_gen_batches", 1)) if metric else 1)
        self.log = GroupLog(Settings.from_root(root).dir / "groups.jsonl")
        self._logged: set[str] = set()  # group uids already in the log
        self._owed = 0  # groups evicted in this sample() and not yet replaced (see _refill_once)
        if self.refill_fn is not None:
            self._dispatch, self.refill_fn = self.refill_fn, self._refill_once
        self._step_groups: Counter = Counter()

    def _terminal_eviction_reasons(self, global_steps: int, partition_id: str):
        if partition_id != "val":
            self._report(global_steps, partition_id)
        return super()._terminal_eviction_reasons(global_steps, partition_id)

    def _report(self, step: int, partition_id: str) -> None:
        """Append every newly terminal group of this snapshot to the log (module docstring)."""
        present = (self.pending_keys[partition_id] | self.running_keys[partition_id] | self.finished_keys[partition_id]
                   | self.failure_keys[partition_id])
        self._logged &= present
        new = (self.finished_keys[partition_id] | self.failure_keys[partition_id]) - self._logged
        if not new:
            return
        keys = sorted(k for k in self.partitions[partition_id] if k.split("_")[0] in new)
        members: dict[str, dict[str, tuple[int, float | None]]] = {}
        tasks: dict[str, str] = {}
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_info", "rm_scores"])
            for key, info, reward in zip(keys, list(data["extra_info"]), _rows(data["rm_scores"]), strict=True):
                uid, session, index = key.split("_")
                info = _plain(info) or {}
                tasks[uid] = str(info.get("uid")) if isinstance(info, dict) and info.get("uid") else tasks.get(uid, "")
                r = _reward(reward)
                if uid in self.finished_keys[partition_id] and r is None:
                    raise DifficultyError(f"group {uid} (task {tasks[uid]}): trajectory {key} has no rm_scores; "
                                          "the agent loop must set it (trainer/verl/agent_loop.py does)")
                prev = members.setdefault(uid, {}).get(session)
                if prev is None or int(index) > prev[0]:
                    members[uid][session] = (int(index), None if r is None else float(r))
        records = []
        for uid in sorted(new):
            task = tasks.get(uid) or None
            if uid in self.failure_keys[partition_id]:
                records.append({"step": step, "group": uid, "task": task, "failed": True})
                self._step_groups["failed"] += 1
            else:
                rewards = [r for _, (_, r) in sorted(members.get(uid, {}).items(), key=lambda kv: int(kv[0]))]
                records.append({"step": step, "group": uid, "task": task, "rewards": rewards})
                self._step_groups["mixed" if rewards and min(rewards) != max(rewards) else "uniform"] += 1
        self.log.append(records)
        self._logged |= new

    def _evict_terminal_groups(self, global_steps: int, partition_id: str, eviction_reasons):
        evicted, stale, dapo, metrics = super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)
        _, dapo_uids, failed_uids, _ = eviction_reasons
        self._owed += len(dapo_uids | failed_uids)  # stale ones are not replaced (nor are they by stock)
        return evicted, stale, dapo, metrics

    def _refill_once(self, count: int) -> None:
        """The trainer's refill, for at most the groups still owed: stock sync sample() grants two
        refill credits per zero-variance group (its refills are random, so often uniform again; these
        are picked to be mixed) and drops the surplus once the batch is full. One group each saves
        rolling out a group that is thrown away, and the wait for it."""
        n = min(count, self._owed)
        self._owed -= n
        if n:
            self._dispatch(n)

    def _select_prompt_uids(self, partition_id: str, sampleable_keys: set[str], batch_size: int):
        """The stock choice (the oldest policy version first), its ties broken by dispatch order
        (the order TransferQueue lists the prompts in) rather than by the iteration order of a set of
        uuid4 group ids, which differs from run to run: when a refill leaves a surplus group, which
        one is dropped, and so what the step trains on, is the same in every run of the same seeds."""
        steps = self.prompt_global_steps[partition_id]
        dispatched = {key: i for i, key in enumerate(steps)}
        ordered = sorted(sampleable_keys, key=lambda key: (steps.get(key, 0), dispatched.get(key, len(dispatched)), key))
        return ordered[:batch_size], dict(self.partitions[partition_id]), dict(steps)

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        self._owed, self._step_groups = 0, Counter()
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        self.log.append([{"end_step": global_steps}])
        seen = self._step_groups["mixed"] + self._step_groups["uniform"]
        metrics.update({"training/online_difficulty/groups": seen,
                        "training/online_difficulty/mixed_share": self._step_groups["mixed"] / seen if seen else 0.0,
                        "training/online_difficulty/failed_groups": self._step_groups["failed"]})
        return batch, metrics


class Picker:
    """The dataset's side: the state, the log offset, the pick RNG and this step's picks (a task is
    picked at most once a step while others are left, as in bench/selection.py)."""

    def __init__(self, settings: Settings, uids: list[str]):
        self.settings = settings
        self.index = {u: i for i, u in enumerate(uids)}
        counts: dict[str, tuple[int, int] | None] = dict.fromkeys(uids)
        source = "no bands.csv: every task starts at Beta(1/2, 1/2)"
        csv_path = settings.bands_csv
        if csv_path is not None and csv_path.exists():
            probes = read_probe_counts(csv_path)
            counts = {u: probes.get(u) for u in uids}
            source = f"{csv_path} ({sum(v is not None for v in counts.values())} of {len(uids)} tasks probed)"
        else:
            log.warning("online difficulty: %s not found; every task starts at Beta(1/2, 1/2)", csv_path)
        self.state = DifficultyState.from_counts(counts, settings.config, source=source)
        self.log = GroupLog(settings.dir / "groups.jsonl")
        self.offset = self.log.size()  # lines of an earlier run are not this run's evidence
        self.rng = random.Random(settings.config.seed)
        self.this_step: list[str] = []

    def sync(self) -> None:
        records, self.offset = self.log.read(self.offset)
        for r in records:
            if "end_step" in r:
                self.state.end_step(int(r["end_step"]))
                self.this_step.clear()
                continue
            task = r.get("task")
            if not r.get("failed") and task in self.index and r.get("rewards"):
                self.state.observe(task, r["rewards"], r.get("step"))

    def next_index(self) -> int:
        import torch.utils.data

        if torch.utils.data.get_worker_info() is not None:
            raise DifficultyError("online difficulty: the dataset is picking inside a dataloader worker; "
                                  "set data.dataloader_num_workers=0")
        self.sync()
        uid = self.state.pick(self.rng, candidates=self.index, exclude=self.this_step)
        self.this_step.append(uid)
        return self.index[uid]

    def state_dict(self) -> dict[str, Any]:
        self.sync()
        self.state.save(self.settings.dir / f"global_step_{self.state.step}.json")
        return {"format": PICKER_FORMAT, "state": self.state.to_json(), "log_offset": self.offset,
                "rng": self.rng.getstate()}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        if sd.get("format") != PICKER_FORMAT:
            raise DifficultyError(f"online difficulty: checkpointed dataset state has format {sd.get('format')!r}, "
                                  f"expected {PICKER_FORMAT!r}")
        self.state = DifficultyState.from_json(sd["state"], "checkpointed online difficulty state")
        self.rng.setstate(tuple(x if not isinstance(x, list) else tuple(x) for x in sd["rng"]))
        self.offset = int(sd["log_offset"])
        if self.log.size() < self.offset:
            log.warning("online difficulty: %s is shorter than at the checkpoint; reading from its end", self.log.path)
            self.offset = self.log.size()
        self.log.truncate(self.offset)  # groups after the checkpoint belong to steps verl rolls back
        self.this_step = []


class OnlineDifficultyDataset(ThinkingBoxDataset):
    def __init__(self, data_files: Any, tokenizer: Any, config: Any, processor: Any = None, max_samples: int = -1):
        super().__init__(data_files, tokenizer, config, processor, max_samples)
        self.picker: Picker | None = None
        root = verl_root(config, 1)
        train = OmegaConf.select(root, "data.train_files") if root is not None else None
        train = [train] if isinstance(train, str) else list(train or [])
        if root is None or [str(f) for f in self.original_data_files] != [str(f) for f in train]:
            return  # validation (or a detached config): the plain dataset
        check_switch(root)
        uids = [str((row or {}).get("uid")) for row in self.dataframe["extra_info"]]
        self.picker = Picker(Settings.from_root(root), uids)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return super().__getitem__(self.picker.next_index() if self.picker is not None else item)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **(self.picker.state_dict() if self.picker is not None else {})}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        if self.picker is not None and "format" in state_dict:
            self.picker.load_state_dict(state_dict)


__all__ = ["DATASET_NAME", "SAMPLER_NAME", "GroupLog", "OnlineDifficultyDataset", "OnlineDifficultyReplayBuffer",
           "Picker", "Settings", "check_switch", "verl_root"]
