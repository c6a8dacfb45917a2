"""The one sampling config (configs/sampling.yaml): how the agent's turns are sampled in training
(trainer/verl/launch.py maps it onto `actor_rollout_ref.rollout.*` and `thinkingbox.max_turn_tokens`)
and in `tbt run`, `tbt probe`, `tbt eval` and `tbt quickstart` (the policy's defaults; a policy
spec's own options, e.g. `openai:URL#MODEL,temperature=0`, override them, and `--sampling FILE`
reads another file).

Keys (all optional; a missing key keeps `SamplingParams`' default):

    temperature       float >= 0
    top_k             int; 0 or less (or null): off
    top_p             float in (0, 1]
    max_turn_tokens   int >= 1: tokens one model turn may generate
"""

from __future__ import annotations

from pathlib import Path

import yaml

from trainer.rollout.policy import SamplingParams

SAMPLING_FILE = Path(__file__).resolve().parents[2] / "configs" / "sampling.yaml"
KEYS = ("temperature", "top_k", "top_p", "max_turn_tokens")


class SamplingError(ValueError):
    """A sampling config that cannot be read (names the file and key)."""


def load_sampling(path: str | Path | None = None) -> SamplingParams:
    """The `SamplingParams` of a sampling config (default: configs/sampling.yaml)."""
    path = Path(path) if path is not None else SAMPLING_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise SamplingError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SamplingError(f"{path}: not YAML ({e})") from None
    if not isinstance(data, dict):
        raise SamplingError(f"{path}: expected a mapping of {', '.join(KEYS)}")
    unknown = sorted(set(map(str, data)) - set(KEYS))
    if unknown:
        raise SamplingError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    d = SamplingParams()

    def num(key: str, cast, default, ok) -> object:
        v = data.get(key, default)
        if v is None and key == "top_k":
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (cast is int and not float(v).is_integer()):
            raise SamplingError(f"{path}: {key}: expected a number, got {v!r}")
        if not ok(v):
            raise SamplingError(f"{path}: {key}: {v!r} is out of range")
        return cast(v)

    top_k = num("top_k", int, d.top_k if d.top_k is not None else 0, lambda v: True)
    return SamplingParams(temperature=num("temperature", float, d.temperature, lambda v: v >= 0),
                          top_p=num("top_p", float, d.top_p, lambda v: 0 < v <= 1),
                          top_k=top_k if top_k and top_k > 0 else None,
                          max_tokens=num("max_turn_tokens", int, d.max_tokens, lambda v: v >= 1))


__all__ = ["KEYS", "SAMPLING_FILE", "SamplingError", "load_sampling"]
