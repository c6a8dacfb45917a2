"""`tbt eval`, `tbt aggregate`, `tbt compare`: the k-repeat protocol, agg.json, base → candidate
(registered by trainer/cli.py; the metrics, coverage and cost are trainer/eval/, docs/evaluation.md).

Exit codes as the rest of `tbt`: 0 done, 1 coverage refused (every missing, unresolved or
duplicated task × repetition listed), 2 bad input (a path, a spec, a price table), one message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.rollout.config import RunConfig, RunPlan
from trainer.run_cli import BUDGET_OPTIONS, RUN_OPTIONS, fail, play, print_timings, report, takes, to_spec

PROFILE_HELP = ("full: every task × repetition scored exactly once, no system error left, else refuse "
                "(exit 1, each gap named); none: aggregate what there is and list the gaps in agg.json.")
PRICES_HELP = "Price table YAML ($ per million tokens per model: input, cached_input, output); adds cost."
PRICE_MODEL_HELP = ("ROLE=MODEL (agent, user, judge): price that role's tokens as MODEL (records of the synthetic "
                    "policy or of tb infer name none). Repeatable.")
SHOWN = 200  # coverage faults printed before "... and N more"


def _prices(prices: Path | None, price_model: list[str] | None):
    from trainer.eval.cost import PriceError, load_prices, parse_price_models

    try:
        return (load_prices(prices) if prices else None), parse_price_models(price_model)
    except PriceError as e:
        fail(f"error: {e}")


def _aggregate(paths: list[Path], expected, *, profile: str, prices, price_models, label, output: Path,
               seed: int, resamples: int, keep_identity: str | None = None):
    """Read, check, aggregate and write agg.json (returns the `AggDoc`); exit 1 listing the gaps when `full` refuses."""
    from trainer.eval.aggregate import CoverageError, MixedRunsError, aggregate_doc, write_json
    from trainer.eval.summary import summary_text
    from trainer.formats.attempts import AttemptError, read_attempts

    try:
        read = read_attempts(paths)
    except AttemptError as e:
        fail(f"error: {e}")
    for where in read.torn:
        typer.echo(f"skipped  {where}: a cut-off last line (a write interrupted by a crash)", err=True)
    try:
        doc = aggregate_doc(read.attempts, expected, profile=profile, prices=prices, price_models=price_models,
                            label=label, sources=[str(p) for p in paths], resamples=resamples, seed=seed,
                            keep_identity=keep_identity)
    except MixedRunsError as e:
        fail(f"error: {e}\n(nothing written to {output})")
    except CoverageError as e:
        problems = e.coverage.problems()
        for line in problems[:SHOWN]:
            typer.echo(line, err=True)
        if len(problems) > SHOWN:
            typer.echo(f"... and {len(problems) - SHOWN} more", err=True)
        typer.echo(f"refused: {e} (nothing written to {output}; --coverage-profile none aggregates what there is)",
                   err=True)
        raise typer.Exit(1)
    write_json(doc, output)
    typer.echo(summary_text(doc, output))
    left = doc.identities.get("left_out")
    if left:
        typer.echo(f"--keep-identity {keep_identity}: {sum(left.values())} record(s) of {len(left)} other run(s) left "
                   "out (" + ", ".join(f"{k}: {v}" for k, v in left.items()) + ")", err=True)
    return doc


@takes("run", RunConfig, RUN_OPTIONS + BUDGET_OPTIONS + ("sampling",),
       help={"test_list": "The tasks of the protocol (default: every task)."})
@takes("plan", RunPlan, ("output", "repeat", "concurrency", "errors_output", "retries", "seed", "skip_invalid",
                         "skip_judged", "use_ray", "progress"),
       help={"repeat": "Attempts per task (the seed: 20).", "seed": "Run seed (episodes and the bootstrap)."},
       defaults={"repeat": 20})
def eval_command(
    plan: RunPlan,
    aggregate_output: Annotated[Path, typer.Option("--aggregate-output", dir_okay=False, help="Where agg.json goes.")],
    coverage_profile: Annotated[str, typer.Option("--coverage-profile", help=PROFILE_HELP)] = "full",
    prices: Annotated[Optional[Path], typer.Option("--prices", exists=True, dir_okay=False, help=PRICES_HELP)] = None,
    price_model: Annotated[Optional[list[str]], typer.Option("--price-model", help=PRICE_MODEL_HELP)] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="The run's name in agg.json and tbt compare "
                                                 "(default: the policy spec, e.g. synthetic:p=0.9).")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=100, help="Bootstrap resamples.")] = 2000,
    *,
    run: RunConfig,
) -> None:
    """Evaluate a policy: every task REPEAT times, coverage checked, then agg.json.

    Runs like `tbt run` (resumable: a rerun plays only what OUTPUT lacks; system errors go to
    --errors-output and are re-run, never scored), then checks coverage (--coverage-profile full:
    every task × repetition scored exactly once, else exit 1 naming each gap) and writes
    --aggregate-output: per task n and c, pass@1 with Jeffreys and bootstrap intervals, pass@k,
    observed k/k, pass^k, per domain and tag, and cost with --prices. The policy samples as
    training does (configs/sampling.yaml: temperature, top_k, top_p, max tokens per turn) unless
    --sampling or its spec's options say otherwise. docs/evaluation.md.

    \b
    Examples:
      tbt eval data/samples --test-list data/samples/lists/toy.yaml --policy synthetic --repeat 4 --coverage-profile full --output run.jsonl --errors-output err.jsonl --aggregate-output agg.json
      tbt eval data/samples --test-list data/samples/lists/toy.yaml --policy synthetic:p=0.9 -n 4 -o cand.jsonl --aggregate-output cand.agg.json --prices data/prices.example.yaml --price-model agent=Qwen/Qwen3-8B
    """
    _profile(coverage_profile)
    price_table, price_models = _prices(prices, price_model)
    spec = to_spec(run)
    result = play(spec, plan)
    report(result, plan.repeat, plan.output, exit_on_unresolved=False)
    try:
        _check_and_aggregate(spec, result, run.dataset, run.test_list, plan.repeat, plan.output, plan.errors_output,
                             aggregate_output, coverage_profile=coverage_profile, prices=price_table,
                             price_models=price_models, label=label, seed=plan.seed, bootstrap=bootstrap)
    finally:  # where the time went, at the end, also when coverage refuses
        print_timings(result.timings.to_json(), run_seconds=result.seconds)


def _check_and_aggregate(spec, result, dataset: Path, test_list: Path | None, repeat: int, output: Path,
                         errors_output: Path | None, aggregate_output: Path, *, coverage_profile: str, prices,
                         price_models, label: str | None, seed: int, bootstrap: int) -> None:
    """After the run: a dataset that did not load refused under `full`, then coverage and agg.json."""
    from trainer.eval.aggregate import expected_from_tasks
    from trainer.rollout.runner import default_errors_path
    from trainer.rollout.setup import load_run_dataset

    if result.load_errors and coverage_profile == "full":
        for line in result.load_errors[:SHOWN]:
            typer.echo(f"excluded  {line}", err=True)
        typer.echo(f"refused: coverage (full): {len(result.load_errors)} dataset entr"
                   f"{'y' if len(result.load_errors) == 1 else 'ies'} did not load, so the protocol's task set is "
                   f"incomplete (nothing written to {aggregate_output}; --coverage-profile none aggregates what there is)",
                   err=True)
        raise typer.Exit(1)
    errors_output = errors_output or default_errors_path(output)
    expected = expected_from_tasks(list(load_run_dataset(spec).tasks.values()), repeat, str(test_list or dataset))
    expected.left_out = dict(result.left_out)
    paths = [p for p in (output, errors_output) if p.exists()]
    _aggregate(paths, expected, profile=coverage_profile, prices=prices, price_models=price_models, label=label,
               output=aggregate_output, seed=seed, resamples=bootstrap)


def _profile(profile: str) -> None:
    from trainer.formats.coverage import PROFILES

    if profile not in PROFILES:
        fail(f"error: --coverage-profile {profile!r}: expected one of {', '.join(PROFILES)}")


def aggregate_command(
    records: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help=(
        "Record files (JSONL): ours (tbt run / tbt eval, and their errors files) or tb infer's."))],
    output: Annotated[Path, typer.Option("--output", "-o", dir_okay=False, help="Where agg.json goes.")],
    test_list: Annotated[Optional[Path], typer.Option("--test-list", exists=True, dir_okay=False, help=(
        "The tasks the protocol ran (default: the dataset's, else every uid in the records)."))] = None,
    dataset: Annotated[Optional[Path], typer.Option("--dataset", exists=True, file_okay=False, help=(
        "The dataset: domains from its domain: tags, per-tag blocks, records of changed tasks found."))] = None,
    repeat: Annotated[Optional[int], typer.Option("--repeat", "-n", min=1, help=(
        "Repetitions per task (default: the most the records show)."))] = None,
    coverage_profile: Annotated[str, typer.Option("--coverage-profile", help=PROFILE_HELP)] = "full",
    prices: Annotated[Optional[Path], typer.Option("--prices", exists=True, dir_okay=False, help=PRICES_HELP)] = None,
    price_model: Annotated[Optional[list[str]], typer.Option("--price-model", help=PRICE_MODEL_HELP)] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="The run's name (default: the policy spec).")] = None,
    keep_identity: Annotated[Optional[str], typer.Option("--keep-identity", help=(
        "Records of several runs (another policy, parameter, seed, sampling, ...) are refused, each run named with "
        "an ID: aggregate only this one's (\"unknown\": records without a run identity)."))] = None,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=100, help="Bootstrap resamples.")] = 2000,
) -> None:
    """Aggregate records into agg.json (ours, or the ThinkingBox framework's tb infer JSONL).

    Coverage is checked against --test-list / --dataset × --repeat (profile full refuses on any
    missing, unresolved, duplicated or unexpected task × repetition and names each, exit 1).

    \b
    Examples:
      tbt aggregate run.jsonl err.jsonl --test-list data/samples/lists/toy.yaml --repeat 4 --output agg.json
      tbt aggregate run.jsonl --dataset data/samples --test-list data/samples/lists/toy.yaml --prices data/prices.example.yaml --price-model agent=Qwen/Qwen3-8B -o agg.json
      tbt aggregate run.jsonl --coverage-profile none --output partial.agg.json
    """
    from trainer.formats.coverage import Expected

    _profile(coverage_profile)
    price_table, price_models = _prices(prices, price_model)
    if dataset is not None:
        expected = _dataset_expected(dataset, test_list, repeat)
    elif test_list is not None:
        expected = Expected(uids=_list_uids(test_list), repeat=repeat, source=str(test_list))
    else:
        expected = Expected(repeat=repeat)
    _aggregate(list(records), expected, profile=coverage_profile, prices=price_table, price_models=price_models,
               label=label, output=output, seed=seed, resamples=bootstrap, keep_identity=keep_identity)


def _dataset_expected(dataset: Path, test_list: Path | None, repeat: int | None):
    from trainer.env.errors import DatasetError
    from trainer.env.taskformat.tasks import load_dataset
    from trainer.eval.aggregate import expected_from_tasks

    try:
        ds = load_dataset(dataset, test_list=test_list)
    except DatasetError as e:
        fail(*(f"error: {x}" for x in e.errors))
    bad = [e for e in ds.errors if test_list is not None and Path(e.file) == test_list]
    if bad:
        fail(*(f"error: --test-list {e}" for e in bad))
    return expected_from_tasks(list(ds.tasks.values()), repeat, str(test_list or dataset))


def _list_uids(test_list: Path) -> list[str]:
    from trainer.env.taskformat.tasks import read_test_list

    entries, errors = read_test_list(test_list)
    if errors:
        fail(*(f"error: --test-list {e}" for e in errors))
    return list(dict.fromkeys(f"{Path(f).name}:{t}" for f, t, _ in entries))


def compare_command(
    base: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The base run's agg.json.")],
    candidate: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The candidate's agg.json.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sign-flip test's random patterns (over 16 tasks).")] = 0,
    flips: Annotated[int, typer.Option("--flips", min=1000, help=(
        "Random sign patterns of the sign-flip test over more than 16 tasks (up to 16: all of them)."))] = 20000,
    common_tasks: Annotated[bool, typer.Option("--common-tasks", help=(
        "Runs over different task sets are refused; compare them on the tasks both hold (said in the output)."))] = False,
    at_k: Annotated[Optional[int], typer.Option("--at-k", min=1, help=(
        "Runs of a different k (attempts per task) are refused; compare both at this k (at most the smaller run's; "
        "the larger run's pass@k and k/k then estimated from its attempts, said in the output)."))] = None,
) -> None:
    """Base → candidate: the seed's Table 1 (observed k/k, pass@1, pass@k) and the verdict on
    the pass@1 change (one interval and whether it is distinguishable from no change: the
    sign-flip test over the tasks, which says how the runs' attempts pair, by seed or by task),
    Table 2 (pass@1 by domain), the per-domain changes, and Table 3 (cost per dependable task)
    when both carry costs.

    Only like with like: runs of a different k or over different tasks are refused (exit 2)
    unless --at-k / --common-tasks say how to compare them. Runs are named by their labels
    (default: the policy spec), with the file name when both are the same.

    \b
    Examples:
      tbt compare tests/fixtures/eval/base.agg.json tests/fixtures/eval/candidate.agg.json
      tbt compare tests/fixtures/eval/base.agg.json tests/fixtures/eval/candidate.agg.json --json
    """
    import json

    from trainer.eval.aggregate import read_agg
    from trainer.eval.compare import CompareError, compare, render

    try:
        a, b = read_agg(base), read_agg(candidate)
    except ValueError as e:
        fail(f"error: {e}")
    names = (a.label or "base", b.label or "candidate")
    if names[0] == names[1]:
        names = (f"{names[0]} ({base.name})", f"{names[1]} ({candidate.name})")
    try:
        cmp = compare(a, b, flips=flips, seed=seed, common_tasks=common_tasks, at_k=at_k, names=names)
    except CompareError as e:
        fail(f"error: {e}")
    if as_json:
        print(json.dumps(cmp, ensure_ascii=False))
    else:
        typer.echo(render(cmp))


__all__ = ["aggregate_command", "compare_command", "eval_command"]
