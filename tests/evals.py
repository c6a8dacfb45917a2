"""What the evaluation tests share: `tbt` in process, and real evaluations of the sample toy tasks
(tbt eval with synthetic policies: real episodes, records and agg.json)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from trainer.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
TOY = SAMPLES / "lists" / "toy.yaml"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def evaluate(d: Path, runs: dict[str, str], repeat: int) -> Path:
    """`tbt eval` of the toy tasks once per run (name -> policy spec): d/NAME.jsonl and d/NAME.agg.json."""
    for name, policy in runs.items():
        res = cli("eval", SAMPLES, "--test-list", TOY, "--policy", policy, "-n", repeat, "-o", d / f"{name}.jsonl",
                  "--aggregate-output", d / f"{name}.agg.json", "--no-progress")
        assert res.exit_code == 0, res.output
    return d
