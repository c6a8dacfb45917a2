"""The patched verl: which of trainer/verl/patches/*.patch are in force in an installed verl, and
applying them (scripts/prepare_verl.py, scripts/verify_verl_install.py, scripts/run_train.sh).

Each patch names its target file and that file's stock SHA-256 in its header (`# Against: verl
0.9.0, <path>`, `# Stock sha256: <hex>`). Several patches may change one file, in series (in the
order of their names): each later one names the one before it and the SHA-256 of the file that one
leaves (`# After: <earlier patch file name>`, `# Base sha256: <hex>`), and applies to exactly that.
The state of a patch in a site directory, by content (the position of its series in the file):

    applied     it and the patches before it in its series are in the file (the file is one of the
                series' bases after it, or undoing the series' last patch gives that one's base)
    stock       the file is its base (verl 0.9.0's file, or that file with the series' earlier
                patches), or an earlier base of its series: it applies (after those earlier ones)
    foreign     none of these: a different verl, or edited by hand (never touched; an error names it)

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
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PATCHES = Path(__file__).resolve().parent / "patches"
VERL_VERSION = "0.9.0"


class PatchError(RuntimeError):
    """A verl that the patches must not touch (the message names the file and why)."""


@dataclass(frozen=True)
class Patch:
    path: Path
    target: str  # relative to the site directory, e.g. verl/trainer/ppo/v1/replay_buffer.py
    base_sha256: str  # the file it applies to: verl's own, or (after: ...) the file the patch before it leaves
    after: Optional[str] = None  # the file name of the patch before it in its target's series


@dataclass(frozen=True)
class State:
    patch: Patch
    state: str  # applied | stock | foreign
    detail: str = ""


def patches(directory: Optional[Path] = None) -> list[Patch]:
    out = []
    for p in sorted((directory or PATCHES).glob("*.patch")):
        text = p.read_text(encoding="utf-8")
        target = re.search(r"^\+\+\+ b/(\S+)", text, re.M)
        stock = re.search(r"^# Stock sha256: ([0-9a-f]{64})", text, re.M)
        base = re.search(r"^# Base sha256: ([0-9a-f]{64})", text, re.M)
        after = re.search(r"^# After: (\S+\.patch)", text, re.M)
        if not target or not (stock or base):
            raise PatchError(f"{p}: a patch needs a '+++ b/<path>' line and a '# Stock sha256:' header line")
        earlier = [q for q in out if q.target == target.group(1)]
        if earlier and not (after and base and after.group(1) == earlier[-1].path.name):
            raise PatchError(f"{p.name}: {target.group(1)} is patched by {earlier[-1].path.name} before it: "
                             f"name it ('# After: {earlier[-1].path.name}') and the file it leaves ('# Base sha256:')")
        if not earlier and (after or not stock):
            raise PatchError(f"{p.name}: the first patch of {target.group(1)} names verl's file ('# Stock sha256:') "
                             "and no '# After:'")
        out.append(Patch(p, target.group(1), (base or stock).group(1), after.group(1) if after else None))
    return out


def series(p: Patch, all_patches: Optional[list[Patch]] = None) -> list[Patch]:
    """The patches of `p`'s target file, in the order they apply (`p` among them)."""
    return [q for q in (patches(p.path.parent) if all_patches is None else all_patches) if q.target == p.target]


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def applied_count(site: Path, chain: list[Patch]) -> Optional[int]:
    """How many of `chain` (one target's series, in order) the target file in `site` carries, by
    content: k where the file is the base of the k-th (0: verl's file), len(chain) where undoing
    the last gives its base, None for anything else (foreign)."""
    target = site / chain[0].target
    if not target.is_file():
        return None
    sha = _sha256(target)
    for k, q in enumerate(chain):
        if sha == q.base_sha256:
            return k
    with tempfile.TemporaryDirectory() as tmp:  # the whole series in force: undo the last one on a copy
        copy = Path(tmp) / chain[-1].target
        copy.parent.mkdir(parents=True)
        shutil.copyfile(target, copy)
        if _patch(Path(tmp), chain[-1], "--reverse").returncode == 0 and _sha256(copy) == chain[-1].base_sha256:
            return len(chain)
    return None


def state(site: Path, p: Patch, all_patches: Optional[list[Patch]] = None) -> State:
    target = site / p.target
    chain = series(p, all_patches)
    k = chain.index(p)
    n = applied_count(site, chain)
    if n is None:
        if not target.is_file():
            return State(p, "foreign", f"{target} does not exist")
        return State(p, "foreign", f"{p.target} is neither verl {VERL_VERSION}'s file nor patched by "
                     f"{', '.join(q.path.name for q in chain)} (an older patch, or edited: "
                     "`uv sync --reinstall-package verl` restores the stock file)")
    if n > k:
        return State(p, "applied", f"{p.target} carries the patch")
    if n == 0:
        return State(p, "stock", f"{p.target} is verl {VERL_VERSION}'s file"
                     + (f" (it applies after {', '.join(q.path.name for q in chain[:k])})" if k else ""))
    return State(p, "stock", f"{p.target} carries {', '.join(q.path.name for q in chain[:n])}"
                 + ("" if n == k else f" (it applies after {', '.join(q.path.name for q in chain[n:k])})"))


def states(site: Path) -> list[State]:
    version = installed_version(site)
    if version != VERL_VERSION:
        raise PatchError(f"{site}/verl is version {version}; the patches are for {VERL_VERSION} (uv sync installs it)")
    every = patches()
    return [state(site, p, every) for p in every]


def apply_all(site: Path) -> list[State]:
    """Apply every patch that is not in force yet, in order; returns the states after. A foreign
    target stops it before anything is written."""
    for s in states(site):
        if s.state == "foreign":
            raise PatchError(s.detail)
    every = patches()
    out = []
    for p in every:
        s = state(site, p, every)
        if s.state == "stock":
            r = _patch(site, p, "--forward")
            if r.returncode != 0:
                raise PatchError(f"{p.path.name} did not apply to {p.target}: {r.stdout}{r.stderr}")
            s = state(site, p, every)
            if s.state != "applied":
                raise PatchError(f"{p.path.name} applied to {p.target} but left it {s.state}: {s.detail}")
        out.append(s)
    return out


def checkout(site: Path, target: str, keep: int = 0) -> None:
    """Put `target` in `site` (a copy of verl: the tests) at its series' first `keep` patches, undoing
    or applying the others: keep=0 gives verl's own file. A foreign file raises PatchError."""
    chain = [q for q in patches() if q.target == target]
    n = applied_count(site, chain)
    if n is None:
        raise PatchError(f"{site / target} is foreign to {', '.join(q.path.name for q in chain)}")
    for q in reversed(chain[keep:n]):
        if _patch(site, q, "--reverse").returncode != 0:
            raise PatchError(f"{q.path.name} did not reverse in {site / target}")
    for q in chain[n:keep]:
        if _patch(site, q, "--forward").returncode != 0:
            raise PatchError(f"{q.path.name} did not apply in {site / target}")


__all__ = ["PATCHES", "VERL_VERSION", "Patch", "PatchError", "State", "applied_count", "apply_all", "checkout",
           "installed_version", "patches", "series", "site_of_installed", "state", "states"]
