"""Check the verl this environment trains with: version 0.9.0, every project patch in force (by
content), and `uv pip check` clean; print what was verified.

    python scripts/verify_verl_install.py [--site DIR] [--no-pip-check]

Exit 0 when all hold, 1 otherwise (each failing check named).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.verl.patching import VERL_VERSION, PatchError, installed_version, site_of_installed, states  # noqa: E402


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
            good = r.returncode == 0
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'}  uv pip check: {(r.stdout + r.stderr).strip().splitlines()[-1:] or ['ok']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
