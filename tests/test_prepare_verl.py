"""scripts/prepare_verl.py and verify_verl_install.py on a copy of the installed verl (the
environment's own verl is left alone): apply, idempotence, a re-sync restoring stock files,
a foreign file and a wrong version refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from trainer.verl.patching import patches, site_of_installed, state

ROOT = Path(__file__).resolve().parents[1]


def fake_site(tmp_path: Path, version: str = "0.9.0") -> Path:
    """A site directory with verl's version file and the stock targets of every patch."""
    site = tmp_path / "site"
    real = site_of_installed()
    (site / "verl" / "version").mkdir(parents=True)
    (site / "verl" / "version" / "version").write_text(version + "\n")
    for p in patches():
        dst = site / p.target
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real / p.target, dst)
        if state(site, p).state == "applied":  # this environment's verl is patched: put the stock file back
            subprocess.run(["patch", "-p1", "--reverse", "--force", "-i", str(p.path)], cwd=site, check=True,
                           capture_output=True)
        assert state(site, p).state == "stock"
    return site


def script(name: str, *args: str):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True, text=True, timeout=120)


def test_install_then_verify_then_idempotent_then_resync(tmp_path):
    site = fake_site(tmp_path)
    assert script("verify_verl_install.py", "--site", str(site), "--no-pip-check").returncode == 1
    r = script("prepare_verl.py", "--install", "--site", str(site))
    assert r.returncode == 0 and "applied" in r.stdout, r.stdout + r.stderr
    patched = {p.target: (site / p.target).read_bytes() for p in patches()}
    r = script("prepare_verl.py", "--install", "--site", str(site))  # again: nothing changes
    assert r.returncode == 0 and {p.target: (site / p.target).read_bytes() for p in patches()} == patched
    v = script("verify_verl_install.py", "--site", str(site), "--no-pip-check")
    assert v.returncode == 0 and "ok    0001" in v.stdout, v.stdout
    # a re-sync that restores verl's stock file is seen, and the next --install (what run_train.sh runs) redoes it
    restored = fake_site(tmp_path / "again")
    for p in patches():
        shutil.copy(restored / p.target, site / p.target)
    assert script("verify_verl_install.py", "--site", str(site), "--no-pip-check").returncode == 1
    assert script("prepare_verl.py", "--install", "--site", str(site)).returncode == 0
    assert script("verify_verl_install.py", "--site", str(site), "--no-pip-check").returncode == 0


def test_a_foreign_file_is_refused_and_left_as_it_is(tmp_path):
    site = fake_site(tmp_path)
    p = patches()[0]
    (site / p.target).write_text((site / p.target).read_text() + "\n# edited by hand\n")
    before = (site / p.target).read_bytes()
    r = script("prepare_verl.py", "--install", "--site", str(site))
    assert r.returncode == 2 and "neither verl 0.9.0's file nor patched" in r.stderr
    assert (site / p.target).read_bytes() == before


def test_a_wrong_verl_version_is_refused(tmp_path):
    site = fake_site(tmp_path, version="0.9.1")
    r = script("prepare_verl.py", "--install", "--site", str(site))
    assert r.returncode == 2 and "version 0.9.1" in r.stderr


def test_verify_checks_the_environment_with_uv_pip_check():
    r = script("verify_verl_install.py")
    assert "uv pip check" in r.stdout and "version 0.9.0" in r.stdout
