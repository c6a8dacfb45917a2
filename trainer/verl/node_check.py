"""`python -m trainer.verl.node_check --role head|worker [--dry-run]`: this node's checks before
Ray starts on it (scripts/start_ray.sh runs it; the checks are trainer/verl/nodes.py's).

Always: verl with every patch in force, the process hooks loaded by verl. With `CONFIG` set (and
what it needs, as scripts/run_train.sh takes it): the config's input paths, the datasets its
prepared parquet names, its user / judge endpoints from this node and their key variables here.
With `CKPT_DIR` set: the head writes a marker there, and each worker must read it (one shared
filesystem). Exit 0 ready, 1 not (each problem with its fix), 2 a bad config.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from trainer.verl.config_read import plan
from trainer.verl.nodes import HEAD_MARKER, NodeSpec, checks, describe, node_report, spec_of
from trainer.verl.preflight import LaunchError


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """`python -m trainer.verl.node_check --role head|worker`: this node's checks (scripts/start_ray.sh)."""
    env = dict(os.environ if env is None else env)
    ap = argparse.ArgumentParser(prog="python -m trainer.verl.node_check", description=main.__doc__)
    ap.add_argument("--role", choices=("head", "worker"), required=True)
    ap.add_argument("--dry-run", action="store_true", help="print what would be checked, check nothing")
    args = ap.parse_args(argv)
    name = f"{env.get('NODE_IP') or socket.gethostname()} ({args.role})"
    spec = NodeSpec()
    if env.get("CONFIG"):
        try:
            _, cfg, _, _ = plan([], env)
        except LaunchError as e:
            print(f"start_ray.sh: node {name}: CONFIG={env['CONFIG']}: {e}", file=sys.stderr)
            return 2
        spec = spec_of(cfg)
    ckpt = env.get("CKPT_DIR", "")
    marker = Path(ckpt) / HEAD_MARKER if ckpt else None
    if marker is not None and args.role == "worker":
        spec = replace(spec, marker=str(marker), token="", marker_by="the head (its scripts/start_ray.sh)")
    if args.dry_run:
        print(f"# node checks of {name} (scripts/start_ray.sh runs them before ray start)")
        lines = describe(spec)
        shared = next(i for i, line in enumerate(lines) if line.startswith("the checkpoint directory"))
        if args.role == "worker" and marker is not None:
            lines[shared] = f"CKPT_DIR shared with the head: its marker {marker} is here"
        else:
            lines.pop(shared)
        for line in lines:
            print(f"would check  {line}")
        return 0
    if marker is not None and args.role == "head":
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("", encoding="utf-8")
    report = node_report(spec, name)
    for c in checks([report], {}):
        print(c.line())
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
