"""Put the project's patches (trainer/verl/patches) into the installed verl 0.9.0, idempotently.

    python scripts/prepare_verl.py --install        apply what is not applied yet
    python scripts/prepare_verl.py                  report only (exit 1 if a patch is not in force)
    python scripts/prepare_verl.py --site DIR ...   another site directory (the one holding `verl/`)

Checks first: the version is 0.9.0 and each target file is verl's stock file (its SHA-256) or
already patched; anything else is an error naming the file, and nothing is changed.
scripts/run_train.sh runs `--install` before every real launch, so a re-sync that restores the
stock files (`uv sync --reinstall`, a new venv) cannot silently train on unpatched verl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainer.verl.patching import PatchError, apply_all, site_of_installed, states  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--install", action="store_true", help="apply the patches that are not in force")
    ap.add_argument("--site", type=Path, help="the directory holding `verl/` (default: this interpreter's)")
    args = ap.parse_args(argv)
    try:
        site = args.site or site_of_installed()
        result = apply_all(site) if args.install else states(site)
    except PatchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in result:
        print(f"{s.patch.path.name}: {s.state} ({s.detail})")
    return 0 if all(s.state == "applied" for s in result) else 1


if __name__ == "__main__":
    sys.exit(main())
