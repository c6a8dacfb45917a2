"""`tbt view`: records -> one self-contained HTML page of episodes (trainer/eval/view.py), written
or served on localhost; registered by trainer/cli.py. Exit 0 written (or served until Ctrl-C),
2 bad input (a path, a line that is not a record, a dataset that does not load), one message."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.run_cli import err, fail


def view_command(
    records: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help=(
        "Records files (JSONL) of tbt run / tbt eval, one run each; the system errors are read from the "
        ".errors.jsonl beside each."))],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", dir_okay=False, help="The HTML page to write.")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on http://127.0.0.1:PORT/ until Ctrl-C.")] = False,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="With --serve: the port (0: a free one).")] = 8765,
    dataset: Annotated[Optional[Path], typer.Option("--dataset", "-d", exists=True, file_okay=False, help=(
        "The dataset: tasks are grouped by their domain: tag (without it: by the record's scenario)."))] = None,
) -> None:
    """One HTML page of every episode of these runs, with no external asset: a tasks x repetitions
    grid per run coloured by verdict (green passed, red failed; system errors apart: hatched, and
    listed under the grid), filters (domain, end reason, failed only, changed between two runs), and
    a click opens the episode: messages with reasoning, tool calls with arguments and results,
    simulated-user turns, the verdict with its explanation and the row diff against the golden
    state, timings. A URL ending in #uid=UID (or #e=ID) opens that episode. --serve serves the page
    on localhost instead of (or as well as) writing it. docs/evaluation.md, "Looking at episodes".

    \b
    Examples:
      tbt view run.jsonl -o page.html
      tbt view base.jsonl cand.jsonl -o changes.html --dataset data/samples
    """
    from trainer.env.errors import DatasetError, TaskFormatError
    from trainer.env.taskformat.tasks import load_dataset
    from trainer.eval.view import ViewError, page_data, read_run, render, write_page
    from trainer.eval.view import serve as serve_page

    if output is None and not serve:
        fail("error: give --output page.html, or --serve")
    try:
        runs = [read_run(p) for p in records]
    except ViewError as e:
        fail(f"error: {e}")
    ds = None
    if dataset is not None:
        try:
            ds = load_dataset(dataset)
        except DatasetError as e:
            fail("\n".join(f"error: {x}" for x in e.errors))
        except TaskFormatError as e:
            fail(f"error: {e}")
    data = page_data(runs, ds)
    page = render(data)
    shown = f"{len(data['episodes'])} episode(s) of {len(data['tasks'])} task(s) in {len(runs)} run(s)"
    if output is not None:
        try:
            write_page(page, output)
        except OSError as e:
            fail(f"error: {e.filename or output}: {e.strerror}")
        typer.echo(f"wrote {output}: {shown}")
    if serve:
        try:
            server = serve_page(page, port)
        except OSError as e:
            fail(f"error: --port {port}: {e.strerror}")
        host, bound = server.server_address[:2]
        err.print(f"serving http://{host}:{bound}/ ({shown}); Ctrl-C stops", markup=False, highlight=False)
        try:
            threading.Event().wait()  # until Ctrl-C
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()


__all__ = ["view_command"]
