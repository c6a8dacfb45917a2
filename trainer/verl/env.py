"""What the verl side shares per worker process: the `thinkingbox` config block, the datasets, the
server registry, the user and the judge.

The config block sits at the top level of verl's Hydra config (`+thinkingbox.*` on the command
line; configs/ sets it in YAML). Every field is documented where declared (`TBConfig`).

verl builds a new agent-loop instance for every sample, so what is costly to build (datasets
loaded and compiled, the registry, the user and judge clients, compiled tool schemas) is built
once per worker process by `worker_env(config)`: the one cache of this module, keyed by the
frozen config, never changed after it is built. Policies are per sample (they wrap verl's server
manager with that sample's sampling parameters).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from trainer.env.taskformat.tasks import Dataset, Task, load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup
from trainer.rollout.policy import Policy
from trainer.rollout.setup import RunSpec, make_judge, make_registry
from trainer.rollout.user import make_user


@dataclass(frozen=True)
class TBConfig:
    user: str | None = None  # simulated user spec (trainer/rollout/user.py); None: no user
    judge: str | None = None  # judge spec (trainer/rollout/setup.py); None: $TBT_JUDGE_URL, else none
    family: str = "hermes"  # model family whose markup tb_interpret reads
    thinking: bool = True
    servers: str | None = None  # a ThinkingBox servers.yaml for external servers
    python: str | None = None  # {python} in servers.yaml
    domains: str | None = "trainer.domains:DOMAINS"  # internal servers (import path)
    agent: str | None = None  # agent name in the dataset (default: its only one)
    member_retries: int = 2  # re-runs of a group member that ends in a system error
    max_turn_tokens: int = 4096  # per model turn
    max_episode_tokens: int | None = None  # the agent's generated tokens per episode
    max_episode_seconds: float | None = None
    call_timeout: float = 30.0
    strip_sources: bool = False

    @classmethod
    def from_trainer(cls, config: Mapping[str, Any] | Any) -> TBConfig:
        """The `thinkingbox` block of verl's config (a DictConfig or a dict); unknown keys are an
        error naming them."""
        block = config.get("thinkingbox") if hasattr(config, "get") else None
        if block is None:
            return cls()
        try:
            from omegaconf import OmegaConf

            block = OmegaConf.to_container(block, resolve=True) if not isinstance(block, dict) else block
        except ImportError:  # pragma: no cover - omegaconf comes with verl
            block = dict(block)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block) - known)
        if unknown:
            raise ValueError(f"thinkingbox config: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**block)

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass
class WorkerEnv:
    cfg: TBConfig
    registry: Any
    user: Any
    judge: Any
    judge_identity: dict[str, Any]
    datasets: dict[str, Dataset] = field(default_factory=dict)
    toolsets: dict[str, Any] = field(default_factory=dict)

    def dataset(self, path: str) -> Dataset:
        """A dataset by the path the prepared rows name (loaded once)."""
        key = str(Path(path).resolve())
        if key not in self.datasets:
            self.datasets[key] = load_dataset(key)
        return self.datasets[key]

    def task(self, path: str, uid: str) -> Task:
        ds = self.dataset(path)
        if uid not in ds.tasks:
            raise KeyError(f"task {uid!r} is not in the dataset {path} (was it renamed since the data was prepared?)")
        return ds.tasks[uid]

    def setup(self, path: str, policy: Policy, *, max_response_tokens: int | None) -> EpisodeSetup:
        c = self.cfg
        config = EpisodeConfig(max_total_tokens=c.max_episode_tokens, max_seconds=c.max_episode_seconds,
                               max_response_tokens=max_response_tokens, call_timeout=c.call_timeout,
                               strip_sources=c.strip_sources)
        return EpisodeSetup(self.registry, self.dataset(path).agent(c.agent), policy, self.user, self.judge,
                            self.judge_identity, config, toolsets=self.toolsets)


@functools.cache
def _built(key: str) -> WorkerEnv:
    cfg = TBConfig(**json.loads(key))
    spec = RunSpec(dataset="", policy="", servers=cfg.servers, python=cfg.python, domains=cfg.domains)
    judge, judge_id = make_judge(cfg.judge, synthetic_policy=False)
    return WorkerEnv(cfg, make_registry(spec), make_user(cfg.user), judge, judge_id)


def worker_env(cfg: TBConfig) -> WorkerEnv:
    """This process's shared environment for `cfg` (built on first use)."""
    return _built(cfg.key())


__all__ = ["TBConfig", "WorkerEnv", "worker_env"]
