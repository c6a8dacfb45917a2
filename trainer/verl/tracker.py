"""The run's tracker settings for the driver and every Ray worker: with wandb among
`trainer.logger`, WANDB_MODE (offline unless the launch's environment says otherwise) and the
non-secret WANDB_* variables set there reach every worker (config_read.cluster_env on a cluster
the launch did not start), so verl's TaskRunner starts wandb as the launch means it to on
whichever node Ray places it. The key is never forwarded: a node holds its own (WANDB_API_KEY or
`wandb login`'s ~/.netrc), as it holds the user / judge endpoints' keys; trainer/verl/node_needs.py
checks it there."""

from __future__ import annotations

import netrc
from typing import Any, Mapping

from trainer.verl.preflight import cfg_get

WANDB_FORWARDED = ("WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_BASE_URL", "WANDB_DIR", "WANDB_RUN_GROUP",
                   "WANDB_TAGS")
WANDB_LOCAL = ("offline", "disabled", "dryrun")  # modes that need no key


def loggers(cfg: Any) -> list[str]:
    found = cfg_get(cfg, "trainer.logger", []) or []
    return [str(x) for x in ([found] if isinstance(found, str) else list(found))]


def tracker_env(cfg: Any, env: Mapping[str, str]) -> dict[str, str]:
    """The tracker's variables for the driver and every worker (module docstring)."""
    if "wandb" not in loggers(cfg):
        return {}
    out = {k: env[k] for k in WANDB_FORWARDED if env.get(k)}
    out.setdefault("WANDB_MODE", "offline")
    return out


def wandb_key_here(env: Mapping[str, str]) -> bool:
    """Whether wandb finds a key in this environment: WANDB_API_KEY, or a ~/.netrc entry (or
    $NETRC's) for its host, as `wandb login` writes it."""
    if env.get("WANDB_API_KEY"):
        return True
    host = str(env.get("WANDB_BASE_URL", "https://api.wandb.ai")).split("://")[-1].split("/")[0].split(":")[0]
    try:
        return netrc.netrc(env.get("NETRC") or None).authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


__all__ = ["WANDB_FORWARDED", "WANDB_LOCAL", "loggers", "tracker_env", "wandb_key_here"]
