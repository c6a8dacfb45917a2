"""`tbt warm-start`: fine-tune a model on the tasks' golden trajectories (trainer/data/warmstart.py).

Exit codes as the rest of `tbt`: 0 done, 1 golden episodes left unresolved by system errors, 2 bad
input (a path, an option, a dataset error), one message on stderr.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.rollout.config import RunConfig, RunPlan
from trainer.run_cli import err, fail, out, play, report, takes, to_spec

GOLDEN = "golden.jsonl"  # the golden episodes' records, inside the output directory
BASE = "base"  # the tiny base model built when --base is not given, inside the output directory


@takes("run", RunConfig, ("dataset", "test_list", "family"))
@takes("plan", RunPlan, ("skip_invalid", "progress"), as_dict=True)
def warm_start_command(
    run: RunConfig,
    plan: dict,
    output: Annotated[Path, typer.Option("--output", "-o", file_okay=False, help=(
        "The checkpoint directory (hf:OUTPUT loads it). It also keeps golden.jsonl (the golden episodes' "
        "records; a rerun reuses them), warm_start.json and, without --base, base/ (the tiny model)."))],
    base: Annotated[Optional[Path], typer.Option("--base", exists=True, file_okay=False, help=(
        "The model to fine-tune (an HF causal LM directory with a Qwen chat tokenizer). "
        "Default: a tiny random Qwen3-architecture model with the real Qwen3 tokenizer, built in OUTPUT/base "
        "(--hidden, --layers)."))] = None,
    hidden: Annotated[int, typer.Option("--hidden", min=8, help="Width of the tiny base model (without --base).")] = 64,
    layers: Annotated[int, typer.Option("--layers", min=1, help="Layers of the tiny base model (without --base).")] = 2,
    epochs: Annotated[float, typer.Option("--epochs", help="Passes over the golden trajectories.")] = 30.0,
    lr: Annotated[float, typer.Option("--lr", help="Peak learning rate (AdamW, linear warmup and decay).")] = 3e-3,
    keep_turns: Annotated[float, typer.Option("--keep-turns", help=(
        "Fraction of each trajectory's assistant turns trained on (the first ones; the rest is cut off)."))] = 1.0,
    keep_tasks: Annotated[float, typer.Option("--keep-tasks", help=(
        "Fraction of the tasks trained on (a seeded choice); the others are left unseen."))] = 1.0,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Trajectories per optimizer step.")] = 1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the base model, the golden run, the task choice and training.")] = 0,
    threads: Annotated[int, typer.Option("--threads", min=1, help="torch CPU threads.")] = 2,
    force: Annotated[bool, typer.Option("--force", help="Replace a checkpoint already in OUTPUT (and its golden records).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object (the last line).")] = False,
) -> None:
    """Fine-tune a model on the tasks' golden trajectories, rendered exactly as training renders them.

    Each task is played once by the synthetic policy's golden mode (synthetic:p=1.0, token level:
    real sandbox, tool results and grader; wall-clock fields stamped with the session's fixed clock, so a
    rerun trains on the same tokens); each passing episode's token trajectory (prompt ids,
    response ids, response mask: the records' `tokens`) is one example, trained with the loss only on
    the assistant's tokens, by transformers' Trainer on CPU. The checkpoint in OUTPUT loads as
    --policy hf:OUTPUT. --epochs, --keep-turns and --keep-tasks make a model that solves some tasks
    some of the time (docs/training-laptop.md, "The golden warm start"). Play it with a user and a judge, as the
    golden episodes were: tbt run data/samples --test-list data/samples/lists/toy.yaml --policy hf:warm,max_tokens=256
    --user scripted --judge synthetic -n 4 -o warm-runs.jsonl

    \b
    Examples:
      tbt warm-start data/samples --test-list data/samples/lists/toy.yaml -o warm --epochs 2
    """
    from trainer.formats.record import RecordFileError, read_records
    from trainer.data import warmstart as ws
    from trainer.verl.tiny import build_tiny_qwen3

    dataset, test_list, progress = run.dataset, run.test_list, plan["progress"]
    options = ws.TrainOptions(epochs=epochs, learning_rate=lr, batch_size=batch_size, seed=seed, threads=threads,
                              progress=progress)
    try:
        options.check()
        for name, value in (("--keep-turns", keep_turns), ("--keep-tasks", keep_tasks)):
            if not 0 < value <= 1:
                raise ws.WarmStartError(f"{name} {value}: expected a fraction in (0, 1]")
    except ws.WarmStartError as e:
        fail(f"error: {e}")
    if output.exists() and not output.is_dir():
        fail(f"error: --output {output}: not a directory")
    if (output / "config.json").exists():
        if not force:
            fail(f"error: --output {output}: already holds a checkpoint (config.json); --force replaces it")
        for p in output.iterdir():
            if p.name != BASE:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    output.mkdir(parents=True, exist_ok=True)

    import torch

    torch.set_num_threads(threads)
    if base is None:
        base = build_tiny_qwen3(output / BASE, hidden=hidden, layers=layers, seed=seed)
        err.print(f"base  tiny Qwen3 (hidden {hidden}, {layers} layers) → {base}", markup=False, highlight=False)
    golden = output / GOLDEN
    t0 = time.perf_counter()
    import dataclasses

    spec = to_spec(dataclasses.replace(run, policy=ws.golden_policy(base.resolve())))
    from trainer.domains.kit import pinned_wall_clock

    with pinned_wall_clock():
        result = play(spec, RunPlan(output=golden, repeat=1, seed=seed, **plan))
    report(result, 1, golden)
    golden_seconds = time.perf_counter() - t0
    try:
        selection = ws.examples_from_records(read_records(golden), keep_turns=keep_turns, keep_tasks=keep_tasks,
                                             seed=seed)
    except (RecordFileError, ws.WarmStartError) as e:
        fail(f"error: {golden}: {e}")
    for uid in selection.failed:
        err.print(f"not trained  {uid}: its golden episode did not pass (tbt show {golden} {uid})",
                  markup=False, highlight=False)
    if not selection.examples:
        fail(f"error: {golden}: no golden episode passed; nothing to train on")
    tokens = sum(e.trained_tokens for e in selection.examples)
    err.print(f"train  {len(selection.examples)} trajectories ({len(selection.left_out)} task(s) left out by "
              f"--keep-tasks), {tokens} assistant tokens, {epochs:g} epochs, lr {lr:g}", markup=False, highlight=False)
    trained = ws.fine_tune(base, selection.examples, output, options)
    sampling = spec.sampling
    golden_p = ws.checkpoint_golden_probability(output, read_records(golden), temperature=sampling.temperature,
                                                top_k=sampling.top_k, top_p=sampling.top_p)
    manifest = ws.write_manifest(output, base=str(base), dataset=str(dataset), test_list=str(test_list) if test_list else None,
                                 options=options, keep_turns=keep_turns, keep_tasks=keep_tasks, selection=selection,
                                 result=trained, golden_seconds=golden_seconds, golden_p=golden_p)
    for uid, p in golden_p.items():
        err.print(f"golden p  {p:.3f}  {uid}", markup=False, highlight=False)
    summary = {"checkpoint": str(output), "tasks": len(selection.examples), "steps": trained.steps, "golden_p": golden_p,
               "first_loss": trained.first_loss, "last_loss": trained.last_loss, "seconds": manifest["seconds"]}
    if as_json:
        out.print(json.dumps(summary), markup=False, highlight=False)
    else:
        out.print(f"warm start: {trained.steps} steps, loss {trained.first_loss:.3f} → {trained.last_loss:.3f}, "
                  f"{trained.seconds:.0f} s → {output} (--policy hf:{output})", markup=False, highlight=False)

