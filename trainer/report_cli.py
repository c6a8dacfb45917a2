"""`tbt report`: agg.json files -> an HTML report with its plots (trainer/eval/report.py), registered
by trainer/cli.py. Exit 0 written, 2 bad input (a path, a file that is not an agg.json or a
bands.csv or a difficulty state), one message naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.console import Console

if TYPE_CHECKING:
    from trainer.eval.report import Section

err = Console(stderr=True, soft_wrap=True, emoji=False)  # a path in a message stays one line


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
    difficulty: Annotated[Optional[Path], typer.Option(
        "--difficulty", exists=True, dir_okay=False,
        help="An online-difficulty state (thinkingbox_difficulty/global_step_N.json): adds its per-task trace.")] = None,
    common_tasks: Annotated[bool, typer.Option("--common-tasks", help=(
        "A run over other tasks than the base is refused; compare it on the tasks both hold (said in the page)."))] = False,
    at_k: Annotated[Optional[int], typer.Option("--at-k", min=1, help=(
        "A run of another k than the base is refused; compare at this k (said in the page)."))] = None,
    training: Annotated[Optional[Path], typer.Option(
        "--training", exists=True, dir_okay=False,
        help="A training run's metrics (verl's file logger, VERL_FILE_LOGGER_PATH): adds its reward curve per step.")] = None,
    view: Annotated[bool, typer.Option("--view", help=(
        "Also write the trajectory viewer (tbt view) of every run's episodes beside the report, as NAME-episodes.html, "
        "from the records each agg.json names in its sources; the report links it, and each comparison's tasks that "
        "moved most link to their episodes."))] = False,
) -> None:
    """Tables and plots of one or more runs: the runs with their intervals; with two or more, each
    later run against the first (Table 1, costs, the per-domain heatmap of base, candidate and
    change); cost per successful attempt vs pass@1 with the Pareto frontier (runs with a cost);
    reliability curves (pass^k and pass@k vs k); per-domain tables; the band histogram of
    --probes; with --difficulty, the online-difficulty trace (every task's posterior mean after
    every training step) and the tasks that moved most; with --training, the reward curve (the
    share of episodes passed at every training step). The HTML holds everything but the PNGs,
    which it links by relative name. With --view, the episode viewer page beside it, linked.

    \b
    Examples:
      tbt report tests/fixtures/eval/base.agg.json tests/fixtures/eval/candidate.agg.json --html report.html --probes tests/fixtures/eval/bands.csv
      tbt report tests/fixtures/eval/base.agg.json --html base-report.html
      tbt report base.agg.json cand.agg.json --html out/report.html --view
      tbt report tests/fixtures/eval/base.agg.json --html train-report.html --difficulty tests/fixtures/eval/difficulty.json
      tbt report tests/fixtures/eval/base.agg.json --html curve-report.html --training tests/fixtures/eval/metrics.jsonl
    """
    from trainer.eval.report import ReportError, report
    from trainer.verl.difficulty import DifficultyError
    from trainer.verl.trainlog import TrainLogError

    try:
        sections = [difficulty_section(difficulty)] if difficulty is not None else []
        sections += [training_section(training)] if training is not None else []
        written = report(aggs, html_out, probes=probes, sections=sections, common_tasks=common_tasks, at_k=at_k,
                         view=view)
    except (ReportError, DifficultyError, TrainLogError) as e:
        _fail(f"error: {e}")
    except OSError as e:
        _fail(f"error: {e.filename or html_out}: {e.strerror}")
    plots = [p for p in written[1:] if p.suffix == ".png"]
    pages = [p for p in written[1:] if p.suffix == ".html"]
    typer.echo(f"wrote {written[0]} and {len(plots)} plot(s): {', '.join(p.name for p in plots)}"
               + "".join(f"; the episode viewer {p.name}, linked from it" for p in pages))


def difficulty_section(path: Path, top: int = 10) -> Section:
    """The report section of a saved online-difficulty state: the trace plot, and the `top` tasks
    whose posterior mean moved most from their offline prior."""
    from html import escape

    from trainer.eval.report import Section, table
    from trainer.verl.difficulty import DifficultyState, trace_png

    st = DifficultyState.load(path)
    moved = sorted(st.beliefs.items(), key=lambda kv: (-abs(kv[1].mean - kv[1].prior_mean), kv[0]))[:top]
    rows = [[escape(u), f"{b.prior_mean:.3f}", f"{b.mean:.3f}", f"{b.mean - b.prior_mean:+.3f}", f"{b.groups:,}",
             f"{st.p_mixed(u):.1%}"] for u, b in moved]
    groups = sum(b.groups for b in st.beliefs.values())
    body = (f'<p class="note">{len(st.beliefs):,} task(s), {groups:,} training group(s) observed up to step '
            f"{st.step}; the {len(rows)} whose posterior mean moved most from the offline probes:</p>"
            + table(["task", "offline mean", "mean now", "change", "groups", "P(mixed) now"], rows))
    return Section("difficulty", f"Online difficulty ({path.name}, step {st.step})", body, trace_png(st.to_json()))


def training_section(path: Path) -> Section:
    """The report section of a training run's metrics file: the reward curve and its table."""
    from html import escape

    from trainer.eval.report import Section, table
    from trainer.verl.trainlog import curve, curve_png, read

    rows = curve(read(path))

    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    body = (f'<p class="note">{len(rows)} step(s) logged in {escape(str(path))}: the share of each step\'s training '
            "episodes whose verdict passed (the reward GRPO learned from).</p>"
            + table(["step", "passed (share)", "generated tokens / episode", "step seconds"],
                    [[str(r["step"]), f(r["score"], ".3f"), f(r["generated_tokens"], ".0f"), f(r["seconds"], ".1f")]
                     for r in rows]))
    return Section("training", f"Reward per training step ({path.name})", body, curve_png(rows))


__all__ = ["difficulty_section", "report_command", "training_section"]
