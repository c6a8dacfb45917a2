"""What the verl side shares per worker process: the `thinkingbox` config block, the datasets, the
server registry, the user and the judge.

The config block sits at the top level of verl's Hydra config (`+thinkingbox.*` on the command
line; configs/ sets it in YAML). It is `tbt run`'s options for training: every field of a run's
`RunSpec` (trainer/rollout/setup.py) but the dataset and policy (the prepared rows name the task;
the policy is the model verl trains), of its `EpisodeConfig` (trainer/rollout/episode.py) but
the response window (verl's `rollout.response_length`), and of its `RunPlan`'s `retries` and
`seed`, under the same names and with the same defaults (tests/test_verl_on_cpu.py checks), plus
what only training has (`max_turn_tokens`, `records`, `records_dir`). `TBConfig.run_spec()` and
`episode_config()` give the run's own types back, and the world is built by the same functions
as `tbt run`'s (`make_registry`, `make_user`, `make_judge`).

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
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from trainer.env.taskformat.tasks import Dataset, Task, load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup
from trainer.rollout.identity import dataset_block
from trainer.rollout.policy import Policy
from trainer.rollout.record import RecordWriter
from trainer.rollout.runner import RunPlan
from trainer.rollout.sampling import load_sampling
from trainer.rollout.setup import RunSpec, make_judge, make_registry, make_user

RENAMED = {"member_retries": "retries"}  # keys of older configs -> their name now
MAX_GROUPS = 4096  # groups whose member count a worker keeps (WorkerEnv.member)


@dataclass(frozen=True)
class TBConfig:
    # what the run is (RunSpec's names and defaults)
    user: str | None = RunSpec.user  # simulated user spec (trainer/rollout/setup.py make_user); None: no user
    judge: str | None = RunSpec.judge  # judge spec (make_judge); None: $TBT_JUDGE_URL, else none
    servers: str | None = RunSpec.servers  # a ThinkingBox servers.yaml for external servers
    python: str | None = RunSpec.python  # {python} in servers.yaml
    domains: str | None = RunSpec.domains  # internal servers (import path)
    family: str = RunSpec.family  # model family whose markup tb_interpret reads
    thinking: bool = RunSpec.thinking
    agent: str | None = RunSpec.agent  # agent name in the dataset (default: its only one)
    # the episode's budgets (EpisodeConfig's names and defaults)
    max_episode_tokens: int | None = EpisodeConfig.max_episode_tokens  # the agent's generated tokens per episode
    max_episode_seconds: float | None = EpisodeConfig.max_episode_seconds
    max_context: int | None = EpisodeConfig.max_context  # prompt + conversation in tokens
    call_timeout: float = EpisodeConfig.call_timeout  # one tool call (past it: a system error)
    open_timeout: float = EpisodeConfig.open_timeout  # opening a server session
    isolate_tests: bool = EpisodeConfig.isolate_tests  # test functions in a subprocess
    strip_sources: bool = EpisodeConfig.strip_sources
    max_agent_turns: int | None = EpisodeConfig.max_agent_turns  # the cap of a task that sets none
    max_empty_turns: int = EpisodeConfig.max_empty_turns  # empty/reasoning-only turns in a row re-asked
    agent_view: str = EpisodeConfig.agent_view  # the tools as the framework shows them, or "plain"
    # how members are played (RunPlan's names and defaults)
    retries: int = RunPlan.retries  # re-runs of a group member that ends in a system error
    seed: int = RunPlan.seed  # the run seed; step N's episodes derive theirs from step_seed(seed, N)
    # training only
    max_turn_tokens: int = field(default_factory=lambda: load_sampling().max_tokens)  # per model turn (sampling.yaml)
    records: bool = True  # write every episode's record (`records_dir`/step_<N>.jsonl)
    records_dir: str | None = None  # default: trainer.default_local_dir/records
    # each model turn's request carries `sampling_params.seed` = stable_seed(episode seed, turn):
    # rollouts that do not depend on the order the engine serves requests in, where it honors the
    # seed (the CPU rollout; vLLM does, with per-request generators: a slower sampler)
    seed_requests: bool = False

    @classmethod
    def from_trainer(cls, config: Mapping[str, Any] | Any) -> TBConfig:
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

    def run_spec(self, dataset: str, policy: str = "verl") -> RunSpec:
        """The `RunSpec` of this block for a dataset (what `tbt run` would be given)."""
        names = {f.name for f in fields(RunSpec)} - {"dataset", "policy", "test_list", "config", "sampling"}
        return RunSpec(dataset=dataset, policy=policy, config=self.episode_config(None),
                       **{n: getattr(self, n) for n in names})  # type: ignore[arg-type]

    def episode_config(self, max_response_tokens: int | None) -> EpisodeConfig:
        names = {f.name for f in fields(EpisodeConfig)} - {"max_response_tokens"}
        return EpisodeConfig(max_response_tokens=max_response_tokens, **{n: getattr(self, n) for n in names})


def _plain(block: Any) -> dict[str, Any]:
    if isinstance(block, dict):
        return dict(block)
    from omegaconf import OmegaConf  # comes with verl

    return dict(OmegaConf.to_container(block, resolve=True))


@dataclass
class WorkerEnv:
    cfg: TBConfig
    registry: Any
    user: Any
    judge: Any
    judge_identity: dict[str, Any]
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

    def setup(self, path: str, policy: Policy, *, max_response_tokens: int | None) -> EpisodeSetup:
        return EpisodeSetup(self.registry, self.dataset(path).agent(self.cfg.agent), policy, self.user, self.judge,
                            self.judge_identity, self.cfg.episode_config(max_response_tokens), toolsets=self.toolsets)


@functools.cache
def _built(key: str) -> WorkerEnv:
    cfg = TBConfig(**json.loads(key))
    judge, judge_id = make_judge(cfg.judge, synthetic_policy=False)
    registry = make_registry(servers=cfg.servers, python=cfg.python, domains=cfg.domains)
    return WorkerEnv(cfg, registry, make_user(cfg.user), judge, judge_id)


def worker_env(cfg: TBConfig) -> WorkerEnv:
    """This process's shared environment for `cfg` (built on first use)."""
    return _built(cfg.key())


__all__ = ["MAX_GROUPS", "RENAMED", "TBConfig", "WorkerEnv", "worker_env"]
