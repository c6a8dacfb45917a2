"""A run's options, each declared once, and the one place they are resolved.

- `RunConfig`: what a run plays (the dataset, the policy, the user, the judge, the servers, the
  model family, the sampling file) and its `EpisodeConfig` (budgets, timeouts, the agent view).
- `RunPlan`: how its episodes are played (output, repeats, concurrency, retries, seed, Ray).
- `resolve(RunConfig) -> RunSpec`: the plain, picklable spec every run path plays (`tbt run`,
  probe, eval, the warm start, the quickstart; trainer/rollout/setup.py builds its world).

Each field carries its default, its command-line flags and its help (trainer/rollout/options.py).
The command line builds every command's options from these fields (trainer/run_cli.py `takes`),
and training's `thinkingbox` block is made of the same fields (trainer/verl/env.py `TBConfig`).
This module imports nothing heavy: the command line reads it at start.

`resolve` checks what a field cannot check by its type (the family, the interpreter, the agent
view, the sampling file), reads the framework's config file (`--config`: the policy, user and
judge it names where the run names none), and fills the servers file from the dataset. A bad
value raises `ConfigError` naming the option and the file.
"""

from __future__ import annotations

import shutil
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from trainer.core.tb_interpret import DEFAULT_FAMILY, FAMILIES, Family
from trainer.rollout import agentview
from trainer.rollout.options import option
from trainer.rollout.policy import SamplingParams, stable_seed
from trainer.rollout.sampling import SamplingError, load_sampling

DEFAULT_DOMAINS = "trainer.domains:DOMAINS"

POLICY_HELP = """Policy spec. synthetic[:p=0.7,dist=uniform|bimodal|beta:A:B,map=FILE.yaml,seed=N,ask=BOOL,tokenizer=PATH]
follows the golden actions, deviating with a per-task probability (writes Qwen model text);
openai:URL#MODEL[,temperature=T,top_p=P,max_tokens=N,timeout=S,retries=N,key_env=VAR,token_ids=1,max_context=N,vllm=1]
an OpenAI-compatible chat endpoint running no tool parser (key from $TBT_POLICY_API_KEY or key_env);
tokens:URL#MODEL,tokenizer=PATH[,...] token ids in and out through a completions endpoint (vLLM);
hf:PATH[,temperature=T,max_tokens=N,dtype=float32] a local transformers model on CPU."""
USER_HELP = ("Simulated user spec: scripted[:first=TEXT] (replies from the task's user context), "
             "openai:URL#MODEL[,temperature=T,seed=N,key_env=VAR] (key from $TBT_USER_API_KEY), or none. "
             "Default: scripted for a synthetic policy, else none (an agent that hands the turn over "
             "then ends the episode with no_user_llm).")
JUDGE_HELP = ("Judge spec: openai:URL#MODEL[,key_env=VAR,timeout=S,retries=N], synthetic (answers Yes), none. "
              "Default: $TBT_JUDGE_URL/$TBT_JUDGE_MODEL when set, else synthetic for a synthetic policy, else none.")
FAMILY_HELP = "Model family: hermes (Qwen3) or xml (Qwen3-Coder, Qwen3.5+)."


class ConfigError(ValueError):
    """A run's option that cannot be played (the message names the option)."""


@dataclass
class EpisodeConfig:
    """Per-episode settings shared by every episode of a run. None: no limit."""

    # the agent's generated tokens over the episode
    max_episode_tokens: int | None = option(None, "--max-episode-tokens",
                                            help="Budget: the agent's generated tokens per episode.")
    max_episode_seconds: float | None = option(None, "--max-episode-seconds", help="Budget: wall seconds per episode.")
    # prompt + conversation in tokens (default: the policy's)
    max_context: int | None = option(None, "--max-context", help="Budget: context length in tokens.")
    max_response_tokens: int | None = None  # token path: everything after the prompt (verl's response_length)
    call_timeout: float = option(30.0, "--call-timeout", help="Seconds per tool call (past it: a system error).")
    open_timeout: float = 60.0  # opening a server session
    # untrusted datasets
    isolate_tests: bool = option(False, "--isolate-tests", help="Run test functions in a subprocess.")
    # docs/sandbox.md, knowledge bases
    strip_sources: bool = option(False, "--strip-sources", help="Drop world_state.*.sources.")
    max_agent_turns: int | None = option(200, "--max-agent-turns", min=1, help=(
        "Agent turns of a task that sets no max_agent_sim_turns (default 200; training's thinkingbox.max_agent_turns)."))
    max_empty_turns: int = 3  # empty or reasoning-only turns in a row that are asked again; one more ends it
    agent_view: str = option("thinkingbox", "--agent-view", help=(
        "thinkingbox: the tools and request as the framework sends them (servers' order, titles dropped, "
        "additionalProperties false, max_completion_tokens); plain: the scenario's order and the servers' schemas."))

    def __post_init__(self) -> None:
        if not isinstance(self.max_empty_turns, int) or self.max_empty_turns < 0:
            raise ValueError(f"max_empty_turns must be 0 or more, not {self.max_empty_turns!r}")
        agentview.check_style(self.agent_view)


@dataclass
class RunSpec:
    """A run resolved (`resolve`): plain, picklable data every run path plays (trainer/rollout/setup.py
    builds its world), rebuilt by a Ray worker from `to_dict`."""

    dataset: str
    policy: str
    test_list: str | None = None
    user: str | None = None
    judge: str | None = None
    servers: str | None = None  # a servers.yaml
    python: str | None = None  # the interpreter for {python} in servers.yaml
    domains: str | None = DEFAULT_DOMAINS  # import path of {name: factory}; None: no internal servers
    family: Family = DEFAULT_FAMILY
    thinking: bool = True
    agent: str | None = None
    config: EpisodeConfig = field(default_factory=EpisodeConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)  # the policy's defaults

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """The inverse of `to_dict` (a Ray worker rebuilds the driver's spec)."""
        return cls(**{**d, "config": EpisodeConfig(**d["config"]), "sampling": SamplingParams(**d["sampling"])})


@dataclass
class RunPlan:
    """How a run plays its spec's tasks (the options `tbt run`, `tbt probe`, `tbt eval` and
    `tbt quickstart` share)."""

    # scored records (JSONL), appended; a rerun resumes
    output: Path = option(MISSING, "--output", "-o", dir_okay=False, help="Records (JSONL), appended; resumes.")
    repeat: int = option(1, "--repeat", "-n", min=1, help="Episodes per task.")
    errors_output: Path | None = option(None, "--errors-output", dir_okay=False, help=(
        "System-error attempts (JSONL). Default: OUTPUT's name with .errors.jsonl."))
    concurrency: int = option(8, "--concurrency", "-c", min=1, help="Episodes in flight.")
    retries: int = option(2, "--retries", min=0, help="Re-runs of a system error in this run.")
    seed: int = option(0, "--seed", help="Run seed (each episode's seed derives from it).")
    # a progress bar on stderr: the command line's default, not a library caller's
    progress: bool = option(False, "--progress/--no-progress", cli_default=True, help="Show the progress bar.")
    use_ray: bool = option(False, "--ray", help="Spread episodes over a Ray cluster (also when RAY_ADDRESS is set).")
    ray_workers: int | None = option(None, "--ray-workers", min=1, help="Ray actors (default: the cluster's CPUs).")
    only: frozenset[str] | None = None  # play only these uids
    skip_invalid: bool = option(False, "--skip-invalid", help=(
        "Run the tasks that load when some dataset entries do not (listed); without it any load error is exit 2."))
    skip_judged: bool = option(False, "--skip-judged", help=(
        "With no judge (--judge none), leave out the tasks whose test asks one (listed) instead of refusing the run."))
    preflight: bool = True  # one cheap request to each endpoint before the first episode


@dataclass
class RunConfig:
    """What a run plays: the dataset, the policy, the user, the judge, the servers, the model
    family and sampling, and the episode's settings."""

    dataset: Path = option(None, argument=True, exists=True, file_okay=False, help="ThinkingBox dataset directory.")
    policy: str | None = option(None, "--policy", help=POLICY_HELP)
    config: Path | None = option(None, "--config", exists=True, dir_okay=False, help=(
        "The ThinkingBox framework's config.yaml (tb infer --config): its orchestrator.agent_model, user_model and "
        "judge_model give --policy, --user and --judge (with their sampling and keys; an option given here wins). "
        "docs/evaluation.md."))
    test_list: Path | None = option(None, "--test-list", exists=True, dir_okay=False, help="Only the tasks of this list.")
    user: str | None = option(None, "--user", help=USER_HELP)
    judge: str | None = option(None, "--judge", help=JUDGE_HELP)
    servers: Path | None = option(None, "--servers", exists=True, dir_okay=False, help=(
        "ThinkingBox servers.yaml; servers not in it are our in-process domains. "
        "Default: DATASET/servers.yaml if present."))
    python: str | None = option(None, "--python", help="Interpreter for {python} in servers.yaml.")
    family: Family = option(DEFAULT_FAMILY, "--family", help=FAMILY_HELP)
    thinking: bool = option(True, "--thinking/--no-thinking", help="Reasoning on (Qwen enable_thinking).")
    agent: str | None = option(None, "--agent", help="Agent name (default: the dataset's only one).")
    sampling: Path | None = option(None, "--sampling", exists=True, dir_okay=False, help=(
        "Sampling config YAML (temperature, top_k, top_p, max_turn_tokens): the policy's defaults. "
        "Default: configs/sampling.yaml, the one training samples with; a policy spec's options override."))
    episode: EpisodeConfig = option(factory=EpisodeConfig)


def resolve(cfg: RunConfig, *, notify: Callable[[str], None] | None = None) -> RunSpec:
    """The `RunSpec` a run plays (module docstring); `notify` gets the config file's notes."""
    policy, user, judge = cfg.policy, cfg.user, cfg.judge
    if cfg.config is not None:
        from trainer.formats.tbconfig import TBConfigError, read_tb_config

        try:
            c = read_tb_config(cfg.config)
        except TBConfigError as e:
            raise ConfigError(f"--config {e}") from None
        for note in c.notes:
            if notify is not None:
                notify(f"--config {cfg.config}: {note}")
        policy, user, judge = policy or c.policy, user or c.user, judge or c.judge
    elif policy is None:
        raise ConfigError("give --policy SPEC (or --config thinkingbox.yaml)")
    if cfg.episode.agent_view not in agentview.STYLES:
        raise ConfigError(f"--agent-view {cfg.episode.agent_view!r}: expected {' or '.join(agentview.STYLES)}")
    if cfg.family not in FAMILIES:
        raise ConfigError(f"--family {cfg.family!r}: expected {' or '.join(FAMILIES)}")
    if cfg.python is not None and shutil.which(cfg.python) is None:
        raise ConfigError(f"--python {cfg.python}: no such executable")
    try:
        sampling = load_sampling(cfg.sampling)
    except SamplingError as e:
        raise ConfigError(f"--sampling {e}") from None
    default_servers = cfg.dataset / "servers.yaml"
    servers = cfg.servers or (default_servers if default_servers.is_file() else None)
    return RunSpec(dataset=str(cfg.dataset.resolve()), policy=policy,
                   test_list=str(cfg.test_list.resolve()) if cfg.test_list else None, user=user, judge=judge,
                   servers=str(servers.resolve()) if servers else None, python=cfg.python, family=cfg.family,
                   thinking=cfg.thinking, agent=cfg.agent, config=cfg.episode, sampling=sampling)


# --- seeds: every episode's seed derives from a run seed, the same in every process ----------

def episode_seed(run_seed: int, uid: str, repetition: int) -> int:
    """An episode's seed: the same on every attempt, so a re-run replays the same sampling."""
    return stable_seed("episode", run_seed, uid, repetition)


def step_seed(run_seed: int, step: int) -> int:
    """The run seed of training step `step` (each step's groups draw new episode seeds)."""
    return stable_seed("step", run_seed, step)


def group_seed(run_seed: int, group: str) -> int:
    """The run seed of a training group whose step is not known yet (verl's group uid)."""
    return stable_seed("group", run_seed, group)


def dispatch_seed(base: int, dispatch: int) -> int:
    """A run seed mixed with a row's dispatch number: a refilled group draws new episodes."""
    return stable_seed("dispatch", base, dispatch)


__all__ = ["ConfigError", "DEFAULT_DOMAINS", "EpisodeConfig", "FAMILY_HELP", "JUDGE_HELP", "POLICY_HELP", "RunConfig",
           "RunPlan", "RunSpec", "USER_HELP", "dispatch_seed", "episode_seed", "group_seed", "resolve", "step_seed"]
