"""Probe records -> offline policy-relative difficulty -> train.yaml / test.yaml (+ parquet, bands.csv, ...).

    python data/prepare_data.py --probes probes.jsonl --dataset data/samples --out-dir prepared/

What it does and writes: trainer/data/prepare.py; the bands: trainer/data/bands.py; the whole
stage: docs/data-preparation.md. Exit codes: 0 written, 2 bad input (one message naming the
file, line or option).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python data/prepare_data.py` from a checkout
    sys.path.insert(0, str(ROOT))

from trainer.data.bands import DEFAULT_KEEP, DEFAULT_NAMES, BandError, Bands, parse_boundaries  # noqa: E402
from trainer.data.prepare import PrepareConfig, PrepareError, prepare  # noqa: E402
from trainer.data.view import histogram, outcome_line  # noqa: E402

app = typer.Typer(add_completion=False, rich_markup_mode=None)
err = Console(stderr=True, soft_wrap=True)  # a message, path or file:line is never broken across lines
out = Console(soft_wrap=True)


@app.command()
def main(
    probes: Annotated[list[Path], typer.Option("--probes", exists=True, dir_okay=False, help=(
        "Probe records (JSONL): `tbt probe` / `tbt run` output, or `tb infer` records of the ThinkingBox "
        "framework. Repeat for several files."))],
    dataset: Annotated[list[Path], typer.Option("--dataset", exists=True, file_okay=False, help=(
        "Candidate dataset(s) in ThinkingBox format. Repeat for several."))],
    out_dir: Annotated[Path, typer.Option("--out-dir", file_okay=False, help="Where the outputs are written.")],
    test_list: Annotated[Optional[list[Path]], typer.Option("--test-list", exists=True, dir_okay=False, help=(
        "Only these candidate tasks (test lists). Repeat for several."))] = None,
    bands: Annotated[str, typer.Option("--bands", help="Band boundaries, increasing inside (0, 1).")] = "0.08,0.40,0.60,0.90",
    band_names: Annotated[str, typer.Option("--band-names", help="One name per band (boundaries + 1).")] = ",".join(DEFAULT_NAMES),
    keep: Annotated[str, typer.Option("--keep", help="Bands whose tasks are kept for training.")] = ",".join(DEFAULT_KEEP),
    min_probes: Annotated[int, typer.Option("--min-probes", min=1, help=(
        "Valid probes (system errors are not probes) a task needs to be banded; fewer: reported, not kept."))] = 4,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help=(
        "Share of kept tasks held out as test.yaml, stratified by band and domain."))] = 0.1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split (same seed, same files).")] = 0,
    exclude_list: Annotated[Optional[list[Path]], typer.Option("--exclude-list", exists=True, dir_okay=False, help=(
        "Test list of uids never to train on (e.g. a benchmark's test list)."))] = None,
    exclude_dataset: Annotated[Optional[list[Path]], typer.Option("--exclude-dataset", exists=True, file_okay=False, help=(
        "A benchmark dataset: its uids and every task with the same content (query + user context + "
        "init) are excluded."))] = None,
    screen: Annotated[Optional[list[Path]], typer.Option("--screen", exists=True, dir_okay=False, help=(
        "Records of a solvability screen (`tbt probe --screen-policy`): tasks it never solved are dropped."))] = None,
    keep_identity: Annotated[Optional[str], typer.Option("--keep-identity", help=(
        "Probes of several runs (another policy, parameter, seed, sampling, ...) are refused, each run named "
        "with an ID: use the records of this one (\"unknown\": records without a run identity)."))] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Print only the output directory.")] = False,
) -> None:
    """Aggregate base-policy probes into difficulty bands and write the training pool.

    Each task's n valid probes with k successes give the Jeffreys posterior Beta(k+1/2, n-k+1/2);
    the task goes to the band with the largest posterior mass; kept bands, exclusions and the
    solvability screen decide the pool; a seeded split stratified by band and domain gives
    train.yaml and test.yaml. Written to OUT_DIR: train.yaml, test.yaml, train.parquet,
    test.parquet, bands.csv, bands.png, summary.json, manifest.json.

    \b
    Examples:
      python data/prepare_data.py --probes probes.jsonl --dataset data/samples --out-dir prepared
      python data/prepare_data.py --probes a.jsonl --probes b.jsonl --dataset data/samples --bands 0.1,0.4,0.6,0.9 --keep difficult,intermediate --out-dir prepared
      python data/prepare_data.py --probes probes.jsonl --dataset data/samples --exclude-list data/samples/lists/toy.yaml --out-dir prepared
    """
    try:
        b = Bands(parse_boundaries(bands), tuple(x.strip() for x in band_names.split(",")),
                  frozenset(x.strip() for x in keep.split(",") if x.strip()))
    except BandError as e:
        err.print(f"error: --bands/--band-names/--keep: {e}", markup=False, highlight=False)
        raise typer.Exit(2)
    cfg = PrepareConfig(probes=list(probes), datasets=list(dataset), out_dir=out_dir, test_lists=list(test_list or []),
                        bands=b, min_probes=min_probes, val_fraction=val_fraction, seed=seed,
                        exclude_lists=list(exclude_list or []), exclude_datasets=list(exclude_dataset or []),
                        screen=list(screen or []), keep_identity=keep_identity)
    try:
        result = prepare(cfg)
    except (PrepareError, BandError) as e:
        err.print(f"error: {e}", markup=False, highlight=False)
        raise typer.Exit(2)
    s = result.summary
    for p in s["problems"][:20]:
        err.print(f"warning  {p}", markup=False, highlight=False)
    if len(s["problems"]) > 20:
        err.print(f"warning  ... and {len(s['problems']) - 20} more (summary.json lists them all)")
    if s["unknown_uids"]:
        err.print(f"warning  {len(s['unknown_uids'])} probed uid(s) are not in the dataset (another dataset or "
                  f"version?): {', '.join(list(s['unknown_uids'])[:5])}", markup=False, highlight=False)
    left = s["probe_identity"]["left_out"]
    if left:
        err.print(f"note  --keep-identity {s['probe_identity']['used']}: {sum(left.values())} probe record(s) of "
                  f"{len(left)} other run(s) left out (" + ", ".join(f"{k}: {v}" for k, v in left.items()) + ")",
                  markup=False, highlight=False)
    if s["changed_tasks"]:
        err.print(f"warning  {len(s['changed_tasks'])} task(s) changed since they were probed; their probes are "
                  f"not used: {', '.join(list(s['changed_tasks'])[:5])}", markup=False, highlight=False)
    if quiet:
        out.print(str(out_dir), markup=False, highlight=False)
        return
    out.print(histogram(s, b))
    out.print(outcome_line(s), markup=False, highlight=False)
    out.print(f"written to {out_dir}: " + ", ".join(result.outputs), markup=False, highlight=False)


if __name__ == "__main__":
    app()
