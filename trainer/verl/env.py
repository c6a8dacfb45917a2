"""What the verl side shares per worker process: the `thinkingbox` config block, the datasets, the
server registry, the user and the judge.

The config block sits at the top level of verl's Hydra config (`+thinkingbox.*` on the command
line; configs/ sets it in YAML). It is `tbt run`'s options for training: every field of a run's
`RunSpec` (trainer/rollout/setup.py) but the dataset and policy (the prepared rows name the task;
the policy is the model verl trains), of its `EpisodeConfig` (trainer/rollout/episode.py) but
the response window (verl's `rollout.response_length`), and of its `RunPlan`'s `retries` and
`seed`, under the same names and with the same defaults, plus
what only training has (`max_turn_tokens`, `records`, `records_dir`, `seed_requests`). The block's
fields are made from the classes that declare them (`SHARED`), so a run option is declared once;
`episode_config()` gives the run's own type back, and the world is built by the same functions as
`tbt run`'s (`build_world`, `World.setup`: trainer/rollout/setup.py).

verl builds a new agent-loop instance for every sample, so what is costly to build (datasets
loaded and compiled, the registry, the user and judge clients, compiled tool schemas) is built
once per worker process by `worker_env(config)`: the one cache of this module, keyed by the
frozen config, never changed after it is built. Policies are per sample (they wrap verl's server
manager with that sample's sampling parameters). What the samples of one worker share beyond that
lives on its `WorkerEnv` too: the member counter of groups whose rows carry no member index
(`member`, the fully-async rollouter's rows) and the newest weight version seen (`saw_version`).
"""

from __future__ import annotations

import functools
import json
import typing
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any, Mapping

from trainer.env.taskformat.tasks import Dataset, Task, load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup
from trainer.formats.identity import dataset_block
from trainer.rollout.policy import Policy
from trainer.formats.record import RecordWriter
from trainer.rollout.runner import RunPlan
from trainer.rollout.sampling import load_sampling
from trainer.rollout.setup import RunSpec, World, build_world

RENAMED = {"member_retries": "retries"}  # keys of older configs -> their name now
MAX_GROUPS = 4096  # groups whose member count a worker keeps (WorkerEnv.member)


# what the block shares with a run, by the names and defaults of the classes that declare them
SHARED = ((RunSpec, ("user", "judge", "servers", "python", "domains", "family", "thinking", "agent")),
          (EpisodeConfig, tuple(f.name for f in fields(EpisodeConfig) if f.name != "max_response_tokens")),
          (RunPlan, ("retries", "seed")))


@dataclass(frozen=True)
class TrainingFields:
    """What only training has, and the block's methods; `TBConfig` adds a run's fields (`SHARED`)."""

    max_turn_tokens: int = field(default_factory=lambda: load_sampling().max_tokens)  # per model turn (sampling.yaml)
    records: bool = True  # write every episode's record (`records_dir`/step_<N>.jsonl)
    records_dir: str | None = None  # default: trainer.default_local_dir/records
    # each model turn's request carries `sampling_params.seed` = stable_seed(episode seed, turn):
    # rollouts that do not depend on the order the engine serves requests in, where it honors the
    # seed (the CPU rollout; vLLM does, with per-request generators: a slower sampler)
    seed_requests: bool = False

    @classmethod
    def from_trainer(cls, config: Mapping[str, Any] | Any) -> Any:
        """The `thinkingbox` block of verl's config (a DictConfig or a dict); unknown keys are an
        error naming them. `records_dir` defaults to `trainer.default_local_dir`/records."""
        block = config.get("thinkingbox") if hasattr(config, "get") else None
        block = _plain(block) if block is not None else {}
        old = sorted(set(block) & set(RENAMED))
        if old:
            raise ValueError("thinkingbox config: " + ", ".join(f"{k} is now {RENAMED[k]}" for k in old))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block) - known)
        if unknown:
            raise ValueError(f"thinkingbox config: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        if block.get("records_dir") is None:
            trainer = _plain(config.get("trainer")) if hasattr(config, "get") and config.get("trainer") is not None else {}
            if trainer.get("default_local_dir"):
                block["records_dir"] = str(Path(str(trainer["default_local_dir"])) / "records")
        return cls(**block)

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def episode_config(self, max_response_tokens: int | None) -> EpisodeConfig:
        names = {f.name for f in fields(EpisodeConfig)} - {"max_response_tokens"}
        return EpisodeConfig(max_response_tokens=max_response_tokens, **{n: getattr(self, n) for n in names})


def _shared() -> list[tuple[str, Any, Any]]:
    out = []
    for cls, names in SHARED:
        hints, declared = typing.get_type_hints(cls), {f.name: f for f in fields(cls)}
        out += [(n, hints[n], field(default=declared[n].default)) for n in names]
    return out


TBConfig = make_dataclass("TBConfig", _shared(), bases=(TrainingFields,), frozen=True)
TBConfig.__module__ = __name__  # pickled by name to Ray workers
TBConfig.__doc__ = ("The `thinkingbox` block: a run's user, judge, servers, family and episode settings under their "
                    "own names and defaults (`SHARED`), and training's own (`TrainingFields`).")


def _plain(block: Any) -> dict[str, Any]:
    if isinstance(block, dict):
        return dict(block)
    from omegaconf import OmegaConf  # comes with verl

    return dict(OmegaConf.to_container(block, resolve=True))


@dataclass
class WorkerEnv:
    cfg: TBConfig
    world: World  # the servers, the user and the judge (trainer/rollout/setup.py `build_world`)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    toolsets: dict[str, Any] = field(default_factory=dict)
    writers: dict[str, RecordWriter] = field(default_factory=dict)
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, int] = field(default_factory=dict)  # group key -> the next member index (`member`)
    served_version: int | None = None  # the newest weight version a generation on this worker came back with

    def member(self, group: str, size: int) -> int:
        """The member index of the next row of a group whose rows carry none (verl's fully-async
        rollouter, and its synchronous `ray_trainer`, pass a group's `rollout.n` rows to one
        `AgentLoopWorker.generate_sequences` call with the same `uid` and no `session_id`): 0, 1, ...
        in the order that call starts them (it creates one task per row, in row order, and
        `run()` takes its index before its first await). A group is forgotten once `size` indices
        are given, so a key seen again later starts at 0; at most `MAX_GROUPS` are kept."""
        n = self.members.pop(group, 0)
        if n + 1 < size:
            self.members[group] = n + 1  # re-inserted: the newest key
            while len(self.members) > MAX_GROUPS:
                self.members.pop(next(iter(self.members)))
        return n

    def saw_version(self, version: int | None) -> None:
        if version is not None and (self.served_version is None or version > self.served_version):
            self.served_version = int(version)

    def writer(self, path: str | Path) -> RecordWriter:
        """This process's appender of a training records file (opened once, kept open)."""
        key = str(Path(path).resolve())
        if key not in self.writers:
            Path(key).parent.mkdir(parents=True, exist_ok=True)
            self.writers[key] = RecordWriter(key)
        return self.writers[key]

    def dataset(self, path: str) -> Dataset:
        """A dataset by the path the prepared rows name (loaded once)."""
        key = str(Path(path).resolve())
        if key not in self.datasets:
            self.datasets[key] = load_dataset(key)
        return self.datasets[key]

    def dataset_block(self, path: str) -> dict[str, Any]:
        """The records' `run.dataset` block of a dataset (computed once: a worker's datasets never change)."""
        if path not in self.blocks:
            self.blocks[path] = dataset_block(self.dataset(path).tasks.values(), path, None)
        return self.blocks[path]

    def task(self, path: str, uid: str) -> Task:
        ds = self.dataset(path)
        if uid not in ds.tasks:
            raise KeyError(f"task {uid!r} is not in the dataset {path} (was it renamed since the data was prepared?)")
        return ds.tasks[uid]

    @property
    def registry(self) -> Any:
        return self.world.registry

    @property
    def judge_identity(self) -> dict[str, Any]:
        return self.world.judge_identity

    def setup(self, path: str, policy: Policy, *, max_response_tokens: int | None) -> EpisodeSetup:
        """A sample's episode setup: `tbt run`'s (`World.setup`), with this worker's compiled tool lists."""
        return self.world.setup(self.dataset(path).agent(self.cfg.agent), policy,
                                self.cfg.episode_config(max_response_tokens), toolsets=self.toolsets)


@functools.cache
def _built(key: str) -> WorkerEnv:
    cfg = TBConfig(**json.loads(key))
    return WorkerEnv(cfg, build_world(user=cfg.user, judge=cfg.judge, servers=cfg.servers, python=cfg.python,
                                      domains=cfg.domains, synthetic_policy=False))


def worker_env(cfg: TBConfig) -> WorkerEnv:
    """This process's shared environment for `cfg` (built on first use)."""
    return _built(cfg.key())


__all__ = ["MAX_GROUPS", "RENAMED", "SHARED", "TBConfig", "TrainingFields", "WorkerEnv", "worker_env"]
