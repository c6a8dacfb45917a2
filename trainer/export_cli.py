"""`tbt export`: our records in another harness's format (registered by trainer/cli.py; the
conversion is trainer/eval/export.py, docs/evaluation.md "Export"). Exit 0 written, 2 bad input
(a line that is not our record, records of several runs, an unknown format), one message."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.run_cli import fail


def export_command(
    records: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help=(
        "Our record files (JSONL, from tbt run / tbt eval), with their errors files if unresolved keys should be rows."))],
    output: Annotated[str, typer.Option("--output", "-o", help="Where the rows go (JSONL, written whole); - for stdout.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help=(
        "tb-infer: the ThinkingBox framework's DecodeResult rows, as its tb infer writes them (its tb agg reads them)."))]
    = "tb-infer",
    keep_identity: Annotated[Optional[str], typer.Option("--keep-identity", help=(
        "Records of several runs are refused (exported rows carry no run identity): export only this run's (its ID, "
        "as the refusal names it)."))] = None,
) -> None:
    """Export records as the ThinkingBox framework's tb infer rows (one per task × repetition).

    Each (uid, repetition) becomes one DecodeResult row: typed messages, test_result, usage,
    metadata, finish_reason, is_system_error. The framework's tb agg reads the file, and
    tbt aggregate reads it back to the same pass@1, pass@k and counts.

    \b
    Examples:
      tbt export run.jsonl --format tb-infer -o run.tb.jsonl
      tbt export run.jsonl err.jsonl --format tb-infer -o run-and-errors.tb.jsonl
    """
    from trainer.eval.export import FORMATS, ExportError, export_tb_infer, write_tb_infer

    if fmt not in FORMATS:
        fail(f"error: --format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        if output == "-":
            report = export_tb_infer(records, sys.stdout.buffer, keep_identity=keep_identity)
            sys.stdout.flush()
        else:
            if Path(output).is_dir():
                fail(f"error: --output {output}: is a directory")
            report = write_tb_infer(records, output, keep_identity=keep_identity)
    except ExportError as e:
        fail(f"error: {e}\n(nothing written)")
    for where in report.torn:
        typer.echo(f"skipped  {where}: a cut-off last line (a write interrupted by a crash)", err=True)
    for line in report.duplicates:
        typer.echo(f"duplicated  {line}", err=True)
    if report.left_out:
        typer.echo(f"--keep-identity {keep_identity}: {sum(report.left_out.values())} record(s) of "
                   f"{len(report.left_out)} other run(s) left out", err=True)
    typer.echo(f"{report.rows} tb infer row(s) ({report.scored} scored, {report.system_errors} system error(s) of "
               f"unresolved keys; {report.replaced} system-error attempt(s) a later one replaced are not rows) "
               f"→ {output}", err=True)
    if report.uneven:
        typer.echo("note: tasks have different numbers of rows (" + ", ".join(
            f"{n} row(s): {t} task(s)" for n, t in report.uneven.items()) + "); the framework's tb agg refuses that, "
            "tbt aggregate --coverage-profile none reads it", err=True)


__all__ = ["export_command"]
