"""The quickstart's training pool: the sample tasks probed by a base policy (the synthetic one by
default: no GPU, no endpoint), then data preparation into OUT_DIR/prepared (train.yaml, test.yaml,
train.parquet, test.parquet, bands.csv, bands.png, summary.json, manifest.json). `tbt quickstart`
(trainer/probe_cli.py) is these two stages, then the band histogram, the training dry run and the
hints; the CPU smoke (trainer/verl/cpu/smoke.py) needs only the pool, and runs

    python -m trainer.data.quickstart [--out-dir DIR] [--n N] [--dataset DIR] [--policy SPEC] [--no-progress]

which prints what `tbt quickstart` prints for them (the synthetic policy's announcement, the probes'
tally, the band histogram, the outcome, the pool's files). Rerunning resumes the probes. Exit 0
done, 1 probes left unresolved by system errors (listed), 2 bad input (one message).

The pieces (`probe_config`, `probe_plan`, `prepare_pool`, `synthetic_notice`, `pool_line`) are what
both callers share: the default policy, where the probes and the pool go, and the preparation's
settings (a short quickstart, `--n 2`, still bands its tasks).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # the runner imports the sandbox (the MCP SDK, ~1 s): only a run imports it
    from trainer.data.prepare import PrepareResult
    from trainer.rollout.config import RunConfig, RunPlan

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
POLICY = "synthetic:dist=bimodal"  # the base policy when neither a policy nor a config file names one
PROBES = "probes.jsonl"  # inside OUT_DIR
PREPARED = "prepared"  # inside OUT_DIR
OUT_DIR = Path("quickstart")


def default_policy(policy: str | None, config: Path | None) -> str | None:
    """The policy the probes play: the one given, else the config file's (None here), else `POLICY`."""
    return POLICY if policy is None and config is None else policy


def synthetic_notice(policy: str | None) -> str | None:
    """The line that announces a synthetic base policy (its bands show the pipeline, not a model)."""
    if policy is None or not policy.startswith("synthetic"):
        return None
    return (f"quickstart: probing with the SYNTHETIC policy ({policy}): it follows each task's golden actions "
            "or deviates at a per-task rate, writing Qwen-format turns through the real interpreter. Its "
            "bands show the pipeline, not a model; pass --policy openai:URL#MODEL to probe a real one.")


def probe_config(dataset: Path = SAMPLES, policy: str | None = None, config: Path | None = None) -> RunConfig:
    """What the probes play: every task of `dataset` with the policy (`default_policy`)."""
    from trainer.rollout.config import RunConfig

    return RunConfig(dataset=Path(dataset), policy=default_policy(policy, config), config=config)


def probe_plan(out_dir: Path, n: int = 8, *, progress: bool = False) -> RunPlan:
    """How the probes play: `n` episodes per task into OUT_DIR/probes.jsonl (resumed on a rerun)."""
    from trainer.rollout.config import RunPlan

    return RunPlan(output=Path(out_dir) / PROBES, repeat=n, progress=progress)


def prepare_pool(out_dir: Path, dataset: Path = SAMPLES, n: int = 8) -> PrepareResult:
    """Data preparation of OUT_DIR/probes.jsonl into OUT_DIR/prepared, with the default bands;
    at least min(4, n) probes per task (a short quickstart, --n 2, still bands its tasks).
    Raises `PrepareError`."""
    from trainer.data.bands import Bands
    from trainer.data.prepare import PrepareConfig, prepare

    return prepare(PrepareConfig(probes=[Path(out_dir) / PROBES], datasets=[Path(dataset)],
                                 out_dir=Path(out_dir) / PREPARED, bands=Bands(), min_probes=min(4, n)))


def pool_line(out_dir: Path) -> str:
    """Where the pool's files are."""
    prepared = Path(out_dir) / PREPARED
    return (f"training pool: {prepared / 'train.yaml'}  validation: {prepared / 'test.yaml'}  "
            f"bands: {prepared / 'bands.csv'}, {prepared / 'bands.png'}")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m trainer.data.quickstart`: probe the sample tasks and prepare the training pool (module docstring)."""
    import argparse

    from rich.console import Console

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR, help="Where probes and prepared data go.")
    ap.add_argument("--n", type=int, default=8, help="Probes per task.")
    ap.add_argument("--dataset", type=Path, default=SAMPLES, help="Tasks to probe.")
    ap.add_argument("--policy", help=f"The base policy (default: {POLICY}).")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="Show the progress bar.")
    a = ap.parse_args(argv)
    out, err = Console(soft_wrap=True, emoji=False), Console(stderr=True, soft_wrap=True, emoji=False)

    def say(console: Console, line: str) -> None:
        console.print(line, markup=False, highlight=False)

    if a.n < 1:
        say(err, f"error: --n {a.n}: expected 1 or more")
        return 2
    cfg = probe_config(a.dataset, a.policy)
    notice = synthetic_notice(cfg.policy)
    if notice:
        say(out, notice)
    from trainer.data.prepare import PrepareError
    from trainer.data.view import histogram, outcome_line
    from trainer.env.errors import DatasetError, TaskFormatError
    from trainer.rollout.config import ConfigError, resolve
    from trainer.formats.identity import IdentityError
    from trainer.rollout.policy import SpecError
    from trainer.formats.record import RecordFileError
    from trainer.rollout.runner import NothingToRun, run

    plan = probe_plan(a.out_dir, a.n, progress=a.progress)
    try:
        result = run(resolve(cfg), plan, notify=lambda line: say(err, f"skipped  {line}"))
    except DatasetError as e:
        for x in e.errors:
            say(err, f"error  {x}")
        say(err, f"error: {len(e.errors)} dataset error(s): nothing was run")
        return 2
    except IdentityError as e:
        say(err, f"error: {e} (pass another --out-dir, or remove {plan.output})")
        return 2
    except (ConfigError, TaskFormatError, SpecError, RecordFileError, NothingToRun, KeyError) as e:
        say(err, f"error: {e}")
        return 2
    say(out, result.tally(a.n, plan.output))
    if result.unresolved:
        for uid, rep, cause in result.unresolved[:20]:
            say(err, f"unresolved  {uid} #{rep}: {cause}")
        if len(result.unresolved) > 20:
            say(err, f"... and {len(result.unresolved) - 20} more")
        return 1
    try:
        res = prepare_pool(a.out_dir, a.dataset, a.n)
    except PrepareError as e:
        say(err, f"error: {e}")
        return 2
    from trainer.data.bands import Bands

    out.print(histogram(res.summary, Bands()))
    say(out, outcome_line(res.summary))
    say(out, pool_line(a.out_dir))
    return 0


__all__ = ["OUT_DIR", "POLICY", "PREPARED", "PROBES", "SAMPLES", "default_policy", "main", "pool_line",
           "prepare_pool", "probe_config", "probe_plan", "synthetic_notice"]

if __name__ == "__main__":
    raise SystemExit(main())
