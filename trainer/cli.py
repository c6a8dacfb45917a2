"""`tbt`, the command line of thinkingbox-training.

Each stage adds its commands here; `EXAMPLES` feeds the epilog of `tbt --help`, so every
command is listed with one runnable example (tests/test_cli.py runs every example of every
`--help`). The CLI is the top layer: it builds what the layers below are handed, such as the
`ServerRegistry` with our domains as its internal servers.

Exit codes: 0 done, 1 the dataset or a check failed (reported), 2 bad input (a path that does not
exist, a malformed --servers or --test-list, an unknown uid or agent): one clear message on
stderr naming the file (and line), never a traceback.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

from trainer.checkpoint_cli import checkpoint_app
from trainer.domains import DOMAINS
from trainer.domains_cli import serve_domain_command
from trainer.env.errors import DatasetError, TaskFormatError
from trainer.env.taskformat.tasks import Dataset, load_dataset
from trainer.eval_cli import aggregate_command, compare_command, eval_command
from trainer.export_cli import export_command
from trainer.help_cli import install as install_help_format
from trainer.parity_cli import parity_command
from trainer.probe_cli import probe_command, quickstart_command
from trainer.report_cli import report_command
from trainer.reverify_cli import reverify_command
from trainer.run_cli import run_command, show_command
from trainer.serve_cli import serve_proxy_command
from trainer.view_cli import view_command
from trainer.warmstart_cli import warm_start_command

if TYPE_CHECKING:  # the sandbox imports the MCP SDK (~1 s): only the commands that run one import it
    from trainer.env.sandbox.mcp_host import ServerRegistry

EXAMPLES = {
    "tasks list": "tbt tasks list data/samples",
    "tasks show": "tbt tasks show data/samples toy_loans.py:test_checkout_book",
    "tasks validate": "tbt tasks validate data/samples --json",
    "validate-golden": "tbt validate-golden tests/fixtures/datasets/sandbox --perturb --noop",
    "parity": "tbt parity tests/conformance/records.jsonl",
    "serve-domain": "tbt serve-domain toy   (an MCP stdio server; a client speaks first)",
    "serve-proxy": "tbt serve-proxy --upstream http://127.0.0.1:8001/v1 --port 8014",
    "quickstart": "tbt quickstart",
    "run": "tbt run data/samples --policy synthetic --repeat 2 --output r.jsonl",
    "probe": "tbt probe data/samples --policy synthetic --n 8 --output probes.jsonl",
    "show": "tbt show r.jsonl toy_loans.py:test_fine_correction",
    "report": "tbt report tests/fixtures/eval/base.agg.json tests/fixtures/eval/candidate.agg.json --html report.html",
    "eval": "tbt eval data/samples --test-list data/samples/lists/toy.yaml --policy synthetic -n 4 -o run.jsonl --aggregate-output agg.json",
    "aggregate": "tbt aggregate run.jsonl --test-list data/samples/lists/toy.yaml --output agg.json",
    "compare": "tbt compare base.agg.json cand.agg.json",
    "reverify": "tbt reverify run.jsonl --dataset data/samples",
    "view": "tbt view run.jsonl -o page.html",
    "export": "tbt export run.jsonl --format tb-infer -o run.tb.jsonl",
    "warm-start": "tbt warm-start data/samples --test-list data/samples/lists/toy.yaml -o warm --epochs 2",
    "checkpoint verify": "tbt checkpoint verify tests/fixtures/checkpoints/tiny",
    "checkpoint merge": "tbt checkpoint merge tests/fixtures/checkpoints/tiny --step 2 --target merged-step2",
}


def _epilog() -> str:
    width = max(len(k) for k in EXAMPLES)
    lines = [f"{('tbt ' + cmd).ljust(width + 4)}  e.g. {ex}" for cmd, ex in EXAMPLES.items()]
    return "Examples (every command):\n\n\b\n" + "\n".join(lines)


install_help_format()  # help wrapped between tokens, never inside one (trainer/help_cli.py)
app = typer.Typer(
    help="thinkingbox-training: train and evaluate tool-using agents on stateful business workflows.",
    epilog=_epilog(), rich_markup_mode=None, no_args_is_help=True, add_completion=False,
)
tasks_app = typer.Typer(help="Read ThinkingBox-format datasets.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.command("parity")(parity_command)
app.command("serve-domain")(serve_domain_command)
app.command("serve-proxy")(serve_proxy_command)
app.command("quickstart")(quickstart_command)
app.command("run")(run_command)
app.command("probe")(probe_command)
app.command("show")(show_command)
app.command("report")(report_command)
app.command("eval")(eval_command)
app.command("aggregate")(aggregate_command)
app.command("compare")(compare_command)
app.command("reverify")(reverify_command)
app.command("view")(view_command)
app.command("export")(export_command)
app.command("warm-start")(warm_start_command)
app.add_typer(checkpoint_app, name="checkpoint")

out = Console(emoji=False)  # a `:100:` in user data stays text (rich would print an emoji)

DatasetArg = Annotated[Path, typer.Argument(help="Dataset folder (agent/, scenario/, test_case/).",
                                            exists=True, file_okay=False)]
TestListOpt = Annotated[Optional[Path], typer.Option("--test-list", help="YAML list of 'file.py:test_name'.",
                                                     exists=True, dir_okay=False)]


def _fail(*lines: str) -> NoReturn:
    """Bad input: the message on stderr, exit 2."""
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(2)


def _load(dataset: Path, test_list: Path | None) -> Dataset:
    """The dataset, or exit 2: the folder is not a dataset, a file cannot be read, or the
    --test-list has an error (a list that does not resolve would quietly run fewer tasks)."""
    try:
        ds = load_dataset(dataset, test_list=test_list)
    except DatasetError as e:
        _fail(*(f"error: {x}" for x in e.errors))
    except (OSError, UnicodeError) as e:
        _fail(f"error: {e}")
    bad = [e for e in ds.errors if test_list is not None and Path(e.file) == test_list]
    if bad:
        _fail(*(f"error: --test-list {e}" for e in bad))
    return ds


@tasks_app.command("list")
def tasks_list(dataset: DatasetArg, test_list: TestListOpt = None) -> None:
    """List task uids with scenario and tags.

    \b
    Examples:
      tbt tasks list data/samples
      tbt tasks list data/samples --test-list data/samples/lists/toy.yaml
    """
    ds = _load(dataset, test_list)
    # plain lines, not a table: a uid is what the other commands take, never cut short to fit
    rows = [("uid", "scenario", "tags")] + [(t.uid, t.scenario.name, ",".join(t.tags)) for t in ds.tasks.values()]
    uid_w, scenario_w = (max(len(r[i]) for r in rows) for i in (0, 1))
    for uid, scenario, tags in rows:
        typer.echo(f"{uid:<{uid_w}}  {scenario:<{scenario_w}}  {tags}".rstrip())
    typer.echo(f"{len(ds.tasks)} task(s)" + (f", {len(ds.errors)} error(s): run `tbt tasks validate`"
                                             if ds.errors else ""))


@tasks_app.command("show")
def tasks_show(
    dataset: DatasetArg,
    uid: Annotated[str, typer.Argument(help="Task uid, 'file.py:test_name' (see `tbt tasks list`).")],
    agent: Annotated[Optional[str], typer.Option(help="Agent name under agent/ (default: the only one).")] = None,
) -> None:
    """Show one task: merged config, the assembled prompt and the tool list.

    \b
    Examples:
      tbt tasks show data/samples toy_loans.py:test_checkout_book
      tbt tasks show data/samples property_concessions.py:test_concession_cumulative_cap --agent assistant
    """
    ds = _load(dataset, None)
    task = ds.tasks.get(uid)
    if task is None:
        close = difflib.get_close_matches(uid, list(ds.tasks), n=3)
        _fail(f"error: no task {uid!r} in {dataset} ({len(ds.tasks)} loaded"
              + (f", {len(ds.errors)} error(s)" if ds.errors else "") + ")"
              + (f"; did you mean: {', '.join(close)}" if close else "; see `tbt tasks list`"))
    try:
        ag = ds.agent(agent)
    except TaskFormatError as e:
        _fail(f"error: {e}")
    tools = [{"name": t.name, "builtin": True, "is_end_turn": t.is_end_turn} for t in ag.builtin_tools]
    tools += [{"name": t.name, "builtin": False, "is_end_turn": t.is_end_turn,
               **({"override_description": t.override_description} if t.override_description else {})}
              for t in task.scenario.tools]
    doc = {
        "uid": task.uid, "file": f"{task.file}:{task.lineno}", "scenario": task.scenario.name,
        "tags": task.tags, "config": task.config, "world_state": task.world_state(),
        "golden_actions": [{"server": s, "tool": t, "parameters": p} for s, t, p in task.golden_actions()],
        "alternative_golden_paths": [[{"server": s, "tool": t, "parameters": p} for s, t, p in path]
                                     for path in task.golden_paths()[1:]],
        "prompt": task.prompt(ag), "tools": tools,
    }
    out.print_json(json.dumps(doc, default=str))


@tasks_app.command("validate")
def tasks_validate(
    dataset: DatasetArg,
    test_list: TestListOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Load everything (YAML, keys, scenarios, test code); report every error; exit 1 on any.

    \b
    Example:
      tbt tasks validate data/samples --json
    """
    ds = _load(dataset, test_list)
    errors = sorted(ds.errors + ds.compile_all(), key=lambda e: (str(e.file), e.line or 0))
    if as_json:
        print(json.dumps({"tasks": len(ds.tasks), "errors": [e.to_dict() for e in errors],
                          "by_scenario": ds.by_scenario(), "agents": sorted(ds.agents),
                          "scenarios": sorted(ds.scenarios)}))
    else:
        for e in errors:
            typer.echo(f"error  {e}", err=True)
        table = Table("scenario", "tasks", box=None)
        for name, n in sorted(ds.by_scenario().items()):
            table.add_row(name, str(n))
        out.print(table)
        out.print(f"{len(ds.tasks)} task(s) loaded from {dataset}, {len(errors)} error(s)")
    raise typer.Exit(1 if errors else 0)


def _registry(dataset: Path, servers: Path | None, python: str | None) -> ServerRegistry:
    """The servers of a run: --servers (default DATASET/servers.yaml if present), then our domains
    by name; exit 2 on a malformed file or an interpreter that does not exist."""
    from trainer.env.sandbox.mcp_host import ServerRegistry

    if python is not None and shutil.which(python) is None:
        _fail(f"error: --python {python}: no such executable")
    default = dataset / "servers.yaml"
    servers = servers or (default if default.is_file() else None)
    if servers is None:
        return ServerRegistry(domains=DOMAINS)
    try:
        return ServerRegistry.from_yaml(servers, python=python, domains=DOMAINS)
    except TaskFormatError as e:
        _fail(f"error: --servers {e}")


@app.command("validate-golden")
def validate_golden_command(
    dataset: DatasetArg,
    test_list: TestListOpt = None,
    servers: Annotated[Optional[Path], typer.Option(
        "--servers", exists=True, dir_okay=False, help="ThinkingBox servers.yaml; servers not in it are "
        "our in-process domains. Default: DATASET/servers.yaml if present.")] = None,
    python: Annotated[Optional[str], typer.Option("--python", help="Interpreter for {python} in servers.yaml.")] = None,
    strip_sources_: Annotated[bool, typer.Option("--strip-sources", help="Drop world_state.*.sources.")] = False,
    perturb: Annotated[bool, typer.Option("--perturb", help="Drop / mutate each golden write; report weak checks.")] = False,
    noop: Annotated[bool, typer.Option("--noop", help="Replay nothing: the check must fail.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Tasks checked at once.")] = 4,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per MCP call.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Replay every task's golden actions in a fresh sandbox; the test must pass.

    Exit 0 when every task loaded, every replay passes, every task with golden writes is sensitive
    (--perturb) and no noop passes where it should fail (--noop); passing perturbations are
    reported, not fatal. With --json, the dataset's load errors are its `errors` list.

    \b
    Examples:
      tbt validate-golden data/samples
      tbt validate-golden tests/fixtures/datasets/sandbox --perturb --noop --json
      tbt validate-golden tests/fixtures/datasets/sandbox --servers tests/fixtures/datasets/sandbox/servers_stdio.yaml --strip-sources
    """
    ds = _load(dataset, test_list)
    registry = _registry(dataset, servers, python)
    if not as_json:
        for e in ds.errors:
            typer.echo(f"error  {e}", err=True)
    from trainer.env.golden import summary_text, validate_golden

    summary = asyncio.run(validate_golden(list(ds.tasks.values()), registry, perturb=perturb, noop=noop,
                                          strip=strip_sources_, concurrency=concurrency, timeout=timeout,
                                          errors=ds.errors))
    if as_json:
        print(json.dumps(summary, default=str))
    else:
        from trainer.run_cli import print_timings

        typer.echo(summary_text(summary), nl=False)
        print_timings(summary["timings"], unit="replay", run_seconds=summary["timings"]["run_seconds"])
    raise typer.Exit(0 if not summary["failures"] and not summary["errors"] else 1)


def main() -> None:
    from trainer.core.redact import wrap_std_streams

    wrap_std_streams()  # one redaction path: nothing tbt prints holds a key (trainer/core/redact.py)
    app()


if __name__ == "__main__":
    main()
