"""`tbt report`: agg.json files -> an HTML report with its plots (trainer/eval/report.py), registered
by trainer/cli.py. Exit 0 written, 2 bad input (a path, a file that is not an agg.json or a
bands.csv), one message naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console

err = Console(stderr=True)


def _fail(msg: str) -> NoReturn:
    err.print(msg, markup=False, highlight=False)
    raise typer.Exit(2)


def report_command(
    aggs: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False,
                                               help="agg.json files (tbt eval / tbt aggregate); the first is the base.")],
    html_out: Annotated[Path, typer.Option("--html", dir_okay=False,
                                           help="The HTML to write; its PNGs go beside it (NAME-*.png).")],
    probes: Annotated[Optional[Path], typer.Option("--probes", exists=True, dir_okay=False,
                                                   help="bands.csv of data/prepare_data.py: adds the band histogram.")] = None,
) -> None:
    """Tables and plots of one or more runs: the runs with their intervals; with two or more, each
    later run against the first (Table 1, costs, the per-domain heatmap of base, candidate and
    change); cost per successful attempt vs pass@1 with the Pareto frontier (runs with a cost);
    reliability curves (pass^k and pass@k vs k); per-domain tables; the band histogram of
    --probes. The HTML holds everything but the PNGs, which it links by relative name.

    \b
    Examples:
      tbt report tests/fixtures/eval/base.agg.json tests/fixtures/eval/candidate.agg.json --html report.html --probes tests/fixtures/eval/bands.csv
      tbt report tests/fixtures/eval/base.agg.json --html base-report.html
    """
    from trainer.eval.report import ReportError, report

    try:
        written = report(aggs, html_out, probes=probes)
    except ReportError as e:
        _fail(f"error: {e}")
    except OSError as e:
        _fail(f"error: {e.filename or html_out}: {e.strerror}")
    typer.echo(f"wrote {written[0]} and {len(written) - 1} plot(s): {', '.join(p.name for p in written[1:])}")


__all__ = ["report_command"]
