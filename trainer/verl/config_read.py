"""The launch's composition (trainer/verl/launch.py, points 1 to 3 of its docstring): a project
config read (`read_config`: `extends:`, `${env:NAME[,default]}`, `prepare:`, `env:`, `smoke:`,
`entrypoint:`, `sampling:`), the sampling config mapped onto verl's keys, the overrides composed
with the entry's verl config offline (`compose`) and preflighted: `plan`, which the launch, the
rehearsal's own command line (trainer/verl/rehearsal.py) and the node check
(trainer/verl/node_check.py) share. Apart from the launch, so that those import it without
importing the launch, which imports them.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from trainer.rollout.sampling import SAMPLING_FILE, SamplingError, load_sampling
from trainer.verl.preflight import ENTRIES, ROOT, Check, Entry, LaunchError, cfg_get, on_cluster, preflight, render, unset_names

DEFAULT_CONFIG = ROOT / "configs" / "train_single_node.yaml"
SAMPLING = SAMPLING_FILE
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")
LEGACY = {"custom_reward_function": "reward.custom_reward_function"}
PREPARE, ENV, SMOKE, ENTRYPOINT = "@prepare", "@env", "@smoke", "@entrypoint"  # a config's `prepare:`, `env:`, `smoke:`, `entrypoint:`
SAMPLING_KEY = "@sampling"  # a config's `sampling:` (another sampling file than configs/sampling.yaml)
_UNSET = "<unset:{}>"  # what a `${env:NAME}` without a default reads as while NAME is not set (preflight names it)


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
    return {**{f"actor_rollout_ref.rollout.{k}": v for k, v in s.to_verl().items()},
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
    from trainer.verl.tracker import tracker_env

    extra = cluster_env(cfg, env, {**tracker_env(cfg, env), **extras.env})
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
    if not variables or not on_cluster(cfg, env):
        return []
    quoted = {k: "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'" for k, v in variables.items()}  # strings, as Ray wants (2 is not "2")
    return [f"+{RUNTIME_ENV}.{k}={q}" for k, q in quoted.items() if cfg_get(cfg, f"{RUNTIME_ENV}.{k}") is None]
