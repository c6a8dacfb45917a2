"""What a relaunch will replay, moved aside before verl starts: nothing recorded twice, nothing lost.

verl resumes at the step after the checkpoint it loads (`trainer.resume_mode=auto`: the step of
`latest_checkpointed_iteration.txt`; none: step 0) and plays every later step again. What a killed
attempt wrote for those steps would otherwise stay where the replay appends:

- `records_dir/step_N.jsonl` (and `.errors.jsonl`, `val_step_N...`) of steps after the resumed one:
  episodes of a rolled-back attempt, partial for the step it was killed in, followed by the
  replay's own: the same step twice in one file (readers that dedupe keep the first, the
  rolled-back one), and a line cut by the kill glued to the next append;
- validation records of the resumed step itself when verl validates before training
  (`trainer.val_before_train`): it plays them again;
- lines of the file logger's metrics (VERL_FILE_LOGGER_PATH) for steps after the resumed one;
- fully-async: the records of the prompts in flight at the resumed checkpoint (drawn, not trained:
  verl patch 0013 saves them in `global_step_K/rollouter_inflight.pt` and the resumed rollouter
  plays them again, under the same group uid). A record's step there is one past the weight
  version its episode started on, so a prompt left in the queue at the save has records in a step
  the relaunch keeps: those lines (`run.group` among the saved ones) move aside, the rest stay.

`roll_back` moves them, before the launch starts verl, into `records_dir/rolled_back/STAMP/` (the
files as they were) and `METRICS.rolled_back.jsonl` beside the metrics (the lines, appended), and
cuts a torn last line off the record files it keeps, so the replay appends line-aligned. The
launch prints what moved. Only a launch runs it: no writer is running then.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.formats.record import cut_torn_tail

RECORD = re.compile(r"^(val_)?step_(\d+)(\.errors)?\.jsonl$")


INFLIGHT = "rollouter_inflight.pt"  # verl patch 0013's file in a fully-async checkpoint


@dataclass
class RolledBack:
    step: int  # the step the relaunch resumes from (0: from scratch)
    records: list[str] = field(default_factory=list)  # file names moved aside
    into: Path | None = None
    metrics_steps: list[int] = field(default_factory=list)  # steps whose metrics lines moved aside ...
    metrics_into: Path | None = None  # ... into this file
    repaired: list[str] = field(default_factory=list)  # kept record files whose torn last line was cut
    replayed: dict[str, int] = field(default_factory=dict)  # kept record files -> lines of prompts in flight moved

    def lines(self) -> list[str]:
        out = []
        if self.records:
            out.append(f"records of a rolled-back attempt moved to {self.into}: {', '.join(self.records)}")
        if self.metrics_steps:
            out.append(f"metrics lines of steps {', '.join(map(str, sorted(set(self.metrics_steps))))} moved to "
                       f"{self.metrics_into}")
        out += [f"{name}: a torn last line cut (its episode is not counted)" for name in self.repaired]
        if self.replayed:
            out.append(f"episodes of the prompts in flight at the checkpoint (played again) moved to {self.into}: "
                       + ", ".join(f"{n} of {name}" for name, n in sorted(self.replayed.items())))
        return out


def inflight_groups(root: Path, step: int) -> set[str]:
    """The verl group uids (`uid_<sample id>`) of the prompts a fully-async checkpoint had in flight
    (verl patch 0013); empty for a synchronous one or a checkpoint without the file."""
    path = root / f"global_step_{step}" / INFLIGHT
    if step <= 0 or not path.is_file():
        return set()
    import torch

    ledger = torch.load(path, weights_only=False)
    return {f"uid_{sid}" for sid, _epoch, _batch in ledger.get("inflight", [])}


def resumed_step(cfg: Any, root: Path) -> int | None:
    """The step verl will resume from: `resume_mode=auto` the tracker's (0 without one),
    `disable` 0, `resume_path` the step its path names; None when that cannot be told."""
    from trainer.verl.checkpoint import TRACKER, read_tracker
    from trainer.verl.preflight import cfg_get

    mode = str(cfg_get(cfg, "trainer.resume_mode", "auto") or "auto")
    if mode == "disable":
        return 0
    if mode == "auto":
        if not (root / TRACKER).is_file():
            return 0
        return read_tracker(root)[0]
    found = re.search(r"global_step_(\d+)", str(cfg_get(cfg, "trainer.resume_from_path", "") or ""))
    return int(found.group(1)) if found else None


def roll_back(records_dir: Path | None, metrics: Path | None, step: int, *, val_before_train: bool = False,
              stamp: str | None = None, replayed_groups: set[str] = frozenset()) -> RolledBack:
    """Move aside what a run resumed at `step` replays (module docstring); `replayed_groups`: the
    group uids a fully-async checkpoint had in flight (`inflight_groups`)."""
    out = RolledBack(step)
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S")

    def into() -> Path:  # a directory of its own for this relaunch, never one a previous filled
        if out.into is None:
            out.into = records_dir / "rolled_back" / stamp
            k = 1
            while out.into.exists():
                k += 1
                out.into = records_dir / "rolled_back" / f"{stamp}-{k}"
            out.into.mkdir(parents=True)
        return out.into

    if records_dir is not None and records_dir.is_dir():
        for path in sorted(records_dir.iterdir()):
            m = RECORD.match(path.name)
            if not m or not path.is_file():
                continue
            n, validation = int(m.group(2)), bool(m.group(1))
            if n > step or (validation and val_before_train and n == step):
                os.replace(path, into() / path.name)
                out.records.append(path.name)
                continue
            if cut_torn_tail(path):  # as `read_records(repair=True)` cuts it: the episode is re-run
                out.repaired.append(path.name)
            if replayed_groups and not validation:
                moved = _move_groups(path, replayed_groups, into)
                if moved:
                    out.replayed[path.name] = moved
    if metrics is not None and metrics.is_file():
        keep, moved = [], []
        for line in metrics.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                n = json.loads(line).get("step")
            except (ValueError, AttributeError):
                n = None  # a torn line: the replay's own line follows it
                if not line.endswith("\n"):
                    moved.append(line + "\n")
                    continue
            if isinstance(n, int) and n > step:
                moved.append(line if line.endswith("\n") else line + "\n")
                out.metrics_steps.append(n)
            else:
                keep.append(line)
        if moved:
            out.metrics_into = metrics.with_name(metrics.stem + ".rolled_back.jsonl")
            with open(metrics.with_name(metrics.stem + ".rolled_back.jsonl"), "a", encoding="utf-8") as f:
                f.writelines(moved)
            tmp = metrics.with_name(f".{metrics.name}.tmp")
            tmp.write_text("".join(keep), encoding="utf-8")
            os.replace(tmp, metrics)
    return out


def _move_groups(path: Path, groups: set[str], into) -> int:
    """Move the lines of `path` whose `run.group` is in `groups` to into()/name (appended); the
    rest is rewritten in place (a temporary file renamed over it). Returns the lines moved."""
    keep, moved = [], []
    with open(path, "rb") as f:
        for line in f:
            try:
                group = (json.loads(line).get("run") or {}).get("group")
            except (ValueError, AttributeError):
                group = None
            (moved if group in groups else keep).append(line)
    if moved:
        with open(into() / path.name, "ab") as f:
            f.writelines(moved)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(b"".join(keep))
        os.replace(tmp, path)
    return len(moved)


__all__ = ["INFLIGHT", "RolledBack", "inflight_groups", "resumed_step", "roll_back"]
