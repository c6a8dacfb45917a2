"""verl's dataset over the prepared pool: rows are task references, prompts are measured as rendered.

`ThinkingBoxDataset` (set `data.custom_cls.path=<this file>`, `data.custom_cls.name=ThinkingBoxDataset`)
reads the parquet that data/prepare_data.py writes (one row per task: `extra_info.uid`,
`extra_info.dataset`; see trainer/data/prepare.py `parquet_rows`) as verl's `RLHFDataset` does,
with one difference: prompt lengths are filtered on **the real prompt** the agent loop will send,
the task's system messages + tools block + query rendered by tb_interpret for the model family
(a sandbox is opened once per task for its tool listing), not the bare query in the `prompt`
column. A row whose task cannot be found or opened is dropped and reported with its uid; a task
whose rendered prompt exceeds `data.max_prompt_length` is dropped and counted.

Every row it hands out carries `dispatch`, its number among the rows this dataset has handed out
(in a dataloader worker: interleaved by worker id, so no two workers give the same number). verl
passes the row's fields to the agent loop, which mixes the number into the episode seed: a group
that verl refills (DAPO's zero-variance replacement, a failed group) comes with the same step and
members 0..n-1 as the first one, possibly of the same task, and must not replay it. The count is
the dataset's `state_dict()`, which verl's dataloader checkpoint (`data.pt`) carries, so a resumed
run numbers its rows as the uninterrupted one would.

The family, thinking flag and servers come from `data.thinkingbox` (the same block as the
top-level `thinkingbox`, see trainer/verl/env.py; configs/ set one from the other).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from typing import Any

import torch.utils.data
from verl.utils.dataset.rl_dataset import RLHFDataset

from trainer.core import tb_interpret as ti
from trainer.rollout.episode import opening_prompt
from trainer.verl.env import TBConfig, worker_env

log = logging.getLogger(__name__)
SAVE_PAUSE = "TBT_TEST_PAUSE_IN_SAVE"  # seconds a checkpoint save pauses after the shards (a test failpoint)


def run_sync(coro: Any) -> Any:
    """`asyncio.run(coro)`, also where this thread already runs an event loop (verl's fully-async
    rollouter builds its datasets in `__init__` of an async Ray actor, where `asyncio.run` is
    refused): then in a thread of its own, waited for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tb-dataset") as pool:
        return pool.submit(asyncio.run, coro).result()


def rendered_prompt_ids(task: Any, env: Any, path: str, tokenizer: Any) -> list[int]:
    """The prompt ids an episode of `task` starts with (what `TokenTrajectory.start` encodes)."""
    cfg = env.cfg
    agent = env.dataset(path).agent(cfg.agent)
    messages, schemas = run_sync(opening_prompt(task, env.registry, agent, strip=cfg.strip_sources,
                                                view=cfg.agent_view))
    text = ti.render(messages, family=cfg.family, tools=schemas, add_generation_prompt=True,
                     enable_thinking=cfg.thinking)
    return tokenizer.encode(text, add_special_tokens=False)


class ThinkingBoxDataset(RLHFDataset):
    def __init__(self, data_files: Any, tokenizer: Any, config: Any, processor: Any = None, max_samples: int = -1):
        super().__init__(data_files, tokenizer, config, processor, max_samples)
        self.dispatched = 0  # rows handed out (by this process: each dataloader worker counts its own)

    def __getitem__(self, item: int) -> dict[str, Any]:
        row = super().__getitem__(item)
        worker = torch.utils.data.get_worker_info()
        row["dispatch"] = self.dispatched if worker is None else self.dispatched * worker.num_workers + worker.id
        self.dispatched += 1
        return row

    def state_dict(self) -> dict[str, Any]:
        # a test failpoint (tests/test_resume_on_cpu.py): verl asks for this in the middle of a save
        # (the synchronous trainer and the fully-async rollouter alike), after every rank's shards and
        # before data.pt and the tracker, so a kill lands mid-save for sure
        pause = float(os.environ.get(SAVE_PAUSE, "") or 0)
        if pause > 0:
            log.warning("%s=%s: pausing the save %.0f s", SAVE_PAUSE, pause, pause)
            time.sleep(pause)
        return {"dispatched": self.dispatched}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.dispatched = int(state_dict.get("dispatched", 0))

    def maybe_filter_out_long_prompts(self, dataframe: Any = None) -> Any:
        cfg = TBConfig.from_trainer(self.config)
        env = worker_env(cfg)
        limit = int(self.max_prompt_length)
        keep: list[int] = []
        self.prompt_lengths: dict[str, int] = {}
        self.dropped: dict[str, str] = {}
        for i, row in enumerate(dataframe):
            extra = row.get("extra_info") or {}
            uid, path = extra.get("uid"), extra.get("dataset")
            try:
                task = env.task(path, uid)
                n = len(rendered_prompt_ids(task, env, path, self.tokenizer))
            except Exception as e:  # a row that cannot become an episode is reported, never trained on
                self.dropped[str(uid)] = f"{type(e).__name__}: {e}"
                log.warning("dataset row %d (%s): %s", i, uid, self.dropped[str(uid)])
                continue
            self.prompt_lengths[uid] = n
            if self.filter_overlong_prompts and n > limit:
                self.dropped[uid] = f"rendered prompt has {n} tokens > data.max_prompt_length={limit}"
                continue
            keep.append(i)
        if self.dropped:
            log.warning("ThinkingBoxDataset: %d of %d rows dropped (%s)", len(self.dropped), len(dataframe),
                        "; ".join(f"{u}: {w}" for u, w in list(self.dropped.items())[:5]))
        return dataframe.select(keep)


__all__ = ["ThinkingBoxDataset", "rendered_prompt_ids", "run_sync"]
