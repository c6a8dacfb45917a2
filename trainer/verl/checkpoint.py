"""verl FSDP checkpoints: the layout verl writes and a step verified against it (merging: merge.py).

The layout verl 0.9.0 writes (`RayPPOTrainer._save_checkpoint` and
`FSDPCheckpointManager.save_checkpoint`), under `trainer.default_local_dir`:

    DIR/
      latest_checkpointed_iteration.txt        N of the last finished save (written last;
                                               trainer.resume_mode=auto resumes from it)
      global_step_N/
        actor/
          model_world_size_W_rank_R.pt         every rank R < W: its shard of the weights
          optim_world_size_W_rank_R.pt         ... of the optimizer state
          extra_state_world_size_W_rank_R.pt   ... lr scheduler and RNG state
          fsdp_config.json                     {"FSDP_version": ..., "world_size": W} (rank 0)
          huggingface/                         config.json and the tokenizer (rank 0): what
                                               `python -m verl.model_merger` builds the model from
        critic/                                the same, when the run has a critic
        data.pt                                the dataloader's position

A LoRA run (`actor_rollout_ref.model.lora_rank` > 0: the actor is a PEFT model) saves the same files,
the model shards holding the PEFT state (`base_model.model.<module>.base_layer.weight`,
`<module>.lora_A.default.weight`, `.lora_B.default.weight`; with `checkpoint.save_lora_only` only the
adapter's, a "LoRA-only" save), the optimizer shards the adapter's state, and `actor/lora_train_meta.json`
({"r", "lora_alpha", "task_type"}: the merger's only source of lora_alpha). verl's merger writes such a
step's adapter to `TARGET/lora_adapter` and the model with the BASE weights only: trainer/verl/lora_merge.py
folds the adapter into the merged weights, or writes it alone for vLLM / PEFT.

A step is complete when every rank's shards are there and non-empty (and end like a whole torch
archive: a save killed mid-write leaves a truncated one), fsdp_config.json names the world size,
huggingface/ has a config with an architecture and a tokenizer, and data.pt is there. verl loads
`model_world_size_{W}_rank_{R}.pt` for its own world size, so a run resumes only on W ranks
(trainer.nnodes x trainer.n_gpus_per_node).

Nothing here imports torch, transformers or verl at module import: verifying reads file names,
sizes, archive trailers, lora_train_meta.json and the key names of rank 0's model shard (its
`data.pkl`, read with an unpickler that builds nothing). Merging a step and checking the merged
model are trainer/verl/merge.py's.
"""

from __future__ import annotations

import json
import pickle
import re
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

TRACKER = "latest_checkpointed_iteration.txt"
STEP_RE = re.compile(r"^global_step_(\d+)$")
SHARD_RE = re.compile(r"^(model|optim|extra_state)_world_size_(\d+)_rank_(\d+)\.pt$")
SHARD_KINDS = ("model", "optim", "extra_state")
CONTENTS = MappingProxyType({"model": "model", "optim": "optimizer", "extra_state": "extra"})  # save_contents names
ROLES = ("actor", "critic")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
CONFIG_KEYS_MATCHED = ("model_type", "architectures", "vocab_size", "hidden_size", "num_hidden_layers")
LORA_META = "lora_train_meta.json"
KEYS_PICKLE_MAX = 256 << 20  # a model shard's data.pkl larger than this is not read for its key names


class CheckpointInputError(ValueError):
    """The path given is not something to verify or merge (exit 2 at the command line)."""


@dataclass
class RoleReport:
    """One role's folder of one step (`global_step_N/actor`)."""

    role: str
    world_size: int | None = None
    shards: dict[str, int] = field(default_factory=dict)  # kind -> good shards
    bytes: int = 0
    chat_template: bool = False
    # a LoRA checkpoint: {"r", "lora_alpha", "task_type" (from lora_train_meta.json, None where it
    # does not say), "lora_only" (the model shards hold only the adapter; None: not read)}; None: none
    lora: dict | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class StepReport:
    step: int
    path: str
    roles: list[RoleReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the step's own and every role's
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def world_size(self) -> int | None:
        return next((r.world_size for r in self.roles if r.role == "actor"), None)

    @property
    def lora(self) -> dict | None:
        return next((r.lora for r in self.roles if r.role == "actor"), None)


@dataclass
class CheckpointReport:
    root: str
    steps: list[StepReport] = field(default_factory=list)
    tracker: int | None = None
    problems: list[str] = field(default_factory=list)  # the folder's own (tracker, steps asked for)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.ok for s in self.steps)

    def to_dict(self) -> dict:
        return {"root": self.root, "ok": self.ok, "tracker": self.tracker, "problems": self.problems,
                "warnings": self.warnings,
                "steps": [{**asdict(s), "ok": s.ok, "world_size": s.world_size, "lora": s.lora}
                          for s in self.steps]}


# ---------------------------------------------------------------------------- verify

def list_steps(root: Path) -> list[int]:
    """The N of every `global_step_N` folder in `root`, ascending."""
    return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := STEP_RE.match(p.name)))


def resolve_root(path: Path, step: int | None = None) -> tuple[Path, int | None]:
    """(checkpoint root, step): `path` is the root (trainer.default_local_dir) or one of its
    `global_step_N` folders (then the step is N). A role folder is refused, with what to pass."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointInputError(f"{path}: not a folder")
    m = STEP_RE.match(path.resolve().name)
    if m:
        n = int(m.group(1))
        if step is not None and step != n:
            raise CheckpointInputError(f"{path} is the folder of step {n}, not --step {step}")
        return (path.parent if path.name not in ("", ".", "..") else path.resolve().parent), n
    if (path / "fsdp_config.json").exists() or any(SHARD_RE.match(p.name) for p in path.iterdir()):
        raise CheckpointInputError(f"{path}: a role folder of one step (it holds the shards); pass the "
                                   "checkpoint root (trainer.default_local_dir), e.g. "
                                   f"{path.resolve().parent.parent}")
    return path, step


def read_tracker(root: Path) -> tuple[int | None, str | None]:
    """(N, None) from `latest_checkpointed_iteration.txt`, or (None, the problem)."""
    f = root / TRACKER
    if not f.is_file():
        return None, (f"{TRACKER}: missing: trainer.resume_mode=auto would train from scratch "
                      "(resume with trainer.resume_mode=resume_path trainer.resume_from_path=.../global_step_N)")
    text = f.read_bytes().decode(errors="replace").strip()
    if not re.fullmatch(r"\d+", text):
        return None, f"{TRACKER}: {text[:40]!r} is not a step number: trainer.resume_mode=auto would fail"
    return int(text), None


def _archive_problem(path: Path, size: int) -> str | None:
    if size == 0:
        return "empty (0 bytes)"
    try:
        whole = zipfile.is_zipfile(path)  # reads the trailer: a truncated torch.save archive has none
    except OSError as e:
        return f"unreadable: {e.strerror or e}"
    return None if whole else f"not a whole torch archive ({size} bytes; truncated?)"


def _world_size_from_config(role_dir: Path, rel: str, report: RoleReport) -> int | None:
    cfg = role_dir / "fsdp_config.json"
    if not cfg.is_file():
        report.problems.append(f"{rel}/fsdp_config.json: missing (rank 0 writes it after the shards: "
                               "the save did not finish?)")
        return None
    try:
        ws = json.loads(cfg.read_text()).get("world_size")
    except (OSError, UnicodeError, json.JSONDecodeError, AttributeError) as e:
        report.problems.append(f"{rel}/fsdp_config.json: unreadable: {e}")
        return None
    if not isinstance(ws, int) or isinstance(ws, bool) or ws < 1:
        report.problems.append(f"{rel}/fsdp_config.json: world_size {ws!r} is not a positive integer")
        return None
    return ws


def _check_hf_dir(hf: Path, rel: str, report: RoleReport) -> None:
    if not hf.is_dir():
        report.problems.append(f"{rel}: missing (rank 0 writes the model config and tokenizer there; "
                               "the merger needs them)")
        return
    cfg = hf / "config.json"
    try:
        config = json.loads(cfg.read_text())
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
        if not config.get("architectures"):
            report.problems.append(f"{rel}/config.json: no architectures (the merger picks the model class by it)")
    except FileNotFoundError:
        report.problems.append(f"{rel}/config.json: missing (the merger needs it)")
    except (OSError, UnicodeError, ValueError) as e:
        report.problems.append(f"{rel}/config.json: unreadable: {e}")
    if not any((hf / name).is_file() for name in TOKENIZER_FILES):
        report.problems.append(f"{rel}: no tokenizer ({', '.join(TOKENIZER_FILES)}): the merged model "
                               "would have none")
    report.chat_template = has_chat_template(hf)
    if not report.chat_template:
        report.warnings.append(f"{rel}: no chat template ({', '.join(CHAT_TEMPLATE_FILES)} or "
                               "tokenizer_config.json chat_template)")


class _Anything:
    """What `_KeysUnpickler` builds for every class a pickle names: takes any arguments and state,
    holds nothing, runs no code of the pickle's."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass


class _KeysUnpickler(pickle.Unpickler):
    """Reads a torch archive's `data.pkl` for the structure only: every class but `dict` and
    `OrderedDict` becomes `_Anything`, every storage reference None. Safe on any file (it imports
    and calls nothing), and needs no torch."""

    def find_class(self, module, name):
        if (module, name) in (("collections", "OrderedDict"), ("builtins", "dict")):
            import collections

            return collections.OrderedDict
        return _Anything

    def persistent_load(self, pid):
        return None


def model_shard_keys(path: Path) -> list[str] | None:
    """The state-dict keys of a `torch.save`d model shard, read from its archive's `data.pkl`
    without torch; None where that cannot be read (not a zip, no data.pkl, an odd pickle)."""
    try:
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if name is None or z.getinfo(name).file_size > KEYS_PICKLE_MAX:
                return None
            with z.open(name) as f:
                obj = _KeysUnpickler(f).load()
    except Exception:  # any failure only means: not known
        return None
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        return None
    return list(obj)


def is_adapter_key(key: str) -> bool:
    """A key of the adapter's, as verl tells them (a LoRA-only save keeps exactly these)."""
    return "lora_" in key or ".adapter_" in key


def read_lora_meta(path: Path) -> tuple[dict | None, str | None]:
    """(meta, None) from `lora_train_meta.json`, or (None, the problem): verl's merger takes the
    adapter's lora_alpha only from it (0, an adapter that does nothing, without it)."""
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeError, ValueError) as e:
        return None, f"unreadable: {e}"
    r, alpha = meta.get("r"), meta.get("lora_alpha")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        return None, f"r is {r!r}, not a positive integer (the adapter's rank)"
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha <= 0:
        return None, (f"lora_alpha is {alpha!r}, not a positive number: verl's merger would write lora_alpha 0 "
                      "(an adapter that does nothing)")
    return meta, None


def _check_lora(role_dir: Path, rel: str, ws: int, report: RoleReport) -> None:
    """A LoRA checkpoint: lora_train_meta.json there, or adapter keys in rank 0's model shard. Its
    rank and alpha, whether the save is LoRA-only, and what would make it unusable."""
    shard = role_dir / f"model_world_size_{ws}_rank_0.pt"
    keys = model_shard_keys(shard) if report.shards.get("model") else None
    adapter = keys is not None and any(is_adapter_key(k) for k in keys)
    meta_path = role_dir / LORA_META
    if not adapter and not meta_path.exists():
        return
    lora_only = None if keys is None else bool(keys) and all(is_adapter_key(k) for k in keys)
    meta, problem = read_lora_meta(meta_path)
    report.lora = {"r": (meta or {}).get("r"), "lora_alpha": (meta or {}).get("lora_alpha"),
                   "task_type": (meta or {}).get("task_type"), "lora_only": lora_only}
    if problem == "missing":
        report.problems.append(f"{rel}/{LORA_META}: missing, but the model shards hold a LoRA adapter "
                               "(lora_A/lora_B): verl's merger would write lora_alpha 0 (an adapter that does nothing)")
    elif problem:
        report.problems.append(f"{rel}/{LORA_META}: {problem}")
    if keys is not None and not adapter:
        report.problems.append(f"{rel}/{LORA_META}: says r {report.lora['r']}, but "
                               f"{shard.name} holds no adapter weights (lora_A/lora_B)")
    if lora_only:
        report.warnings.append(f"{rel}: a LoRA-only save (the model shards hold only the adapter): a resume "
                               "loads it onto actor_rollout_ref.model.path, which must be the same base model "
                               "the run trained; merging needs that base (export the adapter with "
                               "`tbt checkpoint merge --adapter-only`)")


def verify_role(root: Path, step: int, role: str) -> RoleReport:
    """Check `global_step_{step}/{role}`: every rank's shards, fsdp_config.json, huggingface/."""
    rel = f"global_step_{step}/{role}"
    role_dir = root / rel
    report = RoleReport(role=role)
    if not role_dir.is_dir():
        report.problems.append(f"{rel}: missing")
        return report
    ws = _world_size_from_config(role_dir, rel, report)
    found: dict[int, dict[str, dict[int, Path]]] = {}  # world size -> kind -> rank -> file
    for p in role_dir.iterdir():
        m = SHARD_RE.match(p.name)
        if m and p.is_file():
            found.setdefault(int(m.group(2)), {}).setdefault(m.group(1), {})[int(m.group(3))] = p
    if not found:
        report.problems.append(f"{rel}: no shards (model_world_size_W_rank_R.pt)")
        report.world_size = ws
        _check_hf_dir(role_dir / "huggingface", f"{rel}/huggingface", report)
        return report
    if ws is None:  # no usable fsdp_config.json: check the shards of the largest world size found
        ws = max(found)
    report.world_size = ws
    for other in sorted(set(found) - {ws}):
        n = sum(len(ranks) for ranks in found[other].values())
        report.warnings.append(f"{rel}: {n} shard file(s) of world size {other}, not {ws} (verl reads only "
                               f"world size {ws}'s): left from another save?")
    kinds = found.get(ws, {})
    for kind in SHARD_KINDS:
        ranks = kinds.get(kind, {})
        if not ranks:
            if kind == "model":
                report.problems.append(f"{rel}/model_world_size_{ws}_rank_*.pt: none of the {ws} rank(s)")
            else:
                report.warnings.append(f"{rel}: no {kind}_world_size_{ws}_rank_*.pt (saved without "
                                       f"'{CONTENTS[kind]}'? a resume must then leave it out of "
                                       f"actor_rollout_ref.actor.checkpoint.load_contents)")
            continue
        good = 0
        for r in range(ws):
            name = f"{kind}_world_size_{ws}_rank_{r}.pt"
            p = ranks.get(r)
            if p is None:
                report.problems.append(f"{rel}/{name}: missing (rank {r} of {ws})")
                continue
            size = p.stat().st_size
            problem = _archive_problem(p, size)
            if problem:
                report.problems.append(f"{rel}/{name}: {problem}")
                continue
            good += 1
            report.bytes += size
        for r in sorted(set(ranks) - set(range(ws))):
            report.warnings.append(f"{rel}/{kind}_world_size_{ws}_rank_{r}.pt: rank {r} is outside world size {ws}")
        report.shards[kind] = good
    _check_lora(role_dir, rel, ws, report)
    _check_hf_dir(role_dir / "huggingface", f"{rel}/huggingface", report)
    return report


def verify_step(root: Path, step: int) -> StepReport:
    rel = f"global_step_{step}"
    report = StepReport(step=step, path=str(root / rel))
    report.roles.append(verify_role(root, step, "actor"))
    if (root / rel / "critic").is_dir():
        report.roles.append(verify_role(root, step, "critic"))
    data = root / rel / "data.pt"
    if not data.is_file():
        report.problems.append(f"{rel}/data.pt: missing (the trainer writes the dataloader's state after the "
                               "shards: the save did not finish? a resume would restart the data order)")
    else:
        problem = _archive_problem(data, data.stat().st_size)
        if problem:
            report.problems.append(f"{rel}/data.pt: {problem}")
    for role in report.roles:
        report.problems += role.problems
        report.warnings += role.warnings
    return report


def verify(root: Path, steps: Iterable[int] | None = None) -> CheckpointReport:
    """Verify the given steps of the checkpoint folder `root` (default: every step found), and the
    tracker against what is there."""
    root = Path(root)
    report = CheckpointReport(root=str(root))
    have = list_steps(root)
    wanted = sorted(set(steps)) if steps is not None else have
    if not have:
        report.problems.append(f"{root}: no global_step_N folder (not a verl checkpoint folder; "
                               "trainer.default_local_dir is the one)")
    for n in wanted:
        if n in have:
            report.steps.append(verify_step(root, n))
        elif have:
            report.problems.append(f"global_step_{n}: missing (have: {', '.join(map(str, have))})")
    if not have:
        return report
    tracker, problem = read_tracker(root)
    report.tracker = tracker
    if problem:
        report.problems.append(problem)
    elif tracker not in have:
        report.problems.append(f"{TRACKER}: says {tracker}, but there is no global_step_{tracker}: "
                               "trainer.resume_mode=auto would train from scratch")
    else:
        bad = next((s for s in report.steps if s.step == tracker and not s.ok), None)
        if bad is not None:
            report.problems.append(f"{TRACKER}: points at global_step_{tracker}, which is incomplete: "
                                   "trainer.resume_mode=auto would fail to resume")
        newer = [n for n in have if n > tracker]
        if newer:
            report.warnings.append(f"global_step_{newer[-1]} is newer than the tracker's {tracker} (a save that "
                                   f"did not finish, or async_save): trainer.resume_mode=auto resumes from {tracker}")
    return report


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def lora_text(lora: dict) -> str:
    """`LoRA adapter r 8, alpha 16` (+ `, LoRA-only save`) for a report line."""
    only = ", LoRA-only save" if lora.get("lora_only") else ""
    r, alpha = (lora.get(k) for k in ("r", "lora_alpha"))
    return f"LoRA adapter r {'?' if r is None else r}, alpha {'?' if alpha is None else alpha}{only}"


def report_text(report: CheckpointReport) -> str:
    """A report for people: one line per step, its problems and warnings under it, then the tracker
    and how to resume."""
    lines = [f"checkpoint {report.root}"]
    for s in report.steps:
        parts = []
        for r in s.roles:
            shards = ", ".join(f"{k} {n}/{r.world_size}" for k, n in r.shards.items())
            parts.append(f"{r.role}: world size {r.world_size}, {shards or 'no shards'}, {_size(r.bytes)}"
                         + (f", {lora_text(r.lora)}" if r.lora else ""))
        lines.append(f"  global_step_{s.step:<6} {'ok' if s.ok else 'FAILED':<7} {'; '.join(parts)}")
        lines += [f"      {p}" for p in s.problems]
        lines += [f"      warning: {w}" for w in s.warnings]
    lines += [f"  {p}" for p in report.problems]
    lines += [f"  warning: {w}" for w in report.warnings]
    if report.tracker is not None:
        lines.append(f"  {TRACKER}: {report.tracker} (global_step_{report.tracker})")
    good = [s for s in report.steps if s.ok]
    if good:
        latest = next((s for s in good if s.step == report.tracker), None)
        root = Path(report.root).resolve()
        lines.append("resume (docs/training-verl.md):")
        if latest is not None:
            lines.append(f"  trainer.resume_mode=auto trainer.default_local_dir={root}   "
                         f"# from global_step_{latest.step}, on {latest.world_size} rank(s)")
        pick = good[-1]
        lines.append(f"  trainer.resume_mode=resume_path trainer.resume_from_path={root}/global_step_{pick.step}"
                     f"   # any complete step, on {pick.world_size} rank(s)")
        lora = (latest or pick).lora
        if lora:
            lines.append(f"  with actor_rollout_ref.model.lora_rank={lora['r']} actor_rollout_ref.model.lora_alpha="
                         f"{lora['lora_alpha']} and the same actor_rollout_ref.model.path (the base the adapter "
                         "was trained on)")
    n_bad = sum(not s.ok for s in report.steps)
    lines.append(f"{len(report.steps)} step(s) checked, {n_bad} incomplete, {len(report.problems)} other problem(s)"
                 if not report.ok else f"{len(report.steps)} step(s) checked: all complete")
    return "\n".join(lines) + "\n"

def has_chat_template(folder: Path) -> bool:
    """A chat template in a model or tokenizer folder: chat_template.jinja / .json, or the
    `chat_template` of tokenizer_config.json."""
    if any((folder / name).is_file() and (folder / name).stat().st_size > 0 for name in CHAT_TEMPLATE_FILES):
        return True
    try:
        return bool(json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template"))
    except (OSError, UnicodeError, ValueError, AttributeError):
        return False
