"""What a run is made of, as plain data (`RunSpec`), and the episode setup built from it: the one
place where a policy, a simulated user, a judge and a server registry are made from their specs
(`make_policy`, `make_user`, `make_judge`, `make_registry`), for `tbt run`, probes, evaluation
(trainer/rollout/runner.py `run`) and training (trainer/verl/env.py) alike.

A `RunSpec` is picklable, so a Ray worker builds the same setup in its own process as the driver
does locally: the dataset, the server registry (the internal domains named by an import path,
`module:attribute`, resolved where it is built), the policy, the user and the judge from their
spec strings. Its `sampling` is the policy's default sampling (the CLIs fill it from the one
sampling config, configs/sampling.yaml; a policy spec's own options override it).

Policy specs: trainer/rollout/policy.py. User specs: trainer/rollout/user.py (`scripted`,
`openai:URL#MODEL[,key_env=VAR,timeout=S,retries=N,temperature=T,max_tokens=N,seed=N,prompts=FILE|thinkingbox]`,
`none`).

Judge specs (`--judge`):
    openai:URL#MODEL[,key_env=VAR,timeout=S,retries=N,temperature=T,max_tokens=N,seed=N|none]
                                                          `ChatJudge` (key from VAR, default TBT_JUDGE_API_KEY;
                                                          temperature 0, max_tokens 128, seed 42: the benchmark's)
    synthetic                                             answers every question Yes (`SyntheticJudge`)
    none                                                  no judge: a test that asks one is a system error
Without `--user`: `scripted` for a synthetic policy, else none. Without `--judge`: `TBT_JUDGE_URL` (and `TBT_JUDGE_MODEL`, `TBT_JUDGE_API_KEY`) when set, else
`synthetic` for a synthetic policy, else none.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import httpx

from trainer.core.redact import register as register_secret
from trainer.core.tb_interpret import DEFAULT_FAMILY, Family
from trainer.env.grading.judge import ChatJudge, Judge, JudgeConfig
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.taskformat.tasks import Dataset, load_dataset
from trainer.rollout.config import DEFAULT_DOMAINS, EpisodeConfig, RunSpec  # noqa: F401  (DEFAULT_DOMAINS: re-exported)
from trainer.rollout.episode import EpisodeSetup
from trainer.rollout.http import Endpoint
from trainer.rollout.policy import Policy, SamplingParams, SpecError, no_more, option, split_spec
from trainer.rollout.synthetic import SyntheticJudge, SyntheticPolicy
from trainer.rollout.user import ChatUser, PromptError, ScriptedUser, SimulatedUser, load_prompts



def resolve(path: str) -> Any:
    mod, _, attr = path.partition(":")
    if not attr:
        raise SpecError(f"{path!r}: expected module:attribute")
    return getattr(importlib.import_module(mod), attr)


def make_registry(*, servers: str | None, python: str | None, domains: str | None) -> ServerRegistry:
    """The registry of a servers.yaml (None: none) and the internal domains' import path."""
    found = resolve(domains) if domains else {}
    if servers:
        return ServerRegistry.from_yaml(Path(servers), python=python, domains=found)
    return ServerRegistry(domains=found)


def make_policy(spec: str, *, family: Family = DEFAULT_FAMILY, thinking: bool = True, sampling: SamplingParams | None = None,
                env: Mapping[str, str] | None = None, request_style: str = "thinkingbox") -> Policy:
    """The policy a spec string names (trainer/rollout/policy.py; `tbt run --help` lists the
    options); `sampling` gives the defaults of its sampling options."""
    kind, body, opts = split_spec(spec)
    if kind == "synthetic":
        return SyntheticPolicy.from_options(opts, spec, family=family, thinking=thinking,
                                            sampling=sampling or SamplingParams())
    if kind in ("openai", "tokens"):
        from trainer.rollout import openai_policy

        return openai_policy.from_spec(kind, body, opts, spec, family=family, thinking=thinking, env=env,
                                       sampling=sampling, request_style=request_style)
    if kind == "hf":
        from trainer.rollout.hf_policy import HFPolicy  # torch and transformers: only for hf:

        return HFPolicy.from_options(body, opts, spec, family=family, thinking=thinking, sampling=sampling)
    raise SpecError(f"{spec!r}: unknown policy kind {kind!r} (synthetic, openai, tokens, hf)")


def make_user(spec: str | None, env: Mapping[str, str] | None = None) -> SimulatedUser | None:
    """The user a spec names; None (no --user) means no simulated user: an episode whose agent
    hands the turn over ends with `no_user_llm`, as the reference's without a user model."""
    if spec is None or spec == "none":
        return None
    kind, body, opts = split_spec(spec)
    if kind == "scripted":
        first = opts.pop("first", None)
        no_more(opts, spec, ["first"])
        return ScriptedUser(first)
    if kind == "openai":
        url, _, model = body.partition("#")
        env = os.environ if env is None else env
        key_env = opts.pop("key_env", "TBT_USER_API_KEY")
        ep = Endpoint(url, env.get(key_env) or None, timeout_s=option(opts, "timeout", float, 120.0, spec),
                      retries=option(opts, "retries", int, 2, spec))
        try:
            prompts = load_prompts(opts.pop("prompts", None))
        except PromptError as e:
            raise SpecError(f"{spec!r}: {e}") from None
        user = ChatUser(ep, model, temperature=option(opts, "temperature", float, 0.0, spec),
                        max_tokens=option(opts, "max_tokens", int, 4096, spec),
                        seed=option(opts, "seed", int, None, spec), prompts=prompts)
        no_more(opts, spec, ["key_env", "timeout", "retries", "temperature", "max_tokens", "seed", "prompts"])
        return user
    raise SpecError(f"{spec!r}: unknown user kind {kind!r} (scripted, openai, none)")


def make_judge(spec: str | None, *, synthetic_policy: bool, env: Mapping[str, str] | None = None) -> tuple[Judge, dict[str, Any]]:
    """The judge a spec names, and its identity for records (never a key)."""
    env = os.environ if env is None else env
    if spec is None:
        cfg = JudgeConfig.from_env(dict(env))
        if cfg is not None:
            register_secret(cfg.api_key)
            return ChatJudge(cfg), _chat_identity(cfg)
        spec = "synthetic" if synthetic_policy else "none"
    kind, body, opts = split_spec(spec)
    if kind == "synthetic":
        no_more(opts, spec, [])
        return SyntheticJudge(), {"kind": "synthetic"}
    if kind == "none":
        return Judge(), {"kind": "none"}
    if kind == "openai":
        url, _, model = body.partition("#")
        key_env = opts.pop("key_env", "TBT_JUDGE_API_KEY")
        d = JudgeConfig(url=url, model=model)
        cfg = JudgeConfig(url=url, model=model, api_key=env.get(key_env) or None,
                          timeout_s=option(opts, "timeout", float, 60.0, spec),
                          retries=option(opts, "retries", int, 3, spec),
                          temperature=option(opts, "temperature", float, d.temperature, spec),
                          max_tokens=option(opts, "max_tokens", int, d.max_tokens, spec),
                          seed=option(opts, "seed", lambda v: None if v == "none" else int(v), d.seed, spec))
        no_more(opts, spec, ["key_env", "timeout", "retries", "temperature", "max_tokens", "seed"])
        register_secret(cfg.api_key)  # redacted wherever it would be written (trainer/core/redact.py)
        return ChatJudge(cfg), _chat_identity(cfg)
    raise SpecError(f"{spec!r}: unknown judge kind {kind!r} (openai, synthetic, none)")


def _chat_identity(cfg: JudgeConfig) -> dict[str, Any]:
    where = str(httpx.URL(cfg.url).copy_with(username=None, password=None, query=None))
    return {"kind": "openai", "url": where, "model": cfg.model, "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens, "seed": cfg.seed}


def default_user(user: str | None, *, synthetic_policy: bool) -> str | None:
    """The user spec a run plays: `user`, else scripted for a synthetic policy, else None (no user)."""
    return user if user is not None else ("scripted" if synthetic_policy else None)


def role_names(user: str | None, judge: str | None, judge_identity: Mapping[str, Any], *,
               synthetic_policy: bool) -> tuple[str, str]:
    """The user and judge as a run's identity names them (trainer/formats/identity.py), their
    defaults resolved as `build_setup` resolves them: a judge from the environment is
    `$TBT_JUDGE_URL` (its URL can change without the run changing)."""
    if judge is None:
        kind = judge_identity.get("kind")
        judge = "$TBT_JUDGE_URL" if kind == "openai" else str(kind)
    return default_user(user, synthetic_policy=synthetic_policy) or "none", judge


def load_run_dataset(spec: RunSpec) -> Dataset:
    return load_dataset(spec.dataset, test_list=spec.test_list)


@dataclass
class World:
    """What a run's episodes play against, whatever the policy: the servers, the user, the judge."""

    registry: ServerRegistry
    user: SimulatedUser | None
    judge: Judge
    judge_identity: dict[str, Any]

    def setup(self, agent: Any, policy: Policy, config: EpisodeConfig,
              toolsets: dict[str, Any] | None = None) -> EpisodeSetup:
        """The episodes' setup of a policy in this world (`toolsets`: compiled tool lists to share)."""
        return EpisodeSetup(self.registry, agent, policy, self.user, self.judge, self.judge_identity, config,
                            toolsets=toolsets if toolsets is not None else {})


def build_world(*, user: str | None, judge: str | None, servers: str | None, python: str | None,
                domains: str | None, synthetic_policy: bool) -> World:
    """The world of a run's options (a `RunSpec`'s, or training's `thinkingbox` block's: the same
    names); the user's and judge's defaults as `default_user` and `make_judge` resolve them."""
    user_ = make_user(default_user(user, synthetic_policy=synthetic_policy))
    judge_, judge_id = make_judge(judge, synthetic_policy=synthetic_policy)
    return World(make_registry(servers=servers, python=python, domains=domains), user_, judge_, judge_id)


def build_setup(spec: RunSpec, dataset: Dataset) -> EpisodeSetup:
    """Everything the episodes of a run share, from its spec (raises `SpecError` on a bad spec)."""
    policy = make_policy(spec.policy, family=spec.family, thinking=spec.thinking, sampling=spec.sampling,
                         request_style=spec.config.agent_view)
    world = build_world(user=spec.user, judge=spec.judge, servers=spec.servers, python=spec.python,
                        domains=spec.domains, synthetic_policy=policy.synthetic)
    return world.setup(dataset.agent(spec.agent), policy, spec.config)


async def close_setup(setup: EpisodeSetup) -> None:
    await setup.policy.aclose()
    if setup.user is not None:
        await setup.user.aclose()
    close = getattr(setup.judge, "close", None)
    if close is not None:
        close()
    setup.registry.close()


__all__ = ["DEFAULT_DOMAINS", "RunSpec", "World", "build_setup", "build_world", "close_setup", "default_user", "load_run_dataset", "make_judge",
           "make_policy", "make_registry", "make_user", "resolve", "role_names"]
