"""Error types shared by every stage.

Two families, never confused:
- `TaskFormatError`: the *dataset* is wrong (bad YAML, unknown key, missing scenario ...).
  It always names the file, and where it can, the line and the key.
- `SandboxError`: the *infrastructure* failed (a server would not start, answer or report): a
  system error for the episode. A task-format error is a user's mistake in a file, an
  infrastructure error is nobody's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(eq=False)
class TaskFormatError(Exception):
    """A malformed task file. `str()` reads `file:line: key: message` (parts omitted when unknown)."""

    file: Path | str
    message: str
    line: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        where = str(self.file) + (f":{self.line}" if self.line else "")
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"

    def to_dict(self) -> dict:
        return {"file": str(self.file), "line": self.line, "key": self.key, "message": self.message}


class DatasetError(Exception):
    """Raised by strict loading: carries every `TaskFormatError` found, not only the first."""

    def __init__(self, errors: list[TaskFormatError]):
        self.errors = errors
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"{len(errors)} error(s) in dataset:\n{lines}")


class SandboxError(RuntimeError):
    """An infrastructure fault: a system error for the whole episode, never an agent failure.

    `stage` is one of `connect`, `init`, `list_tools`, `call`, `effects`, `teardown`.
    """

    def __init__(self, server: str | None, stage: str, cause: str):
        self.server, self.stage, self.cause = server, stage, cause
        super().__init__(f"server {server!r}, {stage}: {cause}" if server else f"{stage}: {cause}")

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "stage": self.stage, "cause": self.cause}
