"""`python -m trainer.difficulty_cli STATE.json OUT.png [UID ...]`: plot the trace of a saved
online-difficulty state (trainer/verl/difficulty.py: `thinkingbox_difficulty/global_step_N.json`,
written beside verl's checkpoints), every task's posterior mean after every step, or only the
UIDs given. Exit 0 written, 2 a state that does not load or a UID it does not hold (one message).
`tbt report AGG --html R --difficulty STATE` puts the same plot in a report (docs/report.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainer.verl.difficulty import DifficultyError, DifficultyState, trace_png


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m trainer.difficulty_cli STATE.json OUT.png [UID ...]`: plot a saved state's trace."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("state", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("uids", nargs="*")
    a = ap.parse_args(argv)
    try:
        st = DifficultyState.load(a.state)
    except DifficultyError as e:
        print(f"error: {e}")
        return 2
    unknown = sorted(set(a.uids) - set(st.beliefs))
    if unknown:
        print(f"error: {a.state}: no task(s) {', '.join(unknown)}")
        return 2
    a.out.write_bytes(trace_png(st.to_json(), a.uids or None))
    return 0


__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
