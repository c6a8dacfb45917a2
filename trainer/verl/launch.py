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
3. Preflight (`preflight`), every rule checked and every problem named in one run: every
   `${env:NAME}` without a default that a surviving key needs is set (all of them listed at once;
   a command-line override of the key makes the variable unneeded); the input files exist (train
   and validation files, a local model path, the agent-loop config, a custom reward function's
   file; relative paths are read from the repository root, where the launch runs; a file under a
   directory the config's `prepare:` step is given is checked after that step); on several nodes
   the data and model paths are absolute; GPUs per node vs config (`NODE_GPUS`, else
   `nvidia-smi`), tensor / sequence parallel sizes divide the world, `train_batch_size x n`
   divides across ranks, one log-prob micro-batch size set (rollout and ref), the checkpoint
   directory absolute (and not node-local on several nodes), the endpoint variables of openai:
   user / judge specs set (their values never printed); no `synthetic` judge (it answers Yes to
   every question) and no `scripted` user (the task's user context, no model) outside a smoke
   config: one whose top level says `smoke: true` (configs/cpu_smoke.yaml; inherited through
   `extends:`, read and removed by the launch, never passed to verl).
   Two kinds of check (`Check.site`): the *inputs of the launch site*, provided where and when the
   run is launched, not faults of the config (the variables set, every file exists, no scripted
   user / synthetic judge outside a smoke config, which a TBT_USER_SPEC / TBT_JUDGE_SPEC fixes,
   the endpoint variables), and the *config checks*, everything else (the topology, the batch and
   micro-batch sizes, the checkpoint directory, absolute paths on several nodes, the fully-async
   checks): a config that can never run. A failed check is a `FAIL` line, except an input under
   `DRY_RUN=true`, a `need` line (point 6).
4. The patches of trainer/verl/patches: their state is printed; a real launch applies any that is
   not in force (trainer/verl/patching.py), so a re-sync that restored verl's stock files cannot
   make it train on unpatched verl.
5. A config may name `env:` (variables set for the run) and `prepare:` (argument lists run as
   `python ARGS` before it, e.g. building a local model: configs/cpu_smoke.yaml); both are printed.
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

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "configs" / "train_single_node.yaml"
SAMPLING = SAMPLING_FILE
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)
LEGACY = {"custom_reward_function": "reward.custom_reward_function"}
PREPARE, ENV, SMOKE, ENTRYPOINT = "@prepare", "@env", "@smoke", "@entrypoint"  # a config's `prepare:`, `env:`, `smoke:`, `entrypoint:`
SAMPLING_KEY = "@sampling"  # a config's `sampling:` (another sampling file than configs/sampling.yaml)
_UNSET = "<unset:{}>"  # what a `${env:NAME}` without a default reads as while NAME is not set (preflight names it)
_UNSET_RE = re.compile(r"<unset:([A-Za-z_][A-Za-z0-9_]*)>")
UV_RAY_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"  # Ray's `uv run` runtime-env hook (main: off for the launch)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # org/name: a Hugging Face model id, not a local path


class LaunchError(ValueError):
    """A configuration that must not be launched (the message names the key or variable)."""


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
    if "smoke" in data:
        smoke = data.pop("smoke")
        if not isinstance(smoke, bool):
            raise LaunchError(f"{path}: smoke: expected true or false, got {smoke!r}")
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


def _render(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_render(x) for x in v) + "]"
    return str(v)


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
    return [f"{k}={v}" if k in given else f"{k}={_quoted(_render(v))}" for k, v in merged.items()]


_PLAIN = re.compile(r"^[A-Za-z0-9_./\-+@]*$|^\[.*\]$")


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
class Check:
    rule: str
    ok: bool
    detail: str
    skipped: bool = False  # not checked (an unset variable, a file a prepare step makes): ok, and said so
    brief: str = ""  # what the one-line error summary says of a failure (default: the rule)
    # an input of the launch site (a variable, a file, a user / judge endpoint), provided where and
    # when the run is launched: not a fault of the config, so `DRY_RUN=true` marks it `need`, not `FAIL`
    site: bool = False

    def line(self, lenient: bool = False) -> str:
        """The preflight's line; `lenient` (`DRY_RUN=true`): a failed input of the launch site is `need`."""
        mark = "skip" if self.skipped else "ok  " if self.ok else "need" if lenient and self.site else "FAIL"
        return f"{mark}  {self.rule}: {self.detail}"


def unset_names(value: Any) -> list[str]:
    """The variables a value still waits for (`${env:NAME}` without a default, NAME not set)."""
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in unset_names(v)]
    return _UNSET_RE.findall(value) if isinstance(value, str) else []


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


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    v = OmegaConf.select(cfg, key, default=default)
    return v


def _int(cfg: Any, key: str, default: int = 1) -> int:
    v = _get(cfg, key, default)
    try:
        return int(default if v is None else v)
    except (TypeError, ValueError):
        if unset_names(v):
            return default  # the variables check names it
        raise LaunchError(f"{key}={v!r}: expected an integer") from None


def input_paths(cfg: Any) -> list[tuple[str, str]]:
    """(key, path) of every local file or directory the run reads before its first step."""
    out: list[tuple[str, str]] = []
    for key in ("data.train_files", "data.val_files"):
        v = _get(cfg, key)
        for p in (list(v) if v is not None and not isinstance(v, str) else [v]):
            if p not in (None, ""):
                out.append((key, str(p)))
    model = str(_get(cfg, "actor_rollout_ref.model.path", "") or "")
    if model and not _is_hub_id(model):
        out.append(("actor_rollout_ref.model.path", model))
    for key in ("actor_rollout_ref.rollout.agent.agent_loop_config_path", "reward.custom_reward_function.path",
                "data.custom_cls.path"):
        v = _get(cfg, key)
        if v not in (None, "") and not str(v).startswith("pkg://"):
            out.append((key, str(v)))
    return [(k, p) for k, p in out if "://" not in p and not unset_names(p)]


def _is_hub_id(path: str) -> bool:
    """A model path that names a Hugging Face model (`org/name`), not a local directory: it is
    not absolute, not `./`, `../`, `~`, and nothing of that name exists here."""
    if unset_names(path) or path.startswith(("/", "./", "../", "~")) or _local(path).exists():
        return False
    return bool(_HUB_ID.match(path))


def _local(path: str) -> Path:
    """A path as the launch reads it: relative paths from the repository root (its working directory)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p


def file_checks(cfg: Any, made_by: Sequence[str] = ()) -> list[Check]:
    """One check per input path: it exists, or (under a directory in `made_by`, the arguments of
    the config's prepare: steps) it is made before the run and checked then."""
    checks = []
    for key, path in input_paths(cfg):
        p = _local(path)
        if any(str(p) == d or str(p).startswith(d.rstrip("/") + "/") for d in made_by):
            checks.append(Check(f"file exists: {key}", True, f"{path} (made by the config's prepare: step; checked after it)",
                                skipped=True, site=True))
            continue
        where = "" if Path(path).is_absolute() else f" (relative: read as {p})"
        checks.append(Check(f"file exists: {key}", p.exists(), f"{path}{where}" + ("" if p.exists() else ": no such file or directory"),
                            site=True))
    return checks


_STAND_IN = {"judge": ("synthetic", "answers Yes to every question", "TBT_JUDGE_SPEC=openai:URL#MODEL, or none when no task asks a judge"),
             "user": ("scripted", "replies with the task's user context, no model", "TBT_USER_SPEC=openai:URL#MODEL")}


def preflight(cfg: Any, env: Mapping[str, str], *, missing: Mapping[str, Sequence[str]] | None = None,
              smoke: bool = False, made_by: Sequence[str] = (), entry: Entry = ENTRIES["ppo"]) -> list[Check]:
    """The rules of the module docstring, each as a `Check`: every problem of a config in one run."""
    checks: list[Check] = []
    if missing is not None:
        checks.append(Check("variables set", not missing, "; ".join(
            f"{name} is NOT set (needed by {', '.join(dict.fromkeys(keys))})" for name, keys in missing.items())
            or "every ${env:NAME} without a default is set", brief=f"variables not set: {', '.join(missing)}", site=True))
    nnodes, gpn = _int(cfg, "trainer.nnodes"), _int(cfg, "trainer.n_gpus_per_node")
    checks += file_checks(cfg, made_by)
    if nnodes > 1:
        rel = [f"{k}={p}" for k, p in input_paths(cfg) if k in ("data.train_files", "data.val_files", "actor_rollout_ref.model.path")
               and not Path(p).expanduser().is_absolute()]
        checks.append(Check("data and model paths absolute on several nodes", not rel,
                            f"{', '.join(rel)}: relative, so each of the {nnodes} nodes reads its own copy from its own "
                            "working directory (give absolute paths on shared storage: TRAIN_FILE, VAL_FILE, MODEL_PATH)"
                            if rel else f"trainer.nnodes={nnodes}: every data and model path is absolute"))
    world = nnodes * gpn
    have = node_gpus(env)
    if entry.split:
        checks += fully_async_checks(cfg, have)
    else:
        checks.append(Check("gpus per node", have is None or have == gpn,
                            f"config n_gpus_per_node={gpn}" + (f", this node has {have}" if have is not None else
                                                               " (no GPU count on this node: not compared)")))
    for key in ("actor_rollout_ref.rollout.tensor_model_parallel_size", "actor_rollout_ref.actor.ulysses_sequence_parallel_size"):
        if entry.split and key.split(".")[1] == "rollout":
            continue  # the rollout pool's (fully_async_checks)
        size = _int(cfg, key) or 1
        checks.append(Check(f"{key.split('.')[-1]} divides the world", size >= 1 and world % size == 0,
                            f"{key}={size}, world {nnodes}x{gpn}={world}"))
    if not entry.split:
        bs, n = _int(cfg, "data.train_batch_size"), _int(cfg, "actor_rollout_ref.rollout.n")
        checks.append(Check("train_batch_size x n divides across ranks", (bs * n) % world == 0,
                            f"data.train_batch_size={bs} x rollout.n={n} = {bs * n} over {world} ranks"))
    for part in ("rollout", "ref"):
        a = _get(cfg, f"actor_rollout_ref.{part}.log_prob_micro_batch_size")
        b = _get(cfg, f"actor_rollout_ref.{part}.log_prob_micro_batch_size_per_gpu")
        checks.append(Check(f"one {part} log-prob micro-batch size", (a is None) != (b is None),
                            f"log_prob_micro_batch_size={a}, log_prob_micro_batch_size_per_gpu={b} (set exactly one)"))
    ckpt = str(_get(cfg, "trainer.default_local_dir", ""))
    local = ckpt.startswith(("/tmp/", "/var/tmp/", "/dev/shm/"))
    rule = "checkpoint dir absolute" + (" and shared" if nnodes > 1 else "")
    if unset_names(ckpt):
        checks.append(Check(rule, True, f"trainer.default_local_dir waits for {', '.join(unset_names(ckpt))}", skipped=True))
    else:
        checks.append(Check(rule, ckpt.startswith("/") and not (nnodes > 1 and local),
                            f"trainer.default_local_dir={ckpt}" + (" is node-local on a multi-node run" if nnodes > 1 and local else "")))
    for role in ("user", "judge"):
        spec = str(_get(cfg, f"thinkingbox.{role}", "") or "")
        kind, what, fix = _STAND_IN[role]
        if spec.split(":")[0] == kind:
            checks.append(Check(f"no {kind} {role} outside a smoke config", smoke,
                                f"thinkingbox.{role}={spec} {what}" + (" (this is a smoke config: smoke: true)" if smoke else
                                f": only a smoke config (top-level smoke: true) may train with it; set {fix}"), site=True))
        if spec.startswith("openai:"):
            key_env = re.search(r"key_env=([A-Za-z_][A-Za-z0-9_]*)", spec)
            var = key_env.group(1) if key_env else f"TBT_{role.upper()}_API_KEY"
            checks.append(Check(f"{role} endpoint variables", "#" in spec and bool(env.get(var)),
                                f"thinkingbox.{role} is an openai: spec; {var} {'is set' if env.get(var) else 'is NOT set'}",
                                site=True))
    return checks


def gpu_split(cfg: Any) -> str:
    """The fully-async trainer's GPUs, as printed by the launch."""
    rn, rg = _int(cfg, "rollout.nnodes"), _int(cfg, "rollout.n_gpus_per_node")
    tn, tg = _int(cfg, "trainer.nnodes"), _int(cfg, "trainer.n_gpus_per_node")
    tp = _int(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size") or 1
    at = "async_training."
    mini, req, trig = (_int(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size"), _int(cfg, at + "require_batches"),
                       _int(cfg, at + "trigger_parameter_sync_step"))
    steps = _int(cfg, "rollout.total_rollout_steps", 0) // max(1, mini * req * trig)
    return (f"rollout {rn}x{rg}={rn * rg} GPUs ({rn * rg // max(1, tp)} replicas of tensor parallel {tp}), "
            f"trainer {tn}x{tg}={tn * tg} GPUs; each update {mini * req} groups x rollout.n="
            f"{_int(cfg, 'actor_rollout_ref.rollout.n')}, a weight sync every {trig} update(s), staleness_threshold="
            f"{_get(cfg, at + 'staleness_threshold')}, partial_rollout={_render(_get(cfg, at + 'partial_rollout'))}, "
            f"{steps} updates from rollout.total_rollout_steps={_int(cfg, 'rollout.total_rollout_steps', 0)} prompts")


def fully_async_checks(cfg: Any, have: int | None) -> list[Check]:
    """The split (GPUs per node, the rollout pool's tensor parallel size, the trainer's batch over
    its ranks), what verl 0.9.0's rollouter and trainer assert once Ray is up
    (fully_async_rollouter.py, fully_async_trainer.py), and what our agent loop needs of them."""
    rn, rg = _int(cfg, "rollout.nnodes"), _int(cfg, "rollout.n_gpus_per_node")
    tn, tg = _int(cfg, "trainer.nnodes"), _int(cfg, "trainer.n_gpus_per_node")
    per_node = rg + tg if rn == tn else max(rg, tg)  # equal node counts: both pools on every node
    checks = [Check("gpus per node", have is None or have == per_node,
                    f"rollout {rn}x{rg} + trainer {tn}x{tg}: {per_node} per node"
                    + (f", this node has {have}" if have is not None else " (no GPU count on this node: not compared)"))]
    tp = _int(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size") or 1
    checks.append(Check("tensor_model_parallel_size divides the rollout GPUs", tp >= 1 and rg % tp == 0,
                        f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}, rollout.n_gpus_per_node={rg}"))
    mini, req = _int(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size"), _int(cfg, "async_training.require_batches")
    n = _int(cfg, "actor_rollout_ref.rollout.n")
    checks.append(Check("ppo_mini_batch_size x n divides across trainer ranks", mini >= 1 and (mini * n) % (tn * tg) == 0,
                        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini} x rollout.n={n} = {mini * n} over "
                        f"{tn * tg} trainer ranks (each update takes require_batches={req} of them)"))
    for key, want, why in [
            ("data.train_batch_size", 0, "the rollouter streams prompts one at a time"),
            ("data.gen_batch_size", 1, "the rollouter streams prompts one at a time"),
            ("actor_rollout_ref.hybrid_engine", False, "rollout and trainer have their own GPUs"),
            ("actor_rollout_ref.rollout.mode", "async", "the rollout servers behind the agent loop"),
            ("actor_rollout_ref.rollout.calculate_log_probs", True, "the rollout's log-probs are trained on"),
            ("actor_rollout_ref.rollout.multi_turn.enable", True,
             "otherwise the rollouter sets every row's agent_name to single_turn_agent and no episode is played"),
            ("async_training.partial_rollout", True,
             "otherwise a weight sync hands the agent loop the aborted turn, cut, as the model's turn")]:
        v = _get(cfg, key)
        checks.append(Check(f"fully_async: {key}={_render(want)}", v == want and type(v) is type(want),
                            f"is {_render(v)} ({why})"))
    return checks


def node_gpus(env: Mapping[str, str]) -> int | None:
    """GPUs on this node: NODE_GPUS when set (a launcher node without GPUs, tests), else
    `nvidia-smi -L`; None when neither says."""
    if env.get("NODE_GPUS"):
        return int(env["NODE_GPUS"])
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU ")) if r.returncode == 0 else None


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
    return overrides, cfg, preflight(cfg, {**env, **extras.env}, missing=missing, smoke=smoke,
                                     made_by=prepare_dirs(extras.prepare), entry=entry), extras


DRY_RUNS = {"": None, "0": None, "false": None, "no": None,  # a real launch
            "1": "true", "true": "true", "yes": "true",  # a dry run: inputs of the launch site may be missing
            "strict": "strict"}  # a dry run that fails on every failed check, those inputs included


def dry_run(env: Mapping[str, str]) -> str | None:
    """`DRY_RUN`: None (a real launch), "true" or "strict" (module docstring, point 6)."""
    value = env.get("DRY_RUN", "")
    if value.lower() not in DRY_RUNS:
        raise LaunchError(f"DRY_RUN={value}: expected true, strict or false")
    return DRY_RUNS[value.lower()]


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip() + "\n\nExamples: scripts/run_train.sh --help")
        return 0
    try:
        mode = dry_run(env)
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
            print(redact("python " + " ".join(c), env))
    dry, lenient = mode is not None, mode == "true"  # DRY_RUN=true: inputs of the launch site may be missing
    print("# preflight")
    for c in checks:
        print(redact(c.line(lenient), env))
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
    for c in extras.prepare:
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
    if env.get("VERL_FILE_LOGGER_PATH"):  # verl's file logger opens it without making its folder
        Path(env["VERL_FILE_LOGGER_PATH"]).parent.mkdir(parents=True, exist_ok=True)
    return subprocess.call([sys.executable, "-m", extras.entry.module, *overrides], env=env, cwd=str(ROOT))


def dead_endpoints(cfg: Any, timeout: float = 5.0) -> list[str]:
    """The openai: user / judge endpoints that do not answer GET /models."""
    import httpx

    out = []
    for role in ("user", "judge"):
        spec = str(_get(cfg, f"thinkingbox.{role}", "") or "")
        if spec.startswith("openai:"):
            url = spec[len("openai:"):].split("#")[0].rstrip("/")
            try:
                httpx.get(url + "/models", timeout=timeout)
            except httpx.HTTPError as e:
                out.append(f"{role} {url}: {type(e).__name__}")
    return out


if __name__ == "__main__":
    sys.exit(main())
