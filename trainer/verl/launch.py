"""The training launch: verl's own Hydra configuration composed offline, checked, then run.

    scripts/run_train.sh [overrides...]          (this module: python -m trainer.verl.launch)

1. Overrides, in order (later wins): the project config (`CONFIG`, default
   configs/train_single_node.yaml: dotted keys, `extends:` read first, `${env:NAME[,default]}`
   filled from the environment), the sampling config (configs/sampling.yaml, mapped onto
   `actor_rollout_ref.rollout.*` and `+thinkingbox.max_turn_tokens`: the one sampling config that
   training and evaluation share), then the command line (verl's syntax; new keys need `+`).
2. They are composed with verl 0.9.0's `ppo_trainer` config by Hydra's compose API, offline: a
   mistyped key fails here and is named; the legacy top-level `custom_reward_function.*` keys,
   which verl 0.9.0 silently ignores, are refused with the key to use instead.
3. Preflight (trainer/verl/preflight.py `preflight`), every rule checked and every problem named in one run: every
   `${env:NAME}` without a default that a surviving key needs is set (all of them listed at once;
   a command-line override of the key makes the variable unneeded); the input files exist (train
   and validation files, a local model path, the agent-loop config, a custom reward function's
   file; relative paths are read from the repository root, where the launch runs; a file under a
   directory the config's `prepare:` step is given is checked after that step); on several nodes
   the data and model paths are absolute; GPUs per node vs config (`NODE_GPUS`, else
   `nvidia-smi`), tensor / sequence parallel sizes divide the world, `train_batch_size x n`
   divides across ranks, one log-prob micro-batch size set (rollout and ref), the checkpoint
   directory absolute (and not node-local on several nodes); with `trainer.resume_mode=auto` and a
   `latest_checkpointed_iteration.txt` there, the step it names verified as `tbt checkpoint verify`
   does and saved on this run's world size (`resume_checks`); this node's NVIDIA driver new enough
   for the CUDA build of the installed torch (`NODE_DRIVER`, else `nvidia-smi`; skipped where
   neither says); the endpoint variables of openai:
   user / judge specs set (their values never printed); no `synthetic` judge (it answers Yes to
   every question) and no `scripted` user (the task's user context, no model) outside a smoke
   config: one whose top level says `smoke: true` (configs/cpu_smoke.yaml; inherited through
   `extends:`, read and removed by the launch, never passed to verl).
   Two kinds of check (`Check.site`): the *inputs of the launch site*, provided where and when the
   run is launched, not faults of the config (the variables set, every file exists, no scripted
   user / synthetic judge outside a smoke config, which a TBT_USER_SPEC / TBT_JUDGE_SPEC fixes,
   the endpoint variables, the checkpoint an automatic resume would load), and the *config checks*, everything else (the topology, the batch and
   micro-batch sizes, the checkpoint directory, absolute paths on several nodes, the fully-async
   checks): a config that can never run. A failed check is a `FAIL` line, except an input under
   `DRY_RUN=true`, a `need` line (point 6).
4. The patches of trainer/verl/patches: their state is printed; a real launch applies any that is
   not in force (trainer/verl/patching.py), so a re-sync that restored verl's stock files cannot
   make it train on unpatched verl.
5. A config may name `env:` (variables set for the run) and `prepare:` (argument lists run as
   `python ARGS` before it, e.g. building a local model: configs/cpu_smoke.yaml); both are printed.
   On a Ray cluster the launch did not start (`RAY_ADDRESS`, or `trainer.nnodes` > 1) the `env:`
   variables also go to every Ray worker, as `+ray_kwargs.ray_init.runtime_env.env_vars.NAME`
   overrides (`cluster_env`): those workers run in their node's `ray start` environment.
   Both add to those of the config it extends; `inherit_prepare: false` drops the inherited
   `prepare:` steps (configs/laptop_grpo.yaml: its model and pool are not the smoke's).
   `SKIP_PREPARE=true` says the caller ran them already (`tbt quickstart --train` does, to count
   the pool): they are printed as skipped and not run again; what they make is checked all the same.
   Its top-level `sampling: FILE` (read from the repository root; inherited through `extends:`)
   replaces configs/sampling.yaml as the sampling config of step 1 (configs/laptop_grpo.yaml:
   configs/sampling_laptop.yaml, which `tbt run --sampling` reads too).
   Its top-level `entrypoint:` picks verl's trainer (`ENTRIES`; inherited through `extends:`, read
   and removed by the launch): `ppo` (default: `verl.trainer.main_ppo`, the colocated synchronous
   trainer, composed from verl's `ppo_trainer` config) or `fully_async`
   (`verl.experimental.fully_async_policy.fully_async_main`, composed from its
   `fully_async_ppo_trainer` config: rollout and trainer on their own GPUs, `rollout.nnodes x
   rollout.n_gpus_per_node` and `trainer.nnodes x trainer.n_gpus_per_node`; configs/async_*.yaml).
   For it the GPU split is printed after the command, and the preflight checks the split (both
   pools' GPUs on each node, tensor parallel size in the rollout pool, the trainer's mini-batch
   across its ranks) and what verl's fully-async trainer asserts only after Ray is up, plus what
   our agent loop needs of it (`fully_async_checks`).
6. `DRY_RUN` (`dry_run`): empty, `false`, `0` or `no` is a real launch: any failed check is a `FAIL`
   line, then one `error:` line naming them all, exit 1; then the endpoints must answer, and the
   command runs against `RAY_ADDRESS`. `true` (`1`, `yes`): print the command (`python -m
   verl.trainer.main_ppo`, or the config's entrypoint) and every resolved override, one per line,
   secrets redacted, the preflight and the patches, and start nothing (no Ray, no GPU, no server,
   no model): a failed config check still fails it (`FAIL`, exit 1), a failed input of the launch
   site is a `need` line, and the run ends with `# DRY_RUN: nothing started (...)` and one
   `# a launch here would stop until: ...` line naming those inputs, exit 0. `strict`: the same
   dry run, failing (`FAIL`, exit 1, as a real launch) on every failed check, inputs included:
   the gate to run on the launch node just before launching. Any other value: exit 2, named.
   Where the gpu extra is installed (vLLM importable), `strict` also runs the rehearsal
   (trainer/verl/rehearsal.py, in a child process): the actor's model config and a tiny model of
   its architecture with the configured attention, the weight-sync backend, verl's vLLM server
   arguments through vLLM's parser, the compiled kernels the config names; its checks are printed
   after the preflight's and fail the run as they do. Without the gpu extra, or under `true`, a
   `# rehearsal: skipped (...)` line says why.
7. The node checks (trainer/verl/nodes.py), where the run goes to a Ray cluster the launch did not
   start (`RAY_ADDRESS` set, or `trainer.nnodes` > 1): after the prepare: steps, one Ray task on
   every alive node checks verl and its patches (each patched file as this node's), the process
   hooks, every input path (the prepared parquet's datasets too), the checkpoint directory shared
   (a marker written here, read there) and the user / judge endpoints from that node. A node that
   fails is a `FAIL` line naming it (IP and Ray node id), and nothing starts: exit 1. A dry run
   prints what would be checked.
8. Before verl starts, what it will replay is moved aside (trainer/verl/rollback.py): the records
   and metrics lines a killed attempt wrote for the steps after the one it resumes from go to
   `records/rolled_back/STAMP/` and `METRICS.rolled_back.jsonl` (fully-async: also the episodes
   of the prompts the checkpoint had in flight, which the rollouter plays again), and a torn last
   record line is cut, so a resumed run's files hold each step once. Printed as
   `# resume from step K: ...`.

Secrets: values of variables whose names hold KEY, TOKEN, SECRET or PASSWORD, and the user
info and query of every URL, never appear in the output.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from trainer.core.redact import redact as core_redact
from trainer.rollout.sampling import SAMPLING_FILE, SamplingError, load_sampling
from trainer.verl.preflight import (Check, LaunchError, cfg_get, file_checks, gpu_split, openai_endpoints, preflight,
                                    render, unset_names)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "configs" / "train_single_node.yaml"
SAMPLING = SAMPLING_FILE
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)
LEGACY = {"custom_reward_function": "reward.custom_reward_function"}
PREPARE, ENV, SMOKE, ENTRYPOINT = "@prepare", "@env", "@smoke", "@entrypoint"  # a config's `prepare:`, `env:`, `smoke:`, `entrypoint:`
SAMPLING_KEY = "@sampling"  # a config's `sampling:` (another sampling file than configs/sampling.yaml)
_UNSET = "<unset:{}>"  # what a `${env:NAME}` without a default reads as while NAME is not set (preflight names it)
UV_RAY_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"  # Ray's `uv run` runtime-env hook (main: off for the launch)


@dataclass(frozen=True)
class Entry:
    """A verl trainer the launch runs: its module, and the Hydra config (under the verl package)
    its `@hydra.main` composes, which the launch composes offline too."""

    module: str
    config_dir: tuple[str, ...]
    config_name: str
    split: bool = False  # rollout and trainer on their own GPUs (rollout.*, async_training.*)
    # where its config's `hydra.searchpath` points (`pkg://verl.trainer.config`), given to the
    # offline compose as a directory: resolving pkg:// would import all of verl (torch) first
    searchpath: tuple[str, ...] | None = None


ENTRIES = {"ppo": Entry("verl.trainer.main_ppo", ("trainer", "config"), "ppo_trainer"),
           "fully_async": Entry("verl.experimental.fully_async_policy.fully_async_main",
                                ("experimental", "fully_async_policy", "config"), "fully_async_ppo_trainer", split=True,
                                searchpath=("trainer", "config"))}


def verl_dir() -> Path:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError("verl is not installed in this environment (uv sync)")
    return Path(list(spec.submodule_search_locations)[0])


def verl_config_dir(entry: Entry = ENTRIES["ppo"]) -> Path:
    return verl_dir().joinpath(*entry.config_dir)


def _fill_env(value: Any, env: Mapping[str, str], where: str) -> Any:
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in env and env[name] != "":
            return env[name]
        if default is None:
            return _UNSET.format(name)  # named by the preflight, with every other unset variable
        return default

    return _ENV.sub(sub, value)


def _flag(data: dict[str, Any], key: str, path: Path) -> bool | None:
    """A config's top-level true/false key, popped from `data` (None when absent)."""
    if key not in data:
        return None
    value = data.pop(key)
    if not isinstance(value, bool):
        raise LaunchError(f"{path}: {key}: expected true or false, got {value!r}")
    return value


def read_config(path: Path, env: Mapping[str, str], seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The dotted overrides of a project config (its `extends:` first)."""
    if path in seen:
        raise LaunchError(f"{path}: extends itself (via {' -> '.join(map(str, seen))})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise LaunchError(f"CONFIG {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise LaunchError(f"{path}: not YAML: {e}") from None
    if not isinstance(data, dict):
        raise LaunchError(f"{path}: expected a mapping of dotted keys to values")
    out: dict[str, Any] = {}
    base = data.pop("extends", None)
    if base:
        out.update(read_config((path.parent / base).resolve(), env, seen + (path,)))
    prepare, variables = data.pop("prepare", None), data.pop("env", None)
    if _flag(data, "inherit_prepare", path) is False:
        out.pop(PREPARE, None)  # the steps of the configs it extends are not this run's
    smoke = _flag(data, "smoke", path)
    if smoke is not None:
        out[SMOKE] = smoke
    if "entrypoint" in data:
        entry = data.pop("entrypoint")
        if entry not in ENTRIES:
            raise LaunchError(f"{path}: entrypoint: expected one of {', '.join(ENTRIES)}, got {entry!r}")
        out[ENTRYPOINT] = entry
    if "sampling" in data:
        sampling = data.pop("sampling")
        if not isinstance(sampling, str) or not sampling:
            raise LaunchError(f"{path}: sampling: expected the path of a sampling file, got {sampling!r}")
        out[SAMPLING_KEY] = sampling if Path(sampling).is_absolute() else str(ROOT / sampling)
    if prepare is not None:
        if not isinstance(prepare, list) or not all(isinstance(c, list) and c for c in prepare):
            raise LaunchError(f"{path.name}: prepare: expected a list of argument lists (run with this Python)")
        out[PREPARE] = [*out.get(PREPARE, []), *[[str(_fill_env(a, env, f"{path.name}: prepare")) for a in c] for c in prepare]]
    if variables is not None:
        if not isinstance(variables, dict):
            raise LaunchError(f"{path.name}: env: expected a mapping of variable names to values")
        out[ENV] = {**out.get(ENV, {}), **{str(k): str(_fill_env(v, env, f"{path.name}: env.{k}")) for k, v in variables.items()}}
    for k, v in data.items():
        out[str(k)] = _fill_env(v, env, f"{path.name}: {k}")
    return out


def sampling_overrides(path: Path = SAMPLING) -> dict[str, Any]:
    """The sampling config as verl overrides: the same `SamplingParams` `tbt eval` samples with."""
    try:
        s = load_sampling(path)
    except SamplingError as e:
        raise LaunchError(str(e)) from None
    return {"actor_rollout_ref.rollout.temperature": s.temperature, "actor_rollout_ref.rollout.top_p": s.top_p,
            "actor_rollout_ref.rollout.top_k": s.top_k if s.top_k is not None else -1,
            "+thinkingbox.max_turn_tokens": s.max_tokens}




def overrides_from(config: Mapping[str, Any], cli: Sequence[str]) -> list[str]:
    """Hydra override strings: the config's (each key once, later wins) then the command line's."""
    merged = dict(config)
    for arg in cli:
        key, eq, value = arg.partition("=")
        if not eq:
            raise LaunchError(f"override {arg!r}: expected key=value")
        merged.pop(key.lstrip("+"), None)
        merged.pop("+" + key.lstrip("+"), None)
        merged[key] = value
    for key in merged:
        root = key.lstrip("+~").split(".")[0]
        if root in LEGACY:
            raise LaunchError(f"override {key}: verl 0.9.0 ignores the legacy top-level {root}.* keys; "
                              f"use {LEGACY[root]}.{key.lstrip('+~').split('.', 1)[-1]}")
    given = {a.partition("=")[0] for a in cli}
    return [f"{k}={v}" if k in given else f"{k}={_quoted(render(v))}" for k, v in merged.items()]


_PLAIN = re.compile(r"^[A-Za-z0-9_./\-+@]*$|^\[.*\]$|^\{.*\}$")


def _quoted(v: str) -> str:
    """A config value as one Hydra override value (quoted when it holds `,` `:` `#` and the like,
    which the override grammar reads as sweeps or interpolations)."""
    if _PLAIN.match(v):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def compose(overrides: list[str], entry: Entry = ENTRIES["ppo"]) -> Any:
    """The entry's verl config (`ppo_trainer`) with the overrides, composed offline (a bad key is named)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    search = [f"hydra.searchpath=[file://{verl_dir().joinpath(*entry.searchpath)}]"] if entry.searchpath else []
    try:
        with initialize_config_dir(config_dir=str(verl_config_dir(entry)), version_base=None):
            return hydra_compose(entry.config_name, overrides=[*search, *overrides])
    except (HydraException, OmegaConfBaseException) as e:
        raise LaunchError(f"verl's config rejects an override: {str(e).splitlines()[0]}") from None


def redact(text: str, env: Mapping[str, str]) -> str:
    """The one redaction (trainer/core/redact.py) over `env`'s secrets too, and URL queries."""
    for name, value in env.items():
        if value and len(value) >= 4 and _SECRET_NAME.search(name):
            text = text.replace(value, "[redacted]")
    text = core_redact(text)
    text = re.sub(r"(?<=://)[^/@\s#]+@", "[redacted]@", text)  # user info of a URL
    return re.sub(r"(https?://[^\s?#]+)\?[^\s#]*", r"\1?[redacted]", text)  # its query


@dataclass
class Extras:
    prepare: list[list[str]]  # argument lists, each run as `python ARGS...` before the launch
    env: dict[str, str]  # variables set for the run (and so for a local Ray's workers)
    entry: Entry = ENTRIES["ppo"]  # the config's `entrypoint:`


def prepare_dirs(prepare: Sequence[Sequence[str]]) -> list[str]:
    """The absolute paths a config's prepare: steps are given (what they make lies under them)."""
    return [str(Path(a)) for c in prepare for a in c if a.startswith("/")]

def missing_variables(config: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, list[str]]:
    """{variable: [the keys that need it]} over the final overrides and the config's env:/prepare:."""
    need: dict[str, list[str]] = {}
    for o in overrides:
        key, _, value = o.partition("=")
        for name in unset_names(value):
            need.setdefault(name, []).append(key.lstrip("+~"))
    for k, v in (config.get(ENV) or {}).items():
        for name in unset_names(v):
            need.setdefault(name, []).append(f"env.{k}")
    for c in config.get(PREPARE) or []:
        for name in unset_names(c):
            need.setdefault(name, []).append("prepare")
    return need


def plan(cli: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], Any, list[Check], Extras]:
    config_path = Path(env.get("CONFIG") or DEFAULT_CONFIG)
    if not config_path.is_absolute():
        config_path = (Path.cwd() / config_path).resolve()
    config = read_config(config_path, env)
    sampling = Path(config.pop(SAMPLING_KEY, SAMPLING))
    config = {**config, **sampling_overrides(sampling)}
    smoke = bool(config.pop(SMOKE, False))
    entry = ENTRIES[config.pop(ENTRYPOINT, "ppo")]
    overrides = overrides_from({k: v for k, v in config.items() if k not in (PREPARE, ENV)}, cli)
    missing = missing_variables(config, overrides)
    extras = Extras(config.pop(PREPARE, []), config.pop(ENV, {}), entry)
    try:
        cfg = compose(overrides, entry)
    except LaunchError as e:
        if missing:
            raise LaunchError(f"variables not set: {', '.join(missing)}; and {e}") from None
        raise
    extra = cluster_env(cfg, env, extras.env)
    if extra:
        overrides = [*overrides, *extra]
        cfg = compose(overrides, entry)
    return overrides, cfg, preflight(cfg, {**env, **extras.env}, missing=missing, smoke=smoke,
                                     made_by=prepare_dirs(extras.prepare), entry=entry), extras


RUNTIME_ENV = "ray_kwargs.ray_init.runtime_env.env_vars"  # what verl's ray.init gives every Ray worker


def cluster_env(cfg: Any, env: Mapping[str, str], variables: Mapping[str, str]) -> list[str]:
    """On a Ray cluster the launch did not start (`RAY_ADDRESS`, or `trainer.nnodes` > 1), the
    overrides that give the config's `env:` to every Ray worker through verl's runtime env: the
    workers of such a cluster run in the environment each node's `ray start` had, not the launch's
    (a local Ray's workers inherit it). A variable the config already sets there is kept."""
    from trainer.verl.nodes import on_cluster

    if not variables or not on_cluster(cfg, env):
        return []
    quoted = {k: "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'" for k, v in variables.items()}  # strings, as Ray wants (2 is not "2")
    return [f"+{RUNTIME_ENV}.{k}={q}" for k, q in quoted.items() if cfg_get(cfg, f"{RUNTIME_ENV}.{k}") is None]


FALSE_WORDS, TRUE_WORDS = ("", "0", "false", "no"), ("1", "true", "yes")  # an environment switch's values
DRY_RUNS = {**dict.fromkeys(FALSE_WORDS),  # a real launch
            **dict.fromkeys(TRUE_WORDS, "true"),  # a dry run: inputs of the launch site may be missing
            "strict": "strict"}  # a dry run that fails on every failed check, those inputs included


def dry_run(env: Mapping[str, str]) -> str | None:
    """`DRY_RUN`: None (a real launch), "true" or "strict" (module docstring, point 6)."""
    value = env.get("DRY_RUN", "")
    if value.lower() not in DRY_RUNS:
        raise LaunchError(f"DRY_RUN={value}: expected true, strict or false")
    return DRY_RUNS[value.lower()]


def skip_prepare(env: Mapping[str, str]) -> bool:
    """`SKIP_PREPARE` (module docstring, point 5): true when the caller ran the prepare: steps."""
    value = env.get("SKIP_PREPARE", "")
    if value.lower() not in FALSE_WORDS + TRUE_WORDS:
        raise LaunchError(f"SKIP_PREPARE={value}: expected true or false")
    return value.lower() in TRUE_WORDS


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip() + "\n\nExamples: scripts/run_train.sh --help")
        return 0
    try:
        mode, skip = dry_run(env), skip_prepare(env)
        overrides, cfg, checks, extras = plan(argv, env)
    except LaunchError as e:
        print(redact(f"error: {e}", env), file=sys.stderr)
        return 2
    lines = [f"python -m {extras.entry.module} \\"] + [f"    {o} \\" for o in overrides[:-1]] + [f"    {overrides[-1]}"]
    print(redact("\n".join(["# command", *lines]), env))
    if extras.entry.split:
        print(redact(f"# GPUs (split): {gpu_split(cfg)}", env))
    if extras.env or extras.prepare:
        print("# environment and preparation (the config's env: and prepare:)")
        for k, v in extras.env.items():
            print(redact(f"{k}={v}", {**env, **extras.env}))
        for c in extras.prepare:
            print(redact("python " + " ".join(c) + ("   (skipped: SKIP_PREPARE, run by the caller)" if skip else ""), env))
    dry, lenient = mode is not None, mode == "true"  # DRY_RUN=true: inputs of the launch site may be missing
    print("# preflight")
    for c in checks:
        print(redact(c.line(lenient), env))
    if dry:
        checks = checks + rehearsal(cfg, mode, {**env, **extras.env})
    needed = [c.brief or c.rule for c in checks if not c.ok and lenient and c.site]  # the `need` lines
    failed = [c.brief or c.rule for c in checks if not c.ok and not (lenient and c.site)]  # the `FAIL` lines
    if failed:
        also = f" (a launch here would also need: {'; '.join(needed)})" if needed else ""
        print(redact(f"error: preflight failed, {len(failed)} problem(s) (the FAIL lines above): "
                     + "; ".join(failed) + f"; nothing was started{also}", env), file=sys.stderr)
        return 1
    from trainer.verl.patching import PatchError, apply_all, site_of_installed, states

    try:
        site = site_of_installed()
        print("# verl patches (trainer/verl/patches)" + ("" if dry else ": applied before launching"))
        for st in (states(site) if dry else apply_all(site)):
            note = "" if st.state == "applied" else "  (applied by the launch itself, or: python scripts/prepare_verl.py --install)"
            print(f"{st.state:<8}  {st.patch.path.name}{note}")
    except PatchError as e:
        print(f"error: verl: {e}", file=sys.stderr)
        return 2
    if dry:
        node_plan(cfg, env)
        print("# DRY_RUN: nothing started (no Ray, no GPU, no server, no model)")
        if needed:
            print(redact(f"# a launch here would stop until: {'; '.join(needed)} "
                         "(the need lines above; DRY_RUN=strict checks these too)", env))
        return 0
    down = dead_endpoints(cfg)
    if down:
        print(redact("error: endpoint(s) not answering: " + "; ".join(down), env), file=sys.stderr)
        return 1
    env.update(extras.env)
    env.setdefault("WANDB_MODE", "offline")  # wandb logs locally unless the user asks for online
    # under `uv run` (`uv run tbt quickstart --train`), Ray's uv hook would rewrite verl's runtime
    # env to start every worker through `uv run` in a packaged working directory, and fails on the
    # working_dir verl leaves unset (TypeError: path_or_uri must be a string): the workers run
    # this interpreter, as they do under scripts/run_train.sh from a shell
    env.setdefault(UV_RAY_HOOK, "0")
    for c in [] if skip else extras.prepare:
        rc = subprocess.call([sys.executable, *c], env=env, cwd=str(ROOT))
        if rc != 0:
            print(f"error: prepare step failed (exit {rc}): python {' '.join(c)}", file=sys.stderr)
            return rc
    absent = [c for c in file_checks(cfg) if not c.ok]  # what the prepare steps were to make
    if absent:
        for c in absent:
            print(redact(c.line(), env))
        print("error: the prepare: step did not make " + "; ".join(c.rule for c in absent), file=sys.stderr)
        return 1
    if node_checks(cfg, env):
        return 1
    roll_back_replayed(cfg, env)
    if env.get("VERL_FILE_LOGGER_PATH"):  # verl's file logger opens it without making its folder
        Path(env["VERL_FILE_LOGGER_PATH"]).parent.mkdir(parents=True, exist_ok=True)
    return subprocess.call([sys.executable, "-m", extras.entry.module, *overrides], env=env, cwd=str(ROOT))


def rehearsal(cfg: Any, mode: str, env: Mapping[str, str]) -> list[Check]:
    """The rehearsal's checks (module docstring, point 6), printed: run under DRY_RUN=strict where
    the gpu extra is installed; otherwise one line saying why not, and no checks."""
    from trainer.verl.rehearsal import gpu_extra_missing, run_isolated

    missing = gpu_extra_missing()
    if mode != "strict" or missing:
        print(f"# rehearsal: skipped ({missing or 'DRY_RUN=strict runs it'})")
        return []
    print("# rehearsal (trainer/verl/rehearsal.py): what a GPU start-up does first, run here without a GPU")
    checks = run_isolated(cfg, env)
    for c in checks:
        print(redact(c.line(), env))
    return checks


def roll_back_replayed(cfg: Any, env: Mapping[str, str]) -> None:
    """Point 8: what the relaunch replays, moved aside (trainer/verl/rollback.py), printed."""
    from trainer.verl.rollback import inflight_groups, resumed_step, roll_back

    ckpt = str(cfg_get(cfg, "trainer.default_local_dir", "") or "")
    if not ckpt:
        return
    step = resumed_step(cfg, Path(ckpt))
    if step is None:
        print("# resume: the step resumed from is not known here: records and metrics left as they are")
        return
    records = None
    if cfg_get(cfg, "thinkingbox.records", True) is not False:
        records = Path(str(cfg_get(cfg, "thinkingbox.records_dir", None) or Path(ckpt) / "records"))
    metrics = Path(env["VERL_FILE_LOGGER_PATH"]) if env.get("VERL_FILE_LOGGER_PATH") else None
    done = roll_back(records, metrics, step, val_before_train=bool(cfg_get(cfg, "trainer.val_before_train", True)),
                     replayed_groups=inflight_groups(Path(ckpt), step))
    for line in done.lines():
        print(f"# resume from step {step}: {line}", flush=True)


def node_plan(cfg: Any, env: Mapping[str, str]) -> None:
    """DRY_RUN: what the node checks (point 7) would check on every node, where the run goes to a cluster."""
    from trainer.verl.nodes import describe, on_cluster, spec_of

    if not on_cluster(cfg, env):
        print("# nodes: a local Ray started by verl (no RAY_ADDRESS, trainer.nnodes=1): no node checks")
        return
    print("# nodes: before verl starts, a launch checks on every node of the Ray cluster (trainer/verl/nodes.py):")
    for line in describe(spec_of(cfg)):
        print(redact(f"would check  {line}", env))


def node_checks(cfg: Any, env: Mapping[str, str]) -> bool:
    """The node checks (point 7) where the run goes to a cluster, printed; True when one failed."""
    from trainer.verl.nodes import cluster_checks, on_cluster

    if not on_cluster(cfg, env):
        return False
    print("# nodes: every node of the Ray cluster, before verl starts (trainer/verl/nodes.py)", flush=True)
    checks = cluster_checks(cfg, env)
    for c in checks:
        print(redact(c.line(), env), flush=True)
    failed = [c.brief for c in checks if not c.ok]
    if failed:
        print(redact(f"error: {len(failed)} node(s) not ready (the FAIL lines above): {'; '.join(failed)}; "
                     "nothing was started", env), file=sys.stderr)
    return bool(failed)


def dead_endpoints(cfg: Any, timeout: float = 5.0) -> list[str]:
    """The openai: user / judge endpoints that do not answer GET /models."""
    import httpx

    out = []
    for role, url, _ in openai_endpoints(cfg):
        try:
            httpx.get(url + "/models", timeout=timeout)
        except httpx.HTTPError as e:
            out.append(f"{role} {url}: {type(e).__name__}")
    return out


if __name__ == "__main__":
    sys.exit(main())
