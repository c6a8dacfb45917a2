"""`tbt probe` (base-policy probes, with an optional solvability screen) and `tbt quickstart`.

Probes are runs (`tbt run` with n repetitions per task), so they resume the same way; the screen
runs a strong policy first and probes only what it solved at least once (the rest is listed in
`OUTPUT.screen.json` with the reason). `tbt quickstart` is the first command on a fresh machine:
probes of the sample tasks, data preparation, the band histogram, train.yaml / test.yaml.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.data import quickstart as qs
from trainer.rollout.config import POLICY_HELP, RunConfig, RunPlan
from trainer.run_cli import err, out, play, report, takes, to_spec
from trainer.verl.quickstart_train import LORA_LR, TrainPlan  # stdlib only at import: the defaults of --train live there



def screen_path(output: Path) -> Path:
    return output.with_name(output.stem + ".screen.jsonl")


@takes("run", RunConfig, ("dataset", "policy", "config", "test_list", "user", "judge", "servers", "python", "family",
                         "sampling"),
       help={"policy": "The base policy to probe (or the agent model of --config). " + POLICY_HELP})
@takes("plan", RunPlan, ("output", "concurrency", "seed", "skip_invalid", "use_ray", "progress"), as_dict=True,
       help={"output": "Probe records (JSONL); resumes.", "seed": "Run seed."})
def probe_command(
    run: RunConfig,
    plan: dict,
    n: Annotated[int, typer.Option("--n", min=1, help="Probes per task.")] = 8,
    screen_policy: Annotated[Optional[str], typer.Option("--screen-policy", help=(
        "A strong policy run first; tasks it never solves are not probed (solvability screen)."))] = None,
    screen_n: Annotated[int, typer.Option("--screen-n", min=1, help="Screen runs per task.")] = 2,
) -> None:
    """Probe every task n times with the base policy (the input of data/prepare_data.py).

    With --screen-policy, that policy runs each task --screen-n times first (records in
    OUTPUT.screen.jsonl); tasks it never solves are listed in OUTPUT.screen.json and not probed.
    Rerunning resumes both stages.

    \b
    Examples:
      tbt probe data/samples --policy synthetic --n 8 --output probes.jsonl
      tbt probe data/samples --test-list data/samples/lists/toy.yaml --policy synthetic:p=0.4 --screen-policy synthetic:p=0.9 --screen-n 2 -o toy-screened.jsonl
    """
    import dataclasses

    only, output = None, plan["output"]
    if screen_policy is not None:
        sout = screen_path(output)
        result = play(to_spec(dataclasses.replace(run, policy=screen_policy)),
                      RunPlan(**{**plan, "output": sout, "repeat": screen_n}))
        report(result, screen_n, sout, exit_on_unresolved=False)
        only = frozenset(_screened(sout, output.with_name(output.stem + ".screen.json")))
    result = play(to_spec(run), RunPlan(**plan, repeat=n, only=only))
    report(result, n, output)


def _screened(records: Path, verdict_path: Path) -> set[str]:
    """The uids the screen solved at least once; writes {uid: {n, k, kept, reason}}."""
    from trainer.formats.record import read_records

    tally: dict[str, list[int]] = {}
    for r in read_records(records):
        t = tally.setdefault(r.uid, [0, 0])
        t[0] += 1
        t[1] += r.passed
    out_map = {uid: {"n": n, "k": k, "kept": k > 0,
                     "reason": "" if k else f"never solved by the screen policy (0 of {n})"}
               for uid, (n, k) in sorted(tally.items())}
    verdict_path.write_text(json.dumps(out_map, indent=2) + "\n")
    dropped = [u for u, v in out_map.items() if not v["kept"]]
    err.print(f"screen: {len(out_map) - len(dropped)} of {len(out_map)} task(s) solved at least once; "
              f"{len(dropped)} not probed (listed in {verdict_path})", markup=False, highlight=False)
    return {u for u, v in out_map.items() if v["kept"]}


QUICKSTART_ENDPOINTS = {"TBT_USER_SPEC": "openai:http://USER_HOST:8001/v1#USER_MODEL", "TBT_USER_API_KEY": "EMPTY",
                        "TBT_JUDGE_SPEC": "openai:http://JUDGE_HOST:8002/v1#JUDGE_MODEL",
                        "TBT_JUDGE_API_KEY": "EMPTY"}  # the dry run's placeholders (a local vLLM takes any key)


@takes("run", RunConfig, ("policy", "config"), help={"policy": (
    "The base policy (default: the agent model of --config, else synthetic:dist=bimodal: no GPU). " + POLICY_HELP)})
@takes("plan", RunPlan, ("progress",), as_dict=True)
def quickstart_command(
    run: RunConfig,
    plan: dict,
    n: Annotated[int, typer.Option("--n", min=1, help="Probes per task.")] = 8,
    out_dir: Annotated[Path, typer.Option("--out-dir", file_okay=False, help="Where probes and prepared data go.")] = qs.OUT_DIR,
    dataset: Annotated[Path, typer.Option("--dataset", exists=True, file_okay=False, help="Tasks to probe.")] = qs.SAMPLES,
    train: Annotated[bool, typer.Option("--train", help=(
        "Then learn on this CPU: a golden warm start of a tiny Qwen3 on the laptop pool "
        "(data/samples/lists/laptop.yaml), its evaluation (also its probes and bands), --steps GRPO steps through "
        "scripts/run_train.sh (configs/laptop_grpo.yaml), the trained step's evaluation, tbt compare and tbt report "
        "(OUT_DIR/train; docs/training-laptop.md, \"The whole loop on a laptop\")."))] = False,
    steps: Annotated[int, typer.Option("--steps", min=1, help="GRPO steps of --train.")] = TrainPlan.steps,
    k: Annotated[int, typer.Option("--k", min=2, help="Attempts per task in --train's evaluations.")] = TrainPlan.k,
    lr: Annotated[Optional[float], typer.Option("--lr", show_default=False, help=(
        f"GRPO learning rate of --train [default: {TrainPlan.lr:g}; with --lora {LORA_LR:g}]."))] = None,
    lora: Annotated[bool, typer.Option("--lora", help=(
        "With --train: GRPO trains a LoRA adapter (rank 8, alpha 16, every linear layer; merged into the weights the "
        "rollout plays at each sync) instead of every weight (OUT_DIR/train-lora). It starts from OUT_DIR/train's "
        "warm start and base evaluation where that run finished them, so the two compare on the same base "
        "(docs/training-cpu-engines.md, \"LoRA\")."))] = False,
    control: Annotated[bool, typer.Option("--control", help=(
        "With --train: the permuted-reward control instead of GRPO (each step's rewards permuted across its "
        "episodes, adv_estimator grpo_permuted; OUT_DIR/train-control): the same run with the reward's link to what "
        "the episodes did broken. A rise GRPO shows and the control does not comes from the reward. It starts from "
        "OUT_DIR/train's warm start and base evaluation where that run finished them (the same weights and base "
        "episodes)."))] = False,
    as_json: Annotated[bool, typer.Option("--json", help=(
        "With --train: the last line is one JSON object (base_pass_at_1, trained_pass_at_1, delta, delta_interval, "
        "distinguishable, steps, ...)."))] = False,
) -> None:
    """Probe the sample tasks, prepare the training pool and show its difficulty bands.

    Runs `tbt probe` (the synthetic policy by default: announced, no GPU, no endpoint), then
    data/prepare_data.py into OUT_DIR/prepared (train.yaml, test.yaml, bands.csv, bands.png, ...),
    prints the band histogram and what to run next. Rerunning resumes.

    With --train, then the whole learning loop on this CPU (about 19 min on 2 cores): warm
    start, base evaluation, GRPO on every pool task each step (BATCH=N in the environment: N
    groups), merge, trained evaluation, compare and report, each stage's command and log shown; a
    rerun keeps the stages already done.

    \b
    Examples:
      tbt quickstart
      tbt quickstart --n 4 --out-dir /tmp/qs
      tbt quickstart --train --json
      tbt quickstart --train --control --json
      tbt quickstart --train --lora --json
      tbt quickstart --n 2 --train --steps 1 --k 4
    """
    if as_json and not train:
        err.print("error: --json applies to --train only (the learning loop's summary)", markup=False, highlight=False)
        raise typer.Exit(2)
    if lora and not train:
        err.print("error: --lora applies to --train only (the learning loop's GRPO stage)", markup=False,
                  highlight=False)
        raise typer.Exit(2)
    if control and not train:
        err.print("error: --control applies to --train only (the learning loop's control run)", markup=False,
                  highlight=False)
        raise typer.Exit(2)
    from trainer.data.bands import Bands
    from trainer.data.prepare import PrepareError
    from trainer.data.view import histogram, outcome_line

    progress = plan["progress"]
    cfg = qs.probe_config(dataset, run.policy, run.config)
    notice = qs.synthetic_notice(cfg.policy)
    if notice:
        out.print(notice, markup=False, highlight=False)
    probe_plan = qs.probe_plan(out_dir, n, progress=progress)
    result = play(to_spec(cfg), probe_plan,
                  identity_hint=f"tbt quickstart: pass another --out-dir, or remove {probe_plan.output}")
    report(result, n, probe_plan.output)
    try:
        res = qs.prepare_pool(out_dir, dataset, n)
    except PrepareError as e:
        err.print(f"error: {e}", markup=False, highlight=False)
        raise typer.Exit(2)
    out.print(histogram(res.summary, Bands()))
    out.print(outcome_line(res.summary), markup=False, highlight=False)
    out.print(qs.pool_line(out_dir), markup=False, highlight=False)
    prepared, probes = out_dir / qs.PREPARED, probe_plan.output
    import os

    from trainer.verl.launch import main as launch

    stand_ins = {k: v for k, v in QUICKSTART_ENDPOINTS.items() if not os.environ.get(k)}
    shown = " ".join(f"{k}='{v}'" for k, v in stand_ins.items())
    out.print(f"training command for this pool (dry run: DRY_RUN=true TRAIN_FILE={prepared / 'train.parquet'} "
              f"VAL_FILE={prepared / 'test.parquet'} {shown + ' ' if shown else ''}scripts/run_train.sh):",
              markup=False, highlight=False)
    if stand_ins:
        out.print("a real launch trains against a simulated user and a judge that are models: "
                  f"{', '.join(k for k in stand_ins if k.endswith('_SPEC'))} are shown with placeholders here; set them to your endpoints "
                  "(specs as in `tbt run --help`)", markup=False, highlight=False)
    rc = launch([], {**os.environ, **stand_ins, "DRY_RUN": "true",
                     "TRAIN_FILE": str((prepared / "train.parquet").resolve()),
                     "VAL_FILE": str((prepared / "test.parquet").resolve())})
    out.print("inspect the failures with `tbt show " + str(probes) + " --failed`", markup=False, highlight=False)
    if rc:
        err.print(f"error: the training dry run failed (exit {rc}): see the FAIL lines above", markup=False,
                  highlight=False)
        raise typer.Exit(rc)
    if train:
        # the control and the LoRA run start from the GRPO run's warm start and base evaluation where it finished them
        grpo = out_dir / "train"
        start = grpo if (control or lora) and (grpo / "base.agg.json").is_file() and (grpo / "warm" / "config.json").is_file() else None
        name = "train" + ("-lora" if lora else "") + ("-control" if control else "")
        _train(out_dir / name, steps=steps, k=k, lr=lr if lr is not None else LORA_LR if lora else TrainPlan.lr,
               control=control, as_json=as_json, progress=progress, start=start, lora_rank=8 if lora else 0)


def _train(out_dir: Path, *, steps: int, k: int, lr: float, control: bool, as_json: bool, progress: bool,
           start: Path | None = None, lora_rank: int = 0) -> None:
    from trainer.quickstart_train_cli import StageError, train_loop

    def say(line: str) -> None:
        err.print(line, markup=False, highlight=False)

    try:
        s = train_loop(TrainPlan(out=out_dir, steps=steps, k=k, lr=lr, control=control, progress=progress,
                                 start=start, lora_rank=lora_rank), say)
    except StageError as e:
        err.print(f"error: {e}", markup=False, highlight=False)
        raise typer.Exit(e.code)
    lo, hi = s["delta_interval"] or (None, None)
    verdict = ("no interval (fewer than 2 tasks)" if s["distinguishable"] is None else
               "not distinguishable from no change" if not s["distinguishable"] else
               "up: the interval excludes 0" if s["delta"] > 0 else "down: the interval excludes 0")
    interval = "" if lo is None else f" [{lo * 100:+.1f}, {hi * 100:+.1f}] pt"
    kind = ("LoRA " if lora_rank else "") + ("CONTROL (permuted rewards)" if control else "GRPO")
    u = s["update"]
    say(f"trained {s['steps']} {kind} step(s): pass@1 {s['base_pass_at_1']:.1%} -> {s['trained_pass_at_1']:.1%} "
        f"({s['tasks']} tasks x {s['k']}, at most {s['max_agent_turns']} agent turns an episode, as in training), "
        f"change {s['delta'] * 100:+.1f} pt, 95% {s['method']} interval over tasks "
        f"(paired by {s['pairing']}){interval}: {verdict}; reward per step "
        + ", ".join("-" if r is None else f"{r:.2f}" for r in s["reward_per_step"])
        + f"; {u['seconds_per_step']} s a step, actor memory {u['actor_memory_gb']} GB, optimizer state "
        + f"{(u['optimizer_state_bytes'] or 0) / 2**20:.1f} MiB; {s['total_seconds'] / 60:.1f} min; report {s['report']}")
    if as_json:
        out.print(json.dumps(s), markup=False, highlight=False, soft_wrap=True)
