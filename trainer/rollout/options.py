"""How a run's option is declared: once, on the dataclass field that holds it (`RunConfig`,
`EpisodeConfig`, `RunPlan`), with its default, its command-line flags and its help text. The
command line (trainer/run_cli.py `takes`) builds each command's options from these fields; a field
without flags has no option (training's, or a value set by the code)."""

from __future__ import annotations

from dataclasses import MISSING, Field, field
from typing import Any

KEY = "tbt_option"


def option(default: Any = MISSING, *flags: str, help: str = "", factory: Any = MISSING, argument: bool = False,
           cli_default: Any = MISSING, **click: Any) -> Any:
    """A dataclass field with a default and, when `flags` (or `argument`) are given, a command-line
    option: `flags` as click declares them, `help`, click's own settings (`exists`, `min`, ...) and,
    where a person's default differs from a library caller's, `cli_default`."""
    meta = ({KEY: {"flags": flags, "help": help, "argument": argument, "click": click, "cli_default": cli_default}}
            if flags or argument else {})
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def declared(f: Field) -> dict[str, Any] | None:
    """The command-line declaration of a field (`option`), or None when it has none."""
    return f.metadata.get(KEY)


__all__ = ["KEY", "declared", "option"]
