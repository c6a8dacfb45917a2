"""`tbt checkpoint verify|merge`: verl FSDP checkpoints (trainer/verl/checkpoint.py), registered by
trainer/cli.py as the `checkpoint` group. Exit 0 done, 1 a check failed (every problem named by
its file), 2 bad input (a path that is not a checkpoint folder, a target that is not empty)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from trainer.verl import checkpoint as ck

checkpoint_app = typer.Typer(help="verl FSDP checkpoints: verify every rank's shards, merge a step into a "
                                  "Hugging Face model. See docs/training.md (Checkpoints).",
                             no_args_is_help=True)

DirArg = Annotated[Path, typer.Argument(help="The checkpoint folder (trainer.default_local_dir), or one of its "
                                             "global_step_N folders.", exists=True, file_okay=False)]


def _fail(msg: str) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _root(path: Path, step: int | None) -> tuple[Path, int | None]:
    try:
        return ck.resolve_root(path, step)
    except ck.CheckpointInputError as e:
        _fail(str(e))


@checkpoint_app.command("verify")
def verify_command(
    directory: DirArg,
    step: Annotated[Optional[int], typer.Option("--step", min=0, help="Only this step (default: every step found).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Check that every rank's shards (model, optimizer, extra state) of each step are there and
    non-empty and whole, with fsdp_config.json, the huggingface/ config and tokenizer and data.pt,
    and that latest_checkpointed_iteration.txt names a step that is there; then say how to resume.
    Exit 1 naming every missing or broken file.

    \b
    Examples:
      tbt checkpoint verify tests/fixtures/checkpoints/tiny
      tbt checkpoint verify tests/fixtures/checkpoints/tiny --step 1 --json
    """
    root, step = _root(directory, step)
    report = ck.verify(root, None if step is None else [step])
    if as_json:
        print(json.dumps(report.to_dict()))
    else:
        typer.echo(ck.report_text(report), nl=False)
    raise typer.Exit(0 if report.ok else 1)


@checkpoint_app.command("merge")
def merge_command(
    directory: DirArg,
    target: Annotated[Path, typer.Option("--target", help="Folder for the merged Hugging Face model (new or empty).")],
    step: Annotated[Optional[int], typer.Option("--step", min=0, help="The step to merge (default: the one "
                                                "latest_checkpointed_iteration.txt names).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Merge into a target that is not empty.")] = False,
    skip_load: Annotated[bool, typer.Option("--skip-load", help="Do not load the merged weights to check them "
                                            "(loading needs about 2 bytes of RAM per parameter).")] = False,
    python: Annotated[Optional[str], typer.Option("--python", help="Interpreter with verl for the merger "
                                                  "(default: this one).")] = None,
    full_precision: Annotated[bool, typer.Option("--full-precision", help="Copy the step's Hugging Face model as "
                                                 "trained (float32 here), which verl saves beside the shards when "
                                                 "actor.checkpoint.save_contents has hf_model, instead of running "
                                                 "verl's merger (which casts to bfloat16).")] = False,
) -> None:
    """Merge one step's actor shards into a Hugging Face model with verl's own merger
    (`python -m verl.model_merger merge --backend fsdp --local_dir DIR/global_step_N/actor
    --target_dir TARGET`, run in this interpreter), after checking the step is complete; then
    check the merged model: config.json matching the checkpoint's, weights, tokenizer files, a
    chat template that renders, and the weights load into AutoModelForCausalLM on CPU with no key
    missing or misshapen. The merged weights are bfloat16 (verl's merger casts them); with
    --full-precision they are the step's own (a small model's GRPO update can be smaller than
    bfloat16's rounding: evaluate such a model as trained).

    \b
    Examples:
      tbt checkpoint merge tests/fixtures/checkpoints/tiny --step 2 --target merged-step2
      tbt checkpoint merge tests/fixtures/checkpoints/tiny --step 2 --target merged-fp32 --full-precision
    """
    root, step = _root(directory, step)
    if step is None:
        step, problem = ck.read_tracker(root)
        if step is None:
            _fail(f"give --step: {root}/{problem}")
    if target.exists() and not target.is_dir():
        _fail(f"--target {target}: is a file")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        _fail(f"--target {target}: not empty (pass --overwrite to merge into it)")
    if python is not None and shutil.which(python) is None:
        _fail(f"--python {python}: no such executable")

    if not (root / f"global_step_{step}").is_dir():
        have = ck.list_steps(root)
        typer.echo(f"error: {root}: no global_step_{step} (have: {', '.join(map(str, have)) or 'none'})", err=True)
        raise typer.Exit(1)
    actor = ck.verify_role(root, step, "actor")
    if actor.problems:
        typer.echo(f"error: global_step_{step} cannot be merged:", err=True)
        for p in actor.problems:
            typer.echo(f"  {p}", err=True)
        raise typer.Exit(1)
    actor_dir = root / f"global_step_{step}" / "actor"
    if full_precision:
        try:
            dtype = ck.copy_saved_hf(actor_dir, target)
        except ck.NoSavedWeights as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)
        typer.echo(f"copied global_step_{step}'s saved Hugging Face model ({dtype} weights, as trained): "
                   f"{actor_dir / 'huggingface'} -> {target}", err=True)
    else:
        cmd = ck.merger_command(actor_dir, target, python)
        typer.echo(f"merging global_step_{step} ({actor.world_size} rank(s)): {' '.join(cmd)}", err=True)
        code = ck.run_merger(cmd, lambda line: typer.echo(f"  | {line}", err=True))
        if code != 0:
            typer.echo(f"error: the merger failed (exit {code}); its output is above", err=True)
            raise typer.Exit(1)
    merged = ck.check_merged_model(target, expect_config=actor_dir / "huggingface" / "config.json", load=not skip_load)
    for p in merged.problems:
        typer.echo(f"error: {p}", err=True)
    if not merged.ok:
        raise typer.Exit(1)
    info = merged.info
    loaded = (f"loads as {info['architecture']} ({info['parameters']:,} parameters, {info['dtype']})"
              if "parameters" in info else "weights not loaded (--skip-load)")
    typer.echo(f"merged global_step_{step} -> {target}: config, weights, tokenizer ({', '.join(info['tokenizer_files'])}), "
               f"chat template; {loaded}")
