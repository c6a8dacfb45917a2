"""The patched verl: which of trainer/verl/patches/*.patch are in force in an installed verl, and
applying them (scripts/prepare_verl.py, scripts/verify_verl_install.py, scripts/run_train.sh).

Each patch names its target file and that file's stock SHA-256 in its header (`# Against: verl
0.9.0, <path>`, `# Stock sha256: <hex>`). The state of a patch in a site directory, by content:

    applied     reversing it would succeed (the patched text is there)
    stock       the target is byte-identical to verl 0.9.0's file (the hash matches): it applies
    foreign     neither: a different verl, or edited by hand (never touched; an error names it)

Patches are applied in place with `patch -p1` in the directory holding the `verl` package, after
the version (0.9.0) and the stock hash are checked. Applying is idempotent. A re-sync that puts
the stock file back (`uv sync --reinstall`, a fresh venv) is undone by the next
`scripts/run_train.sh`, which applies them before every real launch, and is reported by
`verify_verl_install.py` and the dry run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

PATCHES = Path(__file__).resolve().parent / "patches"
VERL_VERSION = "0.9.0"


class PatchError(RuntimeError):
    """A verl that the patches must not touch (the message names the file and why)."""


@dataclass(frozen=True)
class Patch:
    path: Path
    target: str  # relative to the site directory, e.g. verl/trainer/ppo/v1/replay_buffer.py
    stock_sha256: str


@dataclass(frozen=True)
class State:
    patch: Patch
    state: str  # applied | stock | foreign
    detail: str = ""


def patches(directory: Path = PATCHES) -> list[Patch]:
    out = []
    for p in sorted(directory.glob("*.patch")):
        text = p.read_text(encoding="utf-8")
        target = re.search(r"^\+\+\+ b/(\S+)", text, re.M)
        sha = re.search(r"^# Stock sha256: ([0-9a-f]{64})", text, re.M)
        if not target or not sha:
            raise PatchError(f"{p}: a patch needs a '+++ b/<path>' line and a '# Stock sha256:' header line")
        out.append(Patch(p, target.group(1), sha.group(1)))
    return out


def site_of_installed() -> Path:
    """The directory holding the `verl` package of this interpreter."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise PatchError("verl is not installed in this environment (run `uv sync`)")
    return Path(list(spec.submodule_search_locations)[0]).parent


def installed_version(site: Path) -> str:
    v = site / "verl" / "version" / "version"
    if not v.is_file():
        raise PatchError(f"{site}/verl has no version file: not a verl installation")
    return v.read_text().strip()


def _patch(site: Path, p: Patch, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["patch", "-p1", "--force", "--silent", *args, "-i", str(p.path)], cwd=site,
                          capture_output=True, text=True)


def state(site: Path, p: Patch) -> State:
    target = site / p.target
    if not target.is_file():
        return State(p, "foreign", f"{target} does not exist")
    if hashlib.sha256(target.read_bytes()).hexdigest() == p.stock_sha256:
        return State(p, "stock", f"{p.target} is verl {VERL_VERSION}'s file")
    if _patch(site, p, "--reverse", "--dry-run").returncode == 0:
        return State(p, "applied", f"{p.target} carries the patch")
    return State(p, "foreign", f"{p.target} is neither verl {VERL_VERSION}'s file nor patched by {p.path.name} "
                 "(an older patch, or edited: `uv sync --reinstall-package verl` restores the stock file)")


def states(site: Path) -> list[State]:
    version = installed_version(site)
    if version != VERL_VERSION:
        raise PatchError(f"{site}/verl is version {version}; the patches are for {VERL_VERSION} (uv sync installs it)")
    return [state(site, p) for p in patches()]


def apply_all(site: Path) -> list[State]:
    """Apply every patch that is not in force yet; returns the states after."""
    out = []
    for s in states(site):
        if s.state == "foreign":
            raise PatchError(s.detail)
        if s.state == "stock":
            r = _patch(site, s.patch, "--forward")
            if r.returncode != 0:
                raise PatchError(f"{s.patch.path.name} did not apply to {s.patch.target}: {r.stdout}{r.stderr}")
            s = state(site, s.patch)
        out.append(s)
    return out


__all__ = ["PATCHES", "VERL_VERSION", "Patch", "PatchError", "State", "apply_all", "installed_version", "patches",
           "site_of_installed", "state", "states"]
