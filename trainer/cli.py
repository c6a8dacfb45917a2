"""`tbt`, the command line of thinkingbox-training.

Each stage adds its commands here; `EXAMPLES` feeds the epilog of `tbt --help`, so every
command is listed with one runnable example.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from trainer.env.errors import DatasetError, TaskFormatError
from trainer.core.parity import parity_command
from trainer.domains.serve import serve_domain_command
from trainer.env.golden import validate_golden_command
from trainer.env.tasks import Dataset, load_dataset

EXAMPLES = {
    "tasks list": "tbt tasks list tests/fixtures/datasets/basic",
    "tasks show": "tbt tasks show tests/fixtures/datasets/basic notes_basic.py:test_add_note",
    "tasks validate": "tbt tasks validate tests/fixtures/datasets/basic --json",
    "validate-golden": "tbt validate-golden tests/fixtures/datasets/sandbox --perturb --noop",
    "parity": "tbt parity tests/conformance/records.jsonl --against vllm",
    "serve-domain": "tbt serve-domain toy   (an MCP stdio server; a client speaks first)",
}


def _epilog() -> str:
    width = max(len(k) for k in EXAMPLES)
    lines = [f"{('tbt ' + cmd).ljust(width + 4)}  e.g. {ex}" for cmd, ex in EXAMPLES.items()]
    return "Examples (every command):\n\n\b\n" + "\n".join(lines)


app = typer.Typer(
    help="thinkingbox-training: train and evaluate tool-using agents on stateful business workflows.",
    epilog=_epilog(), rich_markup_mode=None, no_args_is_help=True, add_completion=False,
)
tasks_app = typer.Typer(help="Read ThinkingBox-format datasets.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.command("validate-golden")(validate_golden_command)
app.command("parity")(parity_command)
app.command("serve-domain")(serve_domain_command)

out = Console()
err = Console(stderr=True, soft_wrap=True)

DatasetArg = Annotated[Path, typer.Argument(help="Dataset folder (agent/, scenario/, test_case/).")]
TestListOpt = Annotated[Optional[Path], typer.Option("--test-list", help="YAML list of 'file.py:test_name'.")]


def _load(dataset: Path, test_list: Path | None) -> Dataset:
    try:
        return load_dataset(dataset, test_list=test_list)
    except DatasetError as e:  # the dataset root itself is unusable
        for x in e.errors:
            err.print(f"[red]error[/] {x}", markup=True, highlight=False)
        raise typer.Exit(2) from None


@tasks_app.command("list")
def tasks_list(dataset: DatasetArg, test_list: TestListOpt = None) -> None:
    """List task uids with scenario and tags.

    Example: tbt tasks list data/samples --test-list data/samples/lists/toy.yaml
    """
    ds = _load(dataset, test_list)
    table = Table("uid", "scenario", "tags", box=None)
    for t in ds.tasks.values():
        table.add_row(t.uid, t.scenario.name, ",".join(t.tags))
    out.print(table)
    out.print(f"{len(ds.tasks)} task(s)" + (f", {len(ds.errors)} error(s): run `tbt tasks validate`"
                                            if ds.errors else ""))


@tasks_app.command("show")
def tasks_show(
    dataset: DatasetArg,
    uid: Annotated[str, typer.Argument(help="Task uid, 'file.py:test_name'.")],
    agent: Annotated[Optional[str], typer.Option(help="Agent name under agent/ (default: the only one).")] = None,
) -> None:
    """Show one task: merged config, the assembled prompt and the tool list.

    Example: tbt tasks show data/samples toy.py:test_add_note
    """
    ds = _load(dataset, None)
    task = ds.tasks.get(uid)
    if task is None:
        err.print(f"no task {uid!r} in {dataset} ({len(ds.tasks)} loaded"
                  + (f", {len(ds.errors)} error(s)" if ds.errors else "") + ")", highlight=False)
        raise typer.Exit(1)
    try:
        ag = ds.agent(agent)
    except TaskFormatError as e:
        err.print(str(e), highlight=False)
        raise typer.Exit(1) from None
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

    Example: tbt tasks validate data/samples --json
    """
    ds = _load(dataset, test_list)
    errors = sorted(ds.errors + ds.compile_all(), key=lambda e: (str(e.file), e.line or 0))
    if as_json:
        print(json.dumps({"tasks": len(ds.tasks), "errors": [e.to_dict() for e in errors],
                          "by_scenario": ds.by_scenario(), "agents": sorted(ds.agents),
                          "scenarios": sorted(ds.scenarios)}))
    else:
        for e in errors:
            err.print(f"error  {e}", highlight=False)
        table = Table("scenario", "tasks", box=None)
        for name, n in sorted(ds.by_scenario().items()):
            table.add_row(name, str(n))
        out.print(table)
        out.print(f"{len(ds.tasks)} task(s) loaded from {dataset}, {len(errors)} error(s)")
    raise typer.Exit(1 if errors else 0)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
