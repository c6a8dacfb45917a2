"""The quickstart's pool of the data layer (trainer/data/quickstart.py): the sample tasks probed and
prepared as `tbt quickstart` does (the same records' run identity, the same pool files, the same
lines), run as `python -m trainer.data.quickstart` by the CPU smoke (trainer/verl/cpu/smoke.py),
which runs no `tbt` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainer.data import quickstart as qs

ROOT = Path(__file__).resolve().parents[1]


def test_the_pool_is_probed_prepared_and_said_and_a_rerun_resumes(tmp_path, capsys):
    out = tmp_path / "qs"
    assert qs.main(["--out-dir", str(out), "--n", "1", "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("quickstart: probing with the SYNTHETIC policy (synthetic:dist=bimodal)")
    assert "0 already recorded" in said and "tasks per difficulty band" in said and "candidate(s):" in said
    assert said.rstrip().endswith(qs.pool_line(out))
    for f in ("train.yaml", "test.yaml", "train.parquet", "test.parquet", "bands.csv", "bands.png", "summary.json"):
        assert (out / "prepared" / f).is_file(), f
    records = [json.loads(line) for line in (out / "probes.jsonl").read_text().splitlines()]
    assert {r["run"]["policy"] for r in records} == {qs.POLICY} and len(records) == len({r["uid"] for r in records})
    summary = json.loads((out / "prepared" / "summary.json").read_text())
    assert summary["candidates"] == len(records)
    assert qs.main(["--out-dir", str(out), "--n", "1", "--no-progress"]) == 0  # resumed: nothing played again
    assert f"{len(records)} already recorded, 0 written now" in capsys.readouterr().out


def test_its_pieces_are_the_quickstarts_defaults(tmp_path):
    assert qs.default_policy(None, None) == qs.POLICY and qs.default_policy("openai:u#m", None) == "openai:u#m"
    assert qs.default_policy(None, tmp_path / "config.yaml") is None  # the config file's policy
    assert qs.synthetic_notice("openai:u#m") is None and "SYNTHETIC" in qs.synthetic_notice(qs.POLICY)
    plan = qs.probe_plan(tmp_path, 3)
    assert plan.output == tmp_path / qs.PROBES and plan.repeat == 3 and not plan.progress
    cfg = qs.probe_config()
    assert cfg.dataset == qs.SAMPLES and cfg.policy == qs.POLICY and cfg.config is None


def test_bad_input_is_exit_2_with_one_message(tmp_path, capsys):
    assert qs.main(["--out-dir", str(tmp_path), "--n", "0"]) == 2
    assert "--n 0" in capsys.readouterr().err
    assert qs.main(["--out-dir", str(tmp_path), "--policy", "nope:x", "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_cpu_smoke_makes_its_pool_with_the_data_layers_entry_point_once(tmp_path, monkeypatch):
    from trainer.verl.cpu import smoke

    ran = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: ran.append((cmd, kw)))
    assert smoke.quickstart(tmp_path) == tmp_path
    assert ran == [([sys.executable, "-m", "trainer.data.quickstart", "--out-dir", str(tmp_path)], {"check": True})]
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "train.parquet").write_bytes(b"")
    smoke.quickstart(tmp_path)
    assert len(ran) == 1  # made once


def test_no_library_module_runs_the_command_line():
    """trainer/cli.py is the top layer: below it nothing runs `python -m trainer.cli` (or imports it)."""
    wrong = [str(p.relative_to(ROOT)) for p in (ROOT / "trainer").rglob("*.py")
             if p.parent != ROOT / "trainer" and '"trainer.cli"' in p.read_text(encoding="utf-8")]
    assert wrong == []
