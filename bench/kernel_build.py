"""The GPU node's kernel build, rehearsed on this machine: scripts/setup_node.sh into its own
environment, its steps timed, flash-attn's build stopped after --flash-seconds and measured by
the kernel objects it had compiled by then.

    uv run python bench/kernel_build.py [--env .deps/node-env] [--flash-seconds 900] [--json]

Needs nvcc of the locked torch's CUDA major (13) and gcc; no GPU. Run it as it is: the environment
(~9 GB) and uv's cache keep what was built, so a second run times only what is left (say so with
--fresh, which builds causal-conv1d again from a clean cache entry). Printed: each step's seconds
and result, causal-conv1d's build time and whether it imports, flash-attn's compiled kernel
objects of all it has and their rate, and the extrapolated whole build on this many cores. Not
in CI: the causal-conv1d build alone takes tens of minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def objects(since: float, name: str) -> tuple[int, int, Path | None]:
    """(kernel objects compiled, kernel sources to compile) of the newest build of `name` in uv's cache."""
    cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    builds = [p for p in cache.glob(f"sdists-v*/pypi/{name}/*/*/src/build") if p.stat().st_mtime >= since - 5]
    if not builds:
        return 0, 0, None
    build = max(builds, key=lambda p: p.stat().st_mtime)
    ninja = next(build.glob("temp.*/build.ninja"), None)
    total = len(re.findall(r"^build \S+\.o: cuda_compile", ninja.read_text(), re.M)) if ninja else 0
    done = sum(1 for _ in build.glob("temp.*/**/*.o"))
    return done, total, build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default=str(ROOT / ".deps" / "node-env"))
    ap.add_argument("--flash-seconds", type=int, default=900)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": args.env, "BUILD_TIMEOUT": str(args.flash_seconds)}
    t0 = time.time()
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "setup_node.sh")], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    steps: dict[str, float] = {}
    lines = []
    current, started = None, t0
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("== "):
            now = time.time()
            if current:
                steps[current] = round(now - started, 1)
            current, started = line[3:].strip(), now
        print(line, end="", file=sys.stderr)
    rc = proc.wait()
    if current:
        steps[current] = round(time.time() - started, 1)
    done, total, _ = objects(t0, "flash-attn")
    flash_s = next((v for k, v in steps.items() if k.startswith("5/6")), 0.0)
    cores = os.cpu_count() or 1
    out = {"exit": rc, "cores": cores, "steps_s": steps,
           "causal_conv1d": next((x for x in lines if x.startswith("causal-conv1d:")), ""),
           "flash_attn": next((x for x in lines if x.startswith("flash-attn:")), ""),
           "flash_attn_objects": f"{done} of {total}" if total else "none started",
           "flash_attn_whole_s_estimate": round(flash_s / done * total) if done and total and rc == 3 else None}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0 if rc in (0, 3) else rc


if __name__ == "__main__":
    sys.exit(main())
