"""The reader of episode records moved one layer down, to trainer/rollout/attempts.py (probes read
through it too). These names stay importable from here only until trainer/eval_cli.py and the tests
import them from there; remove this module then."""

from __future__ import annotations

from trainer.rollout.attempts import Attempt, AttemptError, ReadResult, parse_attempt, read_attempts

__all__ = ["Attempt", "AttemptError", "ReadResult", "parse_attempt", "read_attempts"]
