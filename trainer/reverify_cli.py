"""`tbt reverify`: stored episodes replayed in fresh sandboxes and regraded (trainer/eval/reverify.py),
registered by trainer/cli.py.

Exit codes: 0 every verdict identical, 1 a verdict changed (each named with its diff), 2 bad input
(a path, a file that is not records, a dataset that does not load, a spec), one message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.rollout.config import RunConfig, RunPlan
from trainer.run_cli import err, fail, takes


@takes("run", RunConfig, ("python", "agent"), as_dict=True)
@takes("plan", RunPlan, ("concurrency",), as_dict=True, defaults={"concurrency": 4})
def reverify_command(
    run: dict,
    plan: dict,
    records: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False,
                                                  help="Records files (JSONL) of tbt run / tbt eval.")],
    dataset: Annotated[Optional[Path], typer.Option("--dataset", "-d", exists=True, file_okay=False, help=(
        "The dataset folder the records were played on (records name only its folder name)."))] = None,
    servers: Annotated[Optional[Path], typer.Option("--servers", exists=True, dir_okay=False, help=(
        "ThinkingBox servers.yaml, as the run had it. Default: DATASET/servers.yaml if present."))] = None,
    reask_judge: Annotated[bool, typer.Option("--reask-judge", help=(
        "Ask a judge again (--judge, else each record's judge spec) instead of taking its answers from "
        "the record (verdict.judge_calls)."))] = False,
    judge: Annotated[Optional[str], typer.Option("--judge", help=(
        "With --reask-judge: the judge spec (openai:URL#MODEL[,key_env=VAR], synthetic, none)."))] = None,
    as_json: Annotated[bool, typer.Option("--json", help=(
        'Print one JSON line on stdout (the lines above go to stderr): {"records", "identical", "changed": [...], '
        '"fingerprint_changed", "results_differ", "skipped"}.'))] = False,
) -> None:
    """Replay each record's executed tool calls in a fresh sandbox and regrade: the verdict must be
    identical. The sandbox is opened as the run opened it (the record's budgets and tool order),
    the calls that reached a server are replayed in order, and the test is run on the end state
    with the judge's answers taken from the record unless --reask-judge. A verdict that differs
    is named with every differing field and the golden-diff rows that differ (a grader, server or
    dataset change since the run), exit 1; records whose task's content changed since the run
    (fingerprint) are named. System-error and tb infer records are skipped (listed).
    docs/evaluation.md, "Re-verification".

    \b
    Examples:
      tbt reverify run.jsonl --dataset data/samples
      tbt reverify run.jsonl --dataset data/samples --json
      tbt reverify run.jsonl --dataset data/samples --reask-judge
    """
    from trainer.env.errors import DatasetError, TaskFormatError
    from trainer.env.taskformat.tasks import load_dataset
    from trainer.eval.reverify import records_dataset_names, reverify, summary_text
    from trainer.formats.attempts import AttemptError, read_attempts
    from trainer.rollout.policy import SpecError
    from trainer.rollout.setup import DEFAULT_DOMAINS, make_registry

    python, agent, concurrency = run["python"], run["agent"], plan["concurrency"]
    if judge is not None and not reask_judge:
        fail("error: --judge is the judge to re-ask: give it with --reask-judge")
    try:
        read = read_attempts(records, keep_records=True)
    except AttemptError as e:
        fail(f"error: {e}")
    for where in read.torn:
        err.print(f"skipped  {where}: a cut-off last line (a write interrupted by a crash)", markup=False,
                  highlight=False)
    if dataset is None:
        names = records_dataset_names(read.attempts)
        fail("error: give --dataset DIR, the folder the records were played on"
             + (f" (their dataset: {', '.join(names)})" if names else ""))
    try:
        ds = load_dataset(dataset)
        agent_ = ds.agent(agent)
    except DatasetError as e:
        fail("\n".join(f"error: {x}" for x in e.errors))
    except TaskFormatError as e:
        fail(f"error: {e}")
    for e in ds.errors:  # their tasks' records read as changed: "task not in the dataset"
        err.print(f"dataset error  {e}", markup=False, highlight=False)
    default_servers = dataset / "servers.yaml"
    servers = servers or (default_servers if default_servers.is_file() else None)
    try:
        registry = make_registry(servers=str(servers) if servers else None, python=python, domains=DEFAULT_DOMAINS)
    except (TaskFormatError, ValueError) as e:
        fail(f"error: --servers {servers}: {e}")
    try:
        summary = reverify(read.attempts, ds, registry, agent_, reask=reask_judge, judge=judge, concurrency=concurrency)
    except SpecError as e:
        fail(f"error: --judge {e}")
    finally:
        registry.close()
    typer.echo(summary_text(summary), err=as_json)  # with --json, stdout is the JSON line alone
    if as_json:
        typer.echo(json.dumps(summary.to_json(), ensure_ascii=False, default=str))
    if summary.changed:
        raise typer.Exit(1)


__all__ = ["reverify_command"]
