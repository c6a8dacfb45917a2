"""The launch's preflight (trainer/verl/launch.py, point 3 of its docstring): every rule a
composed verl config is checked against before anything starts, each a `Check`, all of them in
one run. Two kinds (`Check.site`): the inputs of the launch site (variables, files, the user and
judge models, their keys, the checkpoint `trainer.resume_mode=auto` would load), which `DRY_RUN=true` lists as `need`, and the config checks (topology,
batch and micro-batch sizes, the checkpoint directory, the fully-async trainer's asserts).
`Entry` / `ENTRIES`: the verl trainers a launch runs (a `split` one has the fully-async rules), here
so that both the launch's composition (trainer/verl/config_read.py) and the preflight read them.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainer.verl import checkpoint as ck

ROOT = Path(__file__).resolve().parents[2]
_UNSET_RE = re.compile(r"<unset:([A-Za-z_][A-Za-z0-9_]*)>")  # a `${env:NAME}` still waiting for NAME (config_read._UNSET)
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


def render(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(render(x) for x in v) + "]"
    if isinstance(v, dict):  # Hydra's dict value: {key:value,...}
        return "{" + ",".join(f"{k}:{render(x)}" for k, x in v.items()) + "}"
    return str(v)


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



def cfg_get(cfg: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    v = OmegaConf.select(cfg, key, default=default)
    return v


def cfg_int(cfg: Any, key: str, default: int = 1) -> int:
    v = cfg_get(cfg, key, default)
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
        v = cfg_get(cfg, key)
        for p in (list(v) if v is not None and not isinstance(v, str) else [v]):
            if p not in (None, ""):
                out.append((key, str(p)))
    model = str(cfg_get(cfg, "actor_rollout_ref.model.path", "") or "")
    if model and not _is_hub_id(model):
        out.append(("actor_rollout_ref.model.path", model))
    for key in ("actor_rollout_ref.rollout.agent.agent_loop_config_path", "reward.custom_reward_function.path",
                "data.custom_cls.path"):
        v = cfg_get(cfg, key)
        if v not in (None, "") and not str(v).startswith("pkg://"):
            out.append((key, str(v)))
    return [(k, p) for k, p in out if "://" not in p and not unset_names(p)]


def _is_hub_id(path: str) -> bool:
    """A model path that names a Hugging Face model (`org/name`), not a local directory: it is
    not absolute, not `./`, `../`, `~`, and nothing of that name exists here."""
    if unset_names(path) or path.startswith(("/", "./", "../", "~")) or local_path(path).exists():
        return False
    return bool(_HUB_ID.match(path))


def local_path(path: str) -> Path:
    """A path as the launch reads it: relative paths from the repository root (its working directory)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p


def file_checks(cfg: Any, made_by: Sequence[str] = ()) -> list[Check]:
    """One check per input path: it exists, or (under a directory in `made_by`, the arguments of
    the config's prepare: steps) it is made before the run and checked then."""
    checks = []
    for key, path in input_paths(cfg):
        p = local_path(path)
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
              smoke: bool = False, made_by: Sequence[str] = (), entry: Entry | None = None) -> list[Check]:
    """The rules of the module docstring, each as a `Check`: every problem of a config in one run."""
    checks: list[Check] = []
    if missing is not None:
        checks.append(Check("variables set", not missing, "; ".join(
            f"{name} is NOT set (needed by {', '.join(dict.fromkeys(keys))})" for name, keys in missing.items())
            or "every ${env:NAME} without a default is set", brief=f"variables not set: {', '.join(missing)}", site=True))
    nnodes, gpn = cfg_int(cfg, "trainer.nnodes"), cfg_int(cfg, "trainer.n_gpus_per_node")
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
    split = entry is not None and entry.split
    if split:
        checks += fully_async_checks(cfg, have)
    else:
        checks.append(Check("gpus per node", have is None or have == gpn,
                            f"config n_gpus_per_node={gpn}" + (f", this node has {have}" if have is not None else
                                                               " (no GPU count on this node: not compared)")))
    for key in ("actor_rollout_ref.rollout.tensor_model_parallel_size", "actor_rollout_ref.actor.ulysses_sequence_parallel_size"):
        if split and key.split(".")[1] == "rollout":
            continue  # the rollout pool's (fully_async_checks)
        size = cfg_int(cfg, key) or 1
        checks.append(Check(f"{key.split('.')[-1]} divides the world", size >= 1 and world % size == 0,
                            f"{key}={size}, world {nnodes}x{gpn}={world}"))
    if not split:
        bs, n = cfg_int(cfg, "data.train_batch_size"), cfg_int(cfg, "actor_rollout_ref.rollout.n")
        checks.append(Check("train_batch_size x n divides across ranks", (bs * n) % world == 0,
                            f"data.train_batch_size={bs} x rollout.n={n} = {bs * n} over {world} ranks"))
    for part in ("rollout", "ref"):
        a = cfg_get(cfg, f"actor_rollout_ref.{part}.log_prob_micro_batch_size")
        b = cfg_get(cfg, f"actor_rollout_ref.{part}.log_prob_micro_batch_size_per_gpu")
        checks.append(Check(f"one {part} log-prob micro-batch size", (a is None) != (b is None),
                            f"log_prob_micro_batch_size={a}, log_prob_micro_batch_size_per_gpu={b} (set exactly one)"))
    ckpt = str(cfg_get(cfg, "trainer.default_local_dir", ""))
    local = ckpt.startswith(("/tmp/", "/var/tmp/", "/dev/shm/"))
    rule = "checkpoint dir absolute" + (" and shared" if nnodes > 1 else "")
    if unset_names(ckpt):
        checks.append(Check(rule, True, f"trainer.default_local_dir waits for {', '.join(unset_names(ckpt))}", skipped=True))
    else:
        if nnodes > 1 and local and env.get("RAY_ADDRESS") and ckpt.startswith("/"):
            # a cluster the launch asks: its node checks read a marker there on every node (trainer/verl/nodes.py)
            checks.append(Check(rule, True, f"trainer.default_local_dir={ckpt}: node-local on most clusters; every node "
                                "of RAY_ADDRESS reads a marker written there before the run (the node checks)", skipped=True))
        else:
            checks.append(Check(rule, ckpt.startswith("/") and not (nnodes > 1 and local),
                                f"trainer.default_local_dir={ckpt}" + (" is node-local on a multi-node run (on a running "
                                "cluster, RAY_ADDRESS set, the node checks read a marker there from every node)"
                                if nnodes > 1 and local else "")))
        checks += resume_checks(cfg, ckpt, world)
    checks.append(driver_check(env))
    checks.append(rollout_logprobs_check(cfg))
    checks.append(lora_check(cfg))
    for role in ("user", "judge"):
        spec = str(cfg_get(cfg, f"thinkingbox.{role}", "") or "")
        kind, what, fix = _STAND_IN[role]
        if spec.split(":")[0] == kind:
            checks.append(Check(f"no {kind} {role} outside a smoke config", smoke,
                                f"thinkingbox.{role}={spec} {what}" + (" (this is a smoke config: smoke: true)" if smoke else
                                f": only a smoke config (top-level smoke: true) may train with it; set {fix}"), site=True))
        if spec.startswith("openai:"):
            var = key_variable(spec, role)
            checks.append(Check(f"{role} endpoint variables", "#" in spec and bool(env.get(var)),
                                f"thinkingbox.{role} is an openai: spec; {var} {'is set' if env.get(var) else 'is NOT set'}",
                                site=True))
    return checks


def rollout_logprobs_check(cfg: Any) -> Check:
    """The rollout engine's log-prob of a sampled token is the one the actor computes,
    log_softmax(logits / temperature): vLLM's `raw_logprobs` at temperature 1.0, or its
    `processed_logprobs` where no top-k/top-p cuts the distribution. Otherwise every rollout-vs-actor
    IS weight and mismatch metric carries a systematic offset that is not the engines' mismatch."""
    key = "actor_rollout_ref.rollout."
    mode = str(cfg_get(cfg, key + "logprobs_mode") or "processed_logprobs")  # verl's default
    t, k, p = (float(v) if (v := cfg_get(cfg, key + name)) is not None else unset
               for name, unset in (("temperature", 1.0), ("top_k", -1.0), ("top_p", 1.0)))
    k = int(k)
    at = f"{key}logprobs_mode={mode}, temperature={t:g}, top_k={k}, top_p={p:g}"
    if mode == "raw_logprobs":
        ok = t in (0.0, 1.0)
        why = "" if ok else (": raw log-probs are before the temperature the actor divides by (sample at temperature 1.0, "
                             "or set processed_logprobs without top-k/top-p)")
    elif mode == "processed_logprobs":
        ok = k <= 0 and p >= 1.0
        why = "" if ok else (": processed log-probs are renormalized over the tokens top-k/top-p keep, which the actor's are "
                             f"not (set {key}logprobs_mode=raw_logprobs at temperature 1.0)")
    else:
        ok, why = False, f": {mode} returns logits, not log-probs (set {key}logprobs_mode=raw_logprobs)"
    return Check("rollout log-probs are the actor's", ok, at + (" (log_softmax(logits / temperature) on both)" if ok else why),
                 brief="rollout log-probs differ from the actor's")


_M = "actor_rollout_ref.model."
_BACKEND = "actor_rollout_ref.rollout.checkpoint_engine.backend"
# the rollout engines verl 0.9.0 hands an unmerged adapter to as an adapter (update_weights with its
# peft_config): vLLM (add_lora, TensorLoRARequest) and SGLang (its LoRA); trtllm ignores the peft_config
# and the project's hf_cpu (trainer/verl/cpu) loads full weights only
_ADAPTER_ENGINES = ("vllm", "sglang")
_FSDP = ("fsdp", "fsdp2")
_VLLM_MAX_LORA_RANK = 512  # vLLM's MaxLoRARanks (vllm/config/lora.py); verl's get_vllm_max_lora_rank raises above it


def _rank(cfg: Any, key: str) -> tuple[int | None, str]:
    """A LoRA rank key's value: (rank, "") or (None, why it is not one)."""
    v = cfg_get(cfg, key, 0)
    if v is None:
        return 0, ""
    if unset_names(v):
        return None, f"{key} waits for {', '.join(unset_names(v))}"
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None, f"{key}={render(v)}: expected an integer >= 0 (0: no LoRA)"
    return v, ""


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip()) or (not isinstance(v, str) and len(list(v)) == 0)


def lora_check(cfg: Any) -> Check:
    """A LoRA run (`actor_rollout_ref.model.lora_rank > 0`, verl 0.9.0's FSDP actor with PEFT) whose
    rollout engine plays base + adapter after every weight sync. verl's ways (workers/engine_workers.py
    `update_weights`, workers/engine/fsdp/transformer_impl.py `get_per_tensor_param`):
    `model.lora.merge: true` merges the adapter into the base weights and sends them whole, on any
    backend but delta_sharded; unmerged, only the `naive` backend (colocated) sends the adapter with
    its peft_config, which only vLLM and SGLang take as an adapter. Every other combination syncs the
    base weights alone (collect_lora_params with base_sync_done=False skips every lora_ tensor), and
    the run trains an adapter the rollout never plays, silently."""
    rule = "rollout plays the LoRA adapter"
    brief = "the rollout would not play the LoRA adapter"
    rank_key, mrank_key, merge_key = _M + "lora_rank", _M + "lora.rank", _M + "lora.merge"
    strategy = str(cfg_get(cfg, "actor_rollout_ref.actor.strategy") or "fsdp")
    (r, bad_r), (mr, bad_mr) = _rank(cfg, rank_key), _rank(cfg, mrank_key)
    bad = [b for b in (bad_r, bad_mr) if b and " waits for " not in b]
    if bad:
        return Check(rule, False, "; ".join(bad), brief=brief)
    if r is None or mr is None:  # a variable not set: the variables check names it
        return Check(rule, True, "; ".join(b for b in (bad_r, bad_mr) if b), skipped=True)
    adapter_path = cfg_get(cfg, _M + "lora_adapter_path")
    if strategy not in _FSDP:
        if mr > 0:
            # verl's Megatron LoRA (Megatron-Bridge's, its own sync in workers/engine/megatron): not this check's
            return Check(rule, False, f"{mrank_key}={mr} with actor_rollout_ref.actor.strategy={strategy}: Megatron's LoRA "
                         "is not covered here (the launch composes verl's FSDP ppo_trainer config, the project's patches "
                         "and this check are the FSDP actor's); train LoRA on the FSDP actor: strategy fsdp, "
                         f"{rank_key}>0", brief=brief)
        if r > 0:
            return Check(rule, False, f"{rank_key}={r} with actor_rollout_ref.actor.strategy={strategy}: {rank_key} is the "
                         "FSDP actor's key (verl's Megatron engine reads model.lora.* and would train every weight at "
                         "the LoRA learning rate); set actor_rollout_ref.actor.strategy=fsdp (or fsdp2)", brief=brief)
        return Check(rule, True, f"{rank_key}=0: not a LoRA run")
    if mr > 0 and mr != r:
        return Check(rule, False, f"{mrank_key}={mr}, {rank_key}={r}: {mrank_key} is verl's Megatron key; the FSDP actor "
                     f"builds its adapter from {rank_key} ({'0: none, every weight trains' if r == 0 else r}) while vLLM / SGLang size "
                     f"their LoRA slots by {mrank_key}; set {rank_key}={mr} and {mrank_key}=0", brief=brief)
    if r == 0:
        if adapter_path not in (None, ""):
            return Check(rule, False, f"{_M}lora_adapter_path={adapter_path} with {rank_key}=0: verl's FSDP actor loads "
                         f"the adapter only when {rank_key} > 0 (the run would train every weight); set {rank_key} to the "
                         "adapter's rank", brief=brief)
        return Check(rule, True, f"{rank_key}=0: not a LoRA run (every weight trains and syncs whole)")
    merge = cfg_get(cfg, merge_key, False)
    if not isinstance(merge, bool):
        return Check(rule, False, f"{merge_key}={render(merge)}: expected true or false", brief=brief)
    targets, params = cfg_get(cfg, _M + "target_modules"), cfg_get(cfg, _M + "target_parameters")
    if adapter_path in (None, "") and _empty(targets) and _empty(params):
        return Check(rule, False, f"{_M}target_modules={render(targets)}: no module gets an adapter (peft refuses it); "
                     f"set {_M}target_modules=all-linear (every linear layer, MLP included)", brief=brief)
    backend = str(cfg_get(cfg, _BACKEND) or "naive")
    name = str(cfg_get(cfg, "actor_rollout_ref.rollout.name") or "")
    at = f"{rank_key}={r}, {merge_key}={render(merge)}, {_BACKEND}={backend}, actor_rollout_ref.rollout.name={name}"
    if backend == "delta_sharded":
        return Check(rule, False, f"{at}: delta_sharded's syncs after the first diff the FSDP module's own state dict "
                     "(verl's get_per_tensor_param_shard, 'non-LoRA base path only'): the frozen base never changes and "
                     "the adapter's tensors are neither merged nor named as the rollout's weights: the rollout never "
                     f"gets the trained adapter; use {_BACKEND}=nccl with {merge_key}=true", brief=brief)
    if not merge and backend != "naive":
        return Check(rule, False, f"{at}: a {backend} sync sends verl's get_per_tensor_param() with base_sync_done=False, "
                     "which skips every lora_ tensor (collect_lora_params): the rollout would play the base weights "
                     f"alone at every sync; set {merge_key}=true (the adapter merged into the weights sent)", brief=brief)
    if not merge and name not in _ADAPTER_ENGINES:
        why = ("loads full weights only (the adapter's tensors are not the model's: the first sync fails)"
               if name == "hf_cpu" else "takes no adapter (verl passes it the adapter's tensors as weights)")
        return Check(rule, False, f"{at}: rollout {name} {why}; set {merge_key}=true", brief=brief)
    if merge:
        return Check(rule, True, f"{at}: merged weights (at each sync verl merges the adapter into the base, sends the "
                     f"weights whole through the {backend} sync as a full-parameter run does, and unmerges)")
    load_format = str(cfg_get(cfg, "actor_rollout_ref.rollout.load_format") or "dummy")
    if cfg_get(cfg, "actor_rollout_ref.rollout.layered_summon") is True and "dummy" in load_format:
        return Check(rule, False, f"{at}, actor_rollout_ref.rollout.layered_summon=true, load_format={load_format}: the "
                     "base weights are not in the engine before the first sync and layered_summon cannot send them "
                     "(verl raises at the first sync); set actor_rollout_ref.rollout.load_format=safetensors, or "
                     f"{merge_key}=true", brief=brief)
    if name == "vllm" and r > _VLLM_MAX_LORA_RANK:
        return Check(rule, False, f"{at}: vLLM's max_lora_rank is at most {_VLLM_MAX_LORA_RANK} (verl raises at start-up); "
                     f"lower {rank_key} or set {merge_key}=true", brief=brief)
    first = ("; the first also sends the base weights, which load_format=dummy leaves out of the engine"
             if "dummy" in load_format else "")
    return Check(rule, True, f"{at}: adapter via the engine's LoRA ({name} started with enable_lora; each sync sends "
                 f"the adapter alone with its peft_config{first})")


def key_variable(spec: str, role: str) -> str:
    """The variable an openai: spec's key is read from (`key_env=`, else TBT_{ROLE}_API_KEY)."""
    found = re.search(r"key_env=([A-Za-z_][A-Za-z0-9_]*)", spec)
    return found.group(1) if found else f"TBT_{role.upper()}_API_KEY"


def openai_endpoints(cfg: Any) -> list[tuple[str, str, str]]:
    """(role, base URL, key variable) of the user / judge specs that are openai: endpoints."""
    out = []
    for role in ("user", "judge"):
        spec = str(cfg_get(cfg, f"thinkingbox.{role}", "") or "")
        if spec.startswith("openai:"):
            out.append((role, spec[len("openai:"):].split("#")[0].rstrip("/"), key_variable(spec, role)))
    return out


def resume_checks(cfg: Any, ckpt: str, world: int) -> list[Check]:
    """`trainer.resume_mode=auto` with a `latest_checkpointed_iteration.txt` in the checkpoint
    directory: verl loads the step it names, so that step is verified first (trainer/verl/checkpoint.py
    `verify`, what `tbt checkpoint verify` runs) and its shards must be this run's world size (each
    rank loads `..._world_size_W_rank_R.pt` for its own W). No tracker: verl starts at step 0. A
    broken or dangling checkpoint is of the launch site (the files on its storage), not the config."""
    if cfg_get(cfg, "trainer.resume_mode") != "auto":
        return []
    rule = "resume checkpoint verified (trainer.resume_mode=auto)"
    root = local_path(ckpt)
    if not (root / ck.TRACKER).is_file():
        return [Check(rule, True, f"no {root / ck.TRACKER}: the run starts at step 0")]
    step, problem = ck.read_tracker(root)
    try:
        report = ck.verify(root, [step]) if step is not None else None
    except OSError as e:
        problem = f"{root}: unreadable: {e.strerror or e}"
        report = None
    problems = [problem] if problem else []
    if report is not None:
        problems += [p for s in report.steps for p in s.problems] + report.problems
        ws = next((s.world_size for s in report.steps), None)
        if ws is not None and ws != world:
            problems.append(f"global_step_{step}/actor: shards of world size {ws}, this run has {world} ranks "
                            f"(trainer.nnodes x trainer.n_gpus_per_node): verl would look for "
                            f"model_world_size_{world}_rank_R.pt")
    where = f"global_step_{step}" if step is not None else ck.TRACKER
    warnings = ([w for s in report.steps for w in s.warnings] + report.warnings) if report is not None else []
    if not problems:
        also = f"; {'; '.join(warnings)} (its steps after {step} are trained again)" if warnings else ""
        return [Check(rule, True, f"{root}/{where}: complete, world size {world}, as this run's{also}")]
    fallback = newest_complete(root, world, below=step)
    fix = (f"trainer.resume_mode=resume_path trainer.resume_from_path={root}/global_step_{fallback} resumes from the "
           f"newest complete step; " if fallback is not None else "")
    return [Check(rule, False, f"{root}/{where}: " + "; ".join(dict.fromkeys(problems))
                  + f" ({fix}tbt checkpoint verify {root}; trainer.resume_mode=disable starts afresh)",
                  brief=f"resume checkpoint {root}/{where} not resumable", site=True)]


def newest_complete(root: Path, world: int, below: int | None = None) -> int | None:
    """The newest step of `root` that verifies whole on `world` ranks (below `below`, when given)."""
    for n in sorted(ck.list_steps(root), reverse=True):
        if below is not None and n >= below:
            continue
        try:
            s = ck.verify_step(root, n)
        except OSError:
            continue
        if s.ok and s.world_size == world:
            return n
    return None


def gpu_split(cfg: Any) -> str:
    """The fully-async trainer's GPUs, as printed by the launch."""
    rn, rg = cfg_int(cfg, "rollout.nnodes"), cfg_int(cfg, "rollout.n_gpus_per_node")
    tn, tg = cfg_int(cfg, "trainer.nnodes"), cfg_int(cfg, "trainer.n_gpus_per_node")
    tp = cfg_int(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size") or 1
    at = "async_training."
    mini, req, trig = (cfg_int(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size"), cfg_int(cfg, at + "require_batches"),
                       cfg_int(cfg, at + "trigger_parameter_sync_step"))
    steps = cfg_int(cfg, "rollout.total_rollout_steps", 0) // max(1, mini * req * trig)
    return (f"rollout {rn}x{rg}={rn * rg} GPUs ({rn * rg // max(1, tp)} replicas of tensor parallel {tp}), "
            f"trainer {tn}x{tg}={tn * tg} GPUs; each update {mini * req} groups x rollout.n="
            f"{cfg_int(cfg, 'actor_rollout_ref.rollout.n')}, a weight sync every {trig} update(s), staleness_threshold="
            f"{cfg_get(cfg, at + 'staleness_threshold')}, partial_rollout={render(cfg_get(cfg, at + 'partial_rollout'))}, "
            f"{steps} updates from rollout.total_rollout_steps={cfg_int(cfg, 'rollout.total_rollout_steps', 0)} prompts")


def fully_async_checks(cfg: Any, have: int | None) -> list[Check]:
    """The split (GPUs per node, the rollout pool's tensor parallel size, the trainer's batch over
    its ranks), what verl 0.9.0's rollouter and trainer assert once Ray is up
    (fully_async_rollouter.py, fully_async_trainer.py), and what our agent loop needs of them."""
    rn, rg = cfg_int(cfg, "rollout.nnodes"), cfg_int(cfg, "rollout.n_gpus_per_node")
    tn, tg = cfg_int(cfg, "trainer.nnodes"), cfg_int(cfg, "trainer.n_gpus_per_node")
    per_node = rg + tg if rn == tn else max(rg, tg)  # equal node counts: both pools on every node
    checks = [Check("gpus per node", have is None or have == per_node,
                    f"rollout {rn}x{rg} + trainer {tn}x{tg}: {per_node} per node"
                    + (f", this node has {have}" if have is not None else " (no GPU count on this node: not compared)"))]
    tp = cfg_int(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size") or 1
    checks.append(Check("tensor_model_parallel_size divides the rollout GPUs", tp >= 1 and rg % tp == 0,
                        f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}, rollout.n_gpus_per_node={rg}"))
    mini, req = cfg_int(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size"), cfg_int(cfg, "async_training.require_batches")
    n = cfg_int(cfg, "actor_rollout_ref.rollout.n")
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
        v = cfg_get(cfg, key)
        checks.append(Check(f"fully_async: {key}={render(want)}", v == want and type(v) is type(want),
                            f"is {render(v)} ({why})"))
    return checks


def on_cluster(cfg: Any, env: Mapping[str, str]) -> bool:
    """Whether the run goes to a Ray cluster the launch did not start (the node checks apply):
    `RAY_ADDRESS` set, or several nodes (the trainer's, or the fully-async rollout pool's)."""
    return bool(env.get("RAY_ADDRESS")) or cfg_int(cfg, "trainer.nnodes") > 1 or cfg_int(cfg, "rollout.nnodes") > 1


# the oldest Linux driver each CUDA major of torch's wheel runs on: 13.x needs the R580 branch (13.0
# GA shipped with 580.65.06; minor-version compatibility covers 13.x from it), 12.x R525 (12.0 GA: 525.60.13)
DRIVER_FOR_CUDA = {12: "525.60.13", 13: "580.65.06"}


def version_tuple(v: str) -> tuple[int, ...]:
    """`580.65.06` -> (580, 65, 6); what does not parse is ()."""
    parts = v.strip().split(".")
    return tuple(int(p) for p in parts) if v.strip() and all(p.isdigit() for p in parts) else ()


def driver_at_least(have: str, need: str) -> bool:
    """Whether driver version `have` is `need` or newer (numerically, part by part)."""
    h, n = version_tuple(have), version_tuple(need)
    return bool(h) and h >= n


def torch_cuda() -> tuple[str, str | None]:
    """(torch's version, the CUDA version its wheel is built for), read from torch/version.py
    without importing torch (the launch stays light); CUDA None for a CPU-only build."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return "not installed", None
    text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text(encoding="utf-8")
    ver = re.search(r"__version__\s*=\s*'([^']+)'", text)
    cuda = re.search(r"^cuda\b[^=]*=\s*'([^']+)'", text, re.M)
    return (ver.group(1) if ver else "?"), (cuda.group(1) if cuda else None)


def node_driver(env: Mapping[str, str]) -> list[str] | None:
    """The NVIDIA driver version of each GPU on this node: NODE_DRIVER when set (a launcher node
    without GPUs, tests), else `nvidia-smi --query-gpu=driver_version`; None when neither says."""
    if env.get("NODE_DRIVER"):
        return [env["NODE_DRIVER"]]
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = [line.strip() for line in r.stdout.splitlines() if line.strip()]
    return found if r.returncode == 0 and found else None


def driver_check(env: Mapping[str, str]) -> Check:
    """This node's NVIDIA driver against what the CUDA build of the installed torch needs."""
    version, cuda = torch_cuda()
    rule = "NVIDIA driver for torch's CUDA"
    need = DRIVER_FOR_CUDA.get(int(cuda.split(".")[0])) if cuda else None
    if need is None:
        return Check(rule, True, f"torch {version} is built for CUDA {cuda or 'none'}: no driver minimum known here",
                     skipped=True, site=True)
    wants = f"torch {version} is built for CUDA {cuda}, which needs driver >= {need}"
    have = node_driver(env)
    if have is None:
        return Check(rule, True, f"no nvidia-smi on this node: not compared ({wants})", skipped=True, site=True)
    old = [v for v in have if not driver_at_least(v, need)]
    return Check(rule, not old, f"driver {', '.join(dict.fromkeys(have))} on this node; {wants}"
                 + (": CUDA calls fail with 'driver version is insufficient' (upgrade the driver)" if old else ""),
                 site=True)


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


__all__ = ["cfg_get", "cfg_int", "Check", "local_path", "on_cluster", "driver_at_least", "driver_check", "DRIVER_FOR_CUDA", "file_checks",
           "fully_async_checks", "gpu_split", "input_paths", "key_variable", "LaunchError", "lora_check", "node_driver", "node_gpus", "openai_endpoints", "preflight",
           "render", "newest_complete", "resume_checks", "torch_cuda", "unset_names", "version_tuple"]
