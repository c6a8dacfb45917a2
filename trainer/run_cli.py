"""`tbt run` and `tbt show`: play episodes and read them back (registered by trainer/cli.py).

Exit codes as the rest of `tbt`: 0 done, 1 episodes left unresolved by system errors (listed),
2 bad input (a spec, a path, a uid), one clear message on stderr.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping, NoReturn, Optional, Sequence

import typer
from rich.console import Console

from trainer.rollout.config import POLICY_HELP, ConfigError, RunConfig, resolve  # noqa: F401  (POLICY_HELP: probe words --policy its own way)
from trainer.rollout.options import declared
from trainer.rollout.config import RunPlan, RunSpec




err = Console(stderr=True, soft_wrap=True, emoji=False)  # no emoji codes: `r.jsonl:100:` stays text
out = Console(soft_wrap=True, emoji=False)


def fail(msg: str) -> NoReturn:
    """One message on stderr, exit 2 (bad input)."""
    err.print(msg, markup=False, highlight=False)
    raise typer.Exit(2)


def takes(param: str, cls: type, names: Sequence[str], *, as_dict: bool = False,
          help: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None) -> Callable:
    """A command's options made from the fields that declare them (trainer/rollout/options.py):
    the command's parameter `param` is replaced, where it stands in the signature, by one option per
    field of `names` (a field of `cls`, or of a dataclass field of `cls`: RunConfig's `episode`),
    and the command is called with the `cls` built from their values (`as_dict`: the values, for a
    command that builds more than one). `help` and `defaults` word or set an option for this
    command. A value the dataclass refuses is exit 2, with its message."""
    import dataclasses
    import functools
    import inspect
    import typing

    help, defaults = dict(help or {}), dict(defaults or {})
    hints = typing.get_type_hints(cls)
    where: dict[str, tuple[Any, Any, Any]] = {}  # name -> (field, its type, the nested field's name or None)
    for f in dataclasses.fields(cls):
        where[f.name] = (f, hints[f.name], None)
        if dataclasses.is_dataclass(hints[f.name]):
            sub = typing.get_type_hints(hints[f.name])
            for g in dataclasses.fields(hints[f.name]):
                where.setdefault(g.name, (g, sub[g.name], f.name))

    def parameter(name: str) -> inspect.Parameter:
        f, tp, _ = where[name]
        decl = declared(f)
        if decl is None:
            raise TypeError(f"{cls.__name__}.{name} declares no command-line option")
        if typing.get_origin(tp) is typing.Literal or any(typing.get_origin(a) is typing.Literal
                                                         for a in typing.get_args(tp)):
            tp = str  # a family: checked by the dataclass's resolve
        make = typer.Argument if decl["argument"] else functools.partial(typer.Option, *decl["flags"])
        info = make(help=help.get(name, decl["help"]), **decl["click"])
        if name in defaults:
            default = defaults[name]
        elif decl["cli_default"] is not dataclasses.MISSING:
            default = decl["cli_default"]
        elif f.default is not dataclasses.MISSING and not decl["argument"]:  # an argument is required
            default = f.default
        else:
            default = inspect.Parameter.empty
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[tp, info])

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values()]
        at = [p.name for p in own].index(param)
        made = [parameter(n) for n in names]

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            values = {n: kw.pop(n) for n in names}
            if as_dict:
                return fn(**kw, **{param: values})
            top = {n: v for n, v in values.items() if where[n][2] is None}
            for n, v in values.items():
                if where[n][2] is not None:
                    top.setdefault(where[n][2], {})[n] = v
            try:
                for outer, inner in [(n, v) for n, v in top.items() if isinstance(v, dict)]:
                    top[outer] = where[outer][1](**inner)
                built = cls(**top)
            except (TypeError, ValueError) as e:
                fail(f"error: {e}")
            return fn(**kw, **{param: built})

        del command.__wrapped__  # typer reads the signature below, not fn's
        params = own[:at] + made + own[at + 1:]
        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}  # evaluated: no names to look up
        return command

    return decorate


RUN_OPTIONS = ("dataset", "policy", "config", "agent_view", "test_list", "user", "judge", "servers", "python",
               "strip_sources")  # the order tbt run and tbt eval show them in, before the plan's
BUDGET_OPTIONS = ("family", "thinking", "agent", "max_episode_tokens", "max_episode_seconds", "max_context",
                  "max_agent_turns", "call_timeout")


def to_spec(cfg: RunConfig) -> RunSpec:
    """`resolve(cfg)` with a bad option made exit 2 (one message) and the config file's notes on stderr."""
    try:
        return resolve(cfg, notify=lambda note: err.print(f"note  {note}", markup=False, highlight=False))
    except ConfigError as e:
        fail(f"error: {e}")


def play(spec, plan, *, identity_hint: str | None = None):
    """`runner.run(spec, plan)` with its input errors made exit 2 (a dataset's: every one listed,
    nothing played) and Ctrl-C exit 130; `identity_hint` is added to a refused append (how to
    proceed with this command's options)."""
    from trainer.env.errors import DatasetError, TaskFormatError
    from trainer.formats.identity import IdentityError
    from trainer.rollout.policy import SpecError
    from trainer.formats.record import RecordFileError
    from trainer.rollout.runner import NothingToRun, run

    try:
        result = run(spec, plan, notify=lambda line: err.print(f"skipped  {line}", markup=False, highlight=False))
    except DatasetError as e:
        for x in e.errors:
            err.print(f"error  {x}", markup=False, highlight=False)
        fail(f"error: {len(e.errors)} dataset error(s): nothing was run (--skip-invalid runs the tasks that load)")
    except IdentityError as e:
        fail(f"error: {e}" + (f" ({identity_hint})" if identity_hint else ""))
    except (TaskFormatError, SpecError, RecordFileError, NothingToRun, KeyError) as e:
        fail(f"error: {e}")
    except KeyboardInterrupt:
        err.print("interrupted: every finished episode is recorded; rerun the same command to resume")
        raise typer.Exit(130)
    if result.changed:
        shown = ", ".join(result.changed[:5]) + (f" and {len(result.changed) - 5} more" if len(result.changed) > 5 else "")
        err.print(f"re-run  {len(result.changed)} recorded episode(s) of task(s) whose content changed since they were "
                  f"recorded (their old records are kept in the file, not used): {shown}", markup=False, highlight=False)
    if result.load_errors:
        err.print(f"--skip-invalid: {len(result.load_errors)} dataset entr{'y' if len(result.load_errors) == 1 else 'ies'} "
                  "did not load; their tasks were not run", markup=False, highlight=False)
    return result


def report(result, repeat: int, output: Path, *, exit_on_unresolved: bool = True) -> None:
    """The run's tally line, and its unresolved episodes (exit 1 unless told otherwise)."""
    out.print(result.tally(repeat, output), markup=False, highlight=False)
    if result.unresolved:
        causes = Counter(c for _, _, c in result.unresolved)
        for uid, rep, cause in result.unresolved[:20]:
            err.print(f"unresolved  {uid} #{rep}: {cause}", markup=False, highlight=False)
        if len(result.unresolved) > 20:
            err.print(f"... and {len(result.unresolved) - 20} more ({len(causes)} distinct causes)")
        if exit_on_unresolved:
            raise typer.Exit(1)


def timings_table(bd: Mapping[str, Any], title: str, unit: str = "episode"):
    """The breakdown of `Breakdown.to_json()` (trainer/core/timings.py) as a rich table: phase,
    total seconds, share of the summed wall time, mean per episode, calls and mean per call."""
    from rich.table import Table

    from trainer.core.timings import seconds_text

    t = Table(title=title, title_justify="left")
    t.add_column("phase", no_wrap=True)
    for col in ("total s", "share", f"per {unit}", "calls", "per call"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in bd["rows"]:
        last = r["key"] == "total"
        t.add_row(("  " if r["part"] else "") + r["label"], f"{r['seconds']:,.3f}",
                  "—" if r["share"] is None else f"{r['share']:.1%}", seconds_text(r["per_episode"]),
                  "" if r["calls"] is None else f"{r['calls']:,}", "" if r["per_call"] is None else seconds_text(r["per_call"]),
                  end_section=r["key"] == "framework", style="bold" if last else None)
    return t


def print_timings(bd: Mapping[str, Any], *, unit: str = "episode", run_seconds: float | None = None) -> None:
    """Where the time went, at the end of tbt run / eval / validate-golden: the breakdown table of
    every attempt played (its phases are parts of each episode's wall time; with concurrency the
    summed wall time exceeds the run's)."""
    from trainer.core.timings import seconds_text

    n, untimed = bd["episodes"], bd["untimed"]
    if not n:
        if untimed:
            out.print(f"where the time goes: {untimed} {unit}(s) without timings (written before they were recorded)",
                      markup=False, highlight=False)
        return
    total = bd["seconds"]["total"]
    title = (f"Where the time goes: {n:,} {unit}(s), {seconds_text(total)} of wall time summed over them"
             + (f" in a {seconds_text(run_seconds)} run" if run_seconds is not None else "")
             + (f"; {untimed:,} without timings left out" if untimed else ""))
    table = timings_table(bd, title, unit)
    from trainer.rollout.show import table_width

    wide(table_width(table)).print(table)


def print_domains(spec, repeat: int, output: Path, errors_output: Path | None) -> None:
    """The per-domain table `tbt eval` prints (trainer/eval/summary.py `domain_lines`), over the
    records now in OUTPUT (and the system errors beside them): what `tbt run` ends with."""
    import dataclasses

    from trainer.eval.aggregate import MixedRunsError, aggregate_doc, expected_from_tasks
    from trainer.eval.summary import domain_lines
    from trainer.formats.attempts import AttemptError, read_attempts
    from trainer.rollout.runner import default_errors_path
    from trainer.rollout.setup import load_run_dataset

    paths = [p for p in (output, errors_output or default_errors_path(output)) if p.exists()]
    try:
        attempts = read_attempts(paths).attempts if paths else []
    except AttemptError as e:
        err.print(f"note  no per-domain table: {e}", markup=False, highlight=False)
        return
    if not any(a.system_error is None for a in attempts):
        return
    tasks = [t for t in load_run_dataset(spec).tasks.values() if not t.skip]
    expected = dataclasses.replace(expected_from_tasks(tasks, repeat, str(spec.test_list or spec.dataset)), tags={})
    try:
        doc = aggregate_doc(attempts, expected, profile="none", resamples=100)
    except MixedRunsError as e:  # a run appends only to its own identity's records: not expected
        err.print(f"note  no per-domain table: {e}", markup=False, highlight=False)
        return
    o = doc.overall
    out.print(f"per domain ({output}: {o.attempts:,} scored record(s) of {o.tasks} task(s), pass@1 "
              f"{o.pass_at_1.value:.2%})" if o.pass_at_1.value is not None else f"per domain ({output})",
              markup=False, highlight=False)
    for line in domain_lines(doc):
        out.print(line, markup=False, highlight=False)


@takes("run", RunConfig, RUN_OPTIONS + BUDGET_OPTIONS + ("isolate_tests", "sampling"))
@takes("plan", RunPlan, ("output", "repeat", "concurrency", "errors_output", "retries", "seed", "skip_invalid",
                         "skip_judged", "use_ray", "ray_workers", "progress"))
def run_command(plan: RunPlan, run: RunConfig) -> None:
    """Play every task REPEAT times with a policy; append one record per episode to OUTPUT.

    Rerunning skips every (uid, repetition) already in OUTPUT and re-runs the rest, so a crash or
    Ctrl-C loses at most the episodes in flight. OUTPUT holding records of another run (another
    policy or parameter, sampling, user, judge, budget or seed) is refused, exit 2,
    naming what differs; an episode of a task changed since it was recorded is re-run. System errors (an endpoint or server fault) are
    never scored: each attempt goes to --errors-output and is re-run up to --retries times; what
    is still failing is listed, exit 1. Ends with the per-domain table of tbt eval over OUTPUT's
    records and where the time went (per phase: session start, policy, user, tool calls, effects,
    test, judge, teardown). Records: docs/episodes.md.

    Against served models (docs/episodes.md): --policy openai:http://localhost:8000/v1#Qwen/Qwen3-8B
    --user openai:http://localhost:8001/v1#Qwen/Qwen3-32B; on a Ray cluster add --ray.

    \b
    Examples:
      tbt run data/samples --policy synthetic --repeat 2 --output r.jsonl
      tbt run data/samples --test-list data/samples/lists/toy.yaml --policy synthetic:dist=bimodal,seed=3 -n 4 -o toy-bimodal.jsonl
    """
    spec = to_spec(run)
    result = play(spec, plan)
    report(result, plan.repeat, plan.output, exit_on_unresolved=False)
    print_domains(spec, plan.repeat, plan.output, plan.errors_output)
    print_timings(result.timings.to_json(), run_seconds=result.seconds)
    if result.unresolved:
        raise typer.Exit(1)


def show_command(
    records: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Records file (JSONL) of tbt run.")],
    uid: Annotated[Optional[str], typer.Argument(help="Task uid; omitted: a table of every episode.")] = None,
    repetition: Annotated[Optional[int], typer.Option("--repetition", "-r", help="Which repetition (default: all of the uid).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help=(
        "Only failed episodes and system errors: the records' and every attempt in the errors file "
        "(--errors)."))] = False,
    errors: Annotated[Optional[Path], typer.Option("--errors", dir_okay=False, help=(
        "The run's system-error attempts (JSONL) read with --failed. Default: RECORDS's name with "
        ".errors.jsonl, when it exists."))] = None,
) -> None:
    """Print episodes of a records file: a table, or one task's episodes with verdict and diff.

    A uid is never cut, in a terminal or piped (`tbt show r.jsonl | grep ...`).

    \b
    Examples:
      tbt show r.jsonl
      tbt show r.jsonl toy_loans.py:test_fine_correction -r 0
      tbt show r.jsonl --failed
    """
    from trainer.formats.record import RecordFileError, read_records
    from trainer.rollout.runner import default_errors_path
    from trainer.rollout.show import render_episode, summary_table, table_width

    errors_path = errors or default_errors_path(records)
    if errors is not None and not errors.is_file():
        fail(f"error: --errors {errors}: no such file")
    try:
        recs = read_records(records)
        attempts = read_records(errors_path) if failed and errors_path.is_file() else []
    except RecordFileError as e:
        fail(f"error: {e}")
    if failed:
        recs = [r for r in recs if not r.passed]
    if uid is None:
        table = summary_table(recs, attempts)
        wide(table_width(table)).print(table)
        return
    chosen = [r for r in [*recs, *attempts] if r.uid == uid and (repetition is None or r.repetition == repetition)]
    if not chosen:
        known = sorted({r.uid for r in [*recs, *attempts]})
        import difflib

        close = difflib.get_close_matches(uid, known, n=3)
        fail(f"error: {records}: no episode of {uid!r}" + (f" repetition {repetition}" if repetition is not None else "")
              + (f"; did you mean {', '.join(close)}?" if close else ""))
    for r in chosen:
        wide(160).print(render_episode(r))


def wide(width: int) -> Console:
    """`out`, or when stdout is not a terminal (a pipe, a file) a console `width` columns wide:
    rich would fit everything to 80 columns there, cutting uids and paths."""
    return out if out.is_terminal else Console(soft_wrap=True, emoji=False, width=max(out.width, width))
