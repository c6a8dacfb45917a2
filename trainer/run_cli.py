"""`tbt run` and `tbt show`: play episodes and read them back (registered by trainer/cli.py).

Exit codes as the rest of `tbt`: 0 done, 1 episodes left unresolved by system errors (listed),
2 bad input (a spec, a path, a uid), one clear message on stderr.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Mapping, NoReturn, Optional

import typer
from rich.console import Console


POLICY_HELP = """Policy spec. synthetic[:p=0.7,dist=uniform|bimodal|beta:A:B,map=FILE.yaml,seed=N,ask=BOOL,tokenizer=PATH]
follows the golden actions, deviating with a per-task probability (writes Qwen model text);
openai:URL#MODEL[,temperature=T,top_p=P,max_tokens=N,timeout=S,retries=N,key_env=VAR,token_ids=1,max_context=N,vllm=1]
an OpenAI-compatible chat endpoint running no tool parser (key from $TBT_POLICY_API_KEY or key_env);
tokens:URL#MODEL,tokenizer=PATH[,...] token ids in and out through a completions endpoint (vLLM);
hf:PATH[,temperature=T,max_tokens=N,dtype=float32] a local transformers model on CPU."""
USER_HELP = ("Simulated user spec: scripted[:first=TEXT] (replies from the task's user context), "
             "openai:URL#MODEL[,temperature=T,seed=N,key_env=VAR] (key from $TBT_USER_API_KEY), or none. "
             "Default: scripted for a synthetic policy, else none (an agent that hands the turn over "
             "then ends the episode with no_user_llm).")
JUDGE_HELP = ("Judge spec: openai:URL#MODEL[,key_env=VAR,timeout=S,retries=N], synthetic (answers Yes), none. "
              "Default: $TBT_JUDGE_URL/$TBT_JUDGE_MODEL when set, else synthetic for a synthetic policy, else none.")

# Options shared by tbt run, probe, eval and quickstart (one definition each).
UserOpt = Annotated[Optional[str], typer.Option("--user", help=USER_HELP)]
JudgeOpt = Annotated[Optional[str], typer.Option("--judge", help=JUDGE_HELP)]
PythonOpt = Annotated[Optional[str], typer.Option("--python", help="Interpreter for {python} in servers.yaml.")]
StripSourcesOpt = Annotated[bool, typer.Option("--strip-sources", help="Drop world_state.*.sources.")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Episodes in flight.")]
RetriesOpt = Annotated[int, typer.Option("--retries", min=0, help="Re-runs of a system error in this run.")]
FamilyOpt = Annotated[str, typer.Option("--family", help="Model family: hermes (Qwen3) or xml (Qwen3-Coder, Qwen3.5+).")]
ThinkingOpt = Annotated[bool, typer.Option("--thinking/--no-thinking", help="Reasoning on (Qwen enable_thinking).")]
AgentOpt = Annotated[Optional[str], typer.Option("--agent", help="Agent name (default: the dataset's only one).")]
MaxTokensTotalOpt = Annotated[Optional[int], typer.Option("--max-episode-tokens", help="Budget: the agent's generated tokens per episode.")]
MaxSecondsOpt = Annotated[Optional[float], typer.Option("--max-episode-seconds", help="Budget: wall seconds per episode.")]
MaxContextOpt = Annotated[Optional[int], typer.Option("--max-context", help="Budget: context length in tokens.")]
MaxAgentTurnsOpt = Annotated[Optional[int], typer.Option("--max-agent-turns", min=1, help=(
    "Agent turns of a task that sets no max_agent_sim_turns (default 200; training's thinkingbox.max_agent_turns)."))]
CallTimeoutOpt = Annotated[float, typer.Option("--call-timeout", help="Seconds per tool call (past it: a system error).")]
UseRayOpt = Annotated[bool, typer.Option("--ray", help="Spread episodes over a Ray cluster (also when RAY_ADDRESS is set).")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")]
SkipInvalidOpt = Annotated[bool, typer.Option("--skip-invalid", help=(
    "Run the tasks that load when some dataset entries do not (listed); without it any load error is exit 2."))]
SkipJudgedOpt = Annotated[bool, typer.Option("--skip-judged", help=(
    "With no judge (--judge none), leave out the tasks whose test asks one (listed) instead of refusing the run."))]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False, help=(
    "The ThinkingBox framework's config.yaml (tb infer --config): its orchestrator.agent_model, user_model and "
    "judge_model give --policy, --user and --judge (with their sampling and keys; an option given here wins). "
    "docs/evaluation.md."))]
AgentViewOpt = Annotated[str, typer.Option("--agent-view", help=(
    "thinkingbox: the tools and request as the framework sends them (servers' order, titles dropped, "
    "additionalProperties false, max_completion_tokens); plain: the scenario's order and the servers' schemas."))]
SamplingOpt = Annotated[Optional[Path], typer.Option("--sampling", exists=True, dir_okay=False, help=(
    "Sampling config YAML (temperature, top_k, top_p, max_turn_tokens): the policy's defaults. "
    "Default: configs/sampling.yaml, the one training samples with; a policy spec's options override."))]


err = Console(stderr=True, soft_wrap=True, emoji=False)  # no emoji codes: `r.jsonl:100:` stays text
out = Console(soft_wrap=True, emoji=False)


def fail(msg: str) -> NoReturn:
    """One message on stderr, exit 2 (bad input)."""
    err.print(msg, markup=False, highlight=False)
    raise typer.Exit(2)


@dataclass
class SpecOptions:
    """The options that say what a run is (shared by tbt run, probe, eval and quickstart): checked
    and made into the `RunSpec` by `to_spec()` (exit 2 on a bad family, interpreter or sampling file)."""

    dataset: Path
    policy: str | None
    test_list: Path | None = None
    user: str | None = None
    judge: str | None = None
    servers: Path | None = None
    python: str | None = None
    family: str = "hermes"
    thinking: bool = True
    agent: str | None = None
    max_episode_tokens: int | None = None
    max_episode_seconds: float | None = None
    max_context: int | None = None
    max_agent_turns: int | None = None  # default: EpisodeConfig's cap
    call_timeout: float = 30.0
    isolate_tests: bool = False
    strip_sources: bool = False
    sampling: Path | None = None  # default: configs/sampling.yaml
    config: Path | None = None  # the framework's config.yaml: policy, user and judge where not given
    agent_view: str = "thinkingbox"

    def from_config(self) -> None:
        """--policy, --user and --judge from --config where they were not given (exit 2 on a bad
        file, naming its line and key); the file's notes on stderr."""
        if self.config is None:
            if self.policy is None:
                fail("error: give --policy SPEC (or --config thinkingbox.yaml)")
            return
        from trainer.rollout.tbconfig import TBConfigError, read_tb_config

        try:
            c = read_tb_config(self.config)
        except TBConfigError as e:
            fail(f"error: --config {e}")
        for note in c.notes:
            err.print(f"note  --config {self.config}: {note}", markup=False, highlight=False)
        self.policy = self.policy or c.policy
        self.user = self.user or c.user
        self.judge = self.judge or c.judge

    def to_spec(self):
        from trainer.rollout.episode import EpisodeConfig
        from trainer.rollout.sampling import SamplingError, load_sampling
        from trainer.rollout.setup import RunSpec

        self.from_config()
        if self.agent_view not in ("thinkingbox", "plain"):
            fail(f"error: --agent-view {self.agent_view!r}: expected thinkingbox or plain")
        if self.family not in ("hermes", "xml"):
            fail(f"error: --family {self.family!r}: expected hermes or xml")
        if self.python is not None and shutil.which(self.python) is None:
            fail(f"error: --python {self.python}: no such executable")
        try:
            sampling = load_sampling(self.sampling)
        except SamplingError as e:
            fail(f"error: --sampling {e}")
        default_servers = self.dataset / "servers.yaml"
        servers = self.servers or (default_servers if default_servers.is_file() else None)
        return RunSpec(dataset=str(self.dataset.resolve()), policy=self.policy,
                       test_list=str(self.test_list.resolve()) if self.test_list else None, user=self.user,
                       judge=self.judge, servers=str(servers.resolve()) if servers else None, python=self.python,
                       family=self.family, thinking=self.thinking, agent=self.agent,  # type: ignore[arg-type]
                       config=EpisodeConfig(max_episode_tokens=self.max_episode_tokens,
                                            max_episode_seconds=self.max_episode_seconds, max_context=self.max_context,
                                            max_agent_turns=self.max_agent_turns or EpisodeConfig.max_agent_turns,
                                            call_timeout=self.call_timeout, isolate_tests=self.isolate_tests,
                                            strip_sources=self.strip_sources, agent_view=self.agent_view),
                       sampling=sampling)


def play(spec, plan, *, identity_hint: str | None = None):
    """`runner.run(spec, plan)` with its input errors made exit 2 (a dataset's: every one listed,
    nothing played) and Ctrl-C exit 130; `identity_hint` is added to a refused append (how to
    proceed with this command's options)."""
    from trainer.env.errors import DatasetError, TaskFormatError
    from trainer.rollout.identity import IdentityError
    from trainer.rollout.policy import SpecError
    from trainer.rollout.record import RecordFileError
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
    scored = result.written
    rate = f"{result.passed / scored:.1%}" if scored else "-"
    out.print(f"{result.tasks} task(s) × {repeat} = {result.planned} episode(s): {result.already} already recorded, "
              f"{scored} written now (pass {rate}), {result.attempts_failed} system-error attempt(s), "
              f"{len(result.unresolved)} unresolved, {result.seconds:.1f} s ({result.rate:.1f} episodes/s) → {output}",
              markup=False, highlight=False)
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
    from trainer.rollout.attempts import AttemptError, read_attempts
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


def run_command(
    dataset: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="ThinkingBox dataset directory.")],
    output: Annotated[Path, typer.Option("--output", "-o", dir_okay=False, help="Records (JSONL), appended; resumes.")],
    policy: Annotated[Optional[str], typer.Option("--policy", help=POLICY_HELP)] = None,
    config: ConfigOpt = None,
    agent_view: AgentViewOpt = "thinkingbox",
    test_list: Annotated[Optional[Path], typer.Option("--test-list", exists=True, dir_okay=False,
                                                      help="Only the tasks of this list.")] = None,
    user: UserOpt = None,
    judge: JudgeOpt = None,
    servers: Annotated[Optional[Path], typer.Option("--servers", exists=True, dir_okay=False, help=(
        "ThinkingBox servers.yaml; servers not in it are our in-process domains. "
        "Default: DATASET/servers.yaml if present."))] = None,
    python: PythonOpt = None,
    strip_sources: StripSourcesOpt = False,
    repeat: Annotated[int, typer.Option("--repeat", "-n", min=1, help="Episodes per task.")] = 1,
    concurrency: ConcurrencyOpt = 8,
    errors_output: Annotated[Optional[Path], typer.Option("--errors-output", dir_okay=False, help=(
        "System-error attempts (JSONL). Default: OUTPUT's name with .errors.jsonl."))] = None,
    retries: RetriesOpt = 2,
    seed: Annotated[int, typer.Option("--seed", help="Run seed (each episode's seed derives from it).")] = 0,
    family: FamilyOpt = "hermes",
    thinking: ThinkingOpt = True,
    agent: AgentOpt = None,
    max_tokens_total: MaxTokensTotalOpt = None,
    max_seconds: MaxSecondsOpt = None,
    max_context: MaxContextOpt = None,
    max_agent_turns: MaxAgentTurnsOpt = None,
    call_timeout: CallTimeoutOpt = 30.0,
    isolate: Annotated[bool, typer.Option("--isolate-tests", help="Run test functions in a subprocess.")] = False,
    sampling: SamplingOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    skip_judged: SkipJudgedOpt = False,
    use_ray: UseRayOpt = False,
    ray_workers: Annotated[Optional[int], typer.Option("--ray-workers", min=1, help="Ray actors (default: the cluster's CPUs).")] = None,
    progress: ProgressOpt = True,
) -> None:
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
    from trainer.rollout.runner import RunPlan

    spec = SpecOptions(dataset, policy, test_list, user=user, judge=judge, servers=servers, python=python, family=family,
                       thinking=thinking, agent=agent, max_episode_tokens=max_tokens_total,
                       max_episode_seconds=max_seconds, max_context=max_context, max_agent_turns=max_agent_turns,
                       call_timeout=call_timeout, isolate_tests=isolate, strip_sources=strip_sources, sampling=sampling,
                       config=config,
                       agent_view=agent_view).to_spec()
    result = play(spec, RunPlan(output=output, repeat=repeat, errors_output=errors_output, concurrency=concurrency,
                                retries=retries, seed=seed, progress=progress, use_ray=use_ray, ray_workers=ray_workers,
                                skip_invalid=skip_invalid, skip_judged=skip_judged))
    report(result, repeat, output, exit_on_unresolved=False)
    print_domains(spec, repeat, output, errors_output)
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
    from trainer.rollout.record import RecordFileError, read_records
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
