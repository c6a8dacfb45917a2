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
from trainer.verl import merge as mg
from trainer.verl import lora_merge as lm

checkpoint_app = typer.Typer(help="verl FSDP checkpoints: verify every rank's shards, merge a step into a "
                                  "Hugging Face model. See docs/training-verl.md (Checkpoints).",
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

    A LoRA step (lora_train_meta.json, or lora_A/lora_B in the model shards) is reported with its
    rank and alpha and whether the save is LoRA-only (the shards hold only the adapter: a resume
    needs the same base model); a missing or unreadable lora_train_meta.json is a problem (verl's
    merger takes lora_alpha only from it).

    \b
    Examples:
      tbt checkpoint verify tests/fixtures/checkpoints/tiny
      tbt checkpoint verify tests/fixtures/checkpoints/tiny --step 1 --json
      tbt checkpoint verify tests/fixtures/checkpoints/tiny_lora
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
    target: Annotated[Path, typer.Option("--target", help="Folder for the merged Hugging Face model, or with "
                                                                 "--adapter-only for the adapter (new or empty).")],
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
                                                 "verl's merger (which casts to bfloat16). A LoRA step: its base "
                                                 "and adapter as trained, from the shards, folded in float32.")] = False,
    adapter_only: Annotated[bool, typer.Option("--adapter-only", help="Write only a LoRA step's adapter (PEFT: "
                                               "adapter_config.json, adapter_model.safetensors, as trained) for "
                                               "vLLM's --lora-modules or PeftModel.from_pretrained; a step with "
                                               "no adapter: exit 2.")] = False,
) -> None:
    """Merge one step's actor shards into a Hugging Face model with verl's own merger
    (`python -m verl.model_merger merge --backend fsdp --local_dir DIR/global_step_N/actor
    --target_dir TARGET`, run in this interpreter), after checking the step is complete; then
    check the merged model: config.json matching the checkpoint's, weights, tokenizer files, a
    chat template that renders, and the weights load into AutoModelForCausalLM on CPU with no key
    missing or misshapen. The merged weights are bfloat16 (verl's merger casts them); with
    --full-precision they are the step's own (a small model's GRPO update can be smaller than
    bfloat16's rounding: evaluate such a model as trained).

    A LoRA step (actor_rollout_ref.model.lora_rank > 0): verl's merger writes the base weights
    only and the adapter to TARGET/lora_adapter; here the adapter is then folded into the
    weights (W + lora_alpha / r * B @ A, in float32, stored in the model's dtype) and removed
    from TARGET, so TARGET is the trained model and nothing else (a server given TARGET and the
    adapter would apply it twice). With --full-precision the base and the
    adapter come as trained (float32) from the shards, folded in float32. With --adapter-only
    only the adapter is written, for `vllm serve BASE --enable-lora --lora-modules NAME=TARGET`
    (BASE: the run's actor_rollout_ref.model.path); a LoRA-only save (the shards hold only the
    adapter) can only be exported so.

    \b
    Examples:
      tbt checkpoint merge tests/fixtures/checkpoints/tiny --step 2 --target merged-step2
      tbt checkpoint merge tests/fixtures/checkpoints/tiny --step 2 --target merged-fp32 --full-precision
      tbt checkpoint merge tests/fixtures/checkpoints/tiny_lora --step 2 --target merged-lora
      tbt checkpoint merge tests/fixtures/checkpoints/tiny_lora --step 2 --target merged-lora-fp32 --full-precision
      tbt checkpoint merge tests/fixtures/checkpoints/tiny_lora --step 2 --target lora-step2 --adapter-only
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
    lora = actor.lora
    if adapter_only:
        _export_adapter(step, actor_dir, actor, target, full_precision)
        return
    if lora and lora.get("lora_only"):
        _fail(f"global_step_{step} is a LoRA-only save ({actor_dir}: the model shards hold only the adapter): "
              "merging needs the base weights; export the adapter with --adapter-only and use it on the run's "
              "base model (actor_rollout_ref.model.path)")
    if full_precision and lora:
        try:
            adapter, _ = lm.full_precision_lora_model(actor_dir, actor.world_size, target)
        except lm.AdapterError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)
        typer.echo(f"built global_step_{step} in float32 from its shards (base and LoRA adapter as trained) and "
                   f"folded the adapter (W + scale * B @ A): {adapter.summary()}; the adapter alone: "
                   f"{_export_hint(root, step)}", err=True)
    elif full_precision:
        try:
            dtype = mg.copy_saved_hf(actor_dir, target)
        except mg.NoSavedWeights as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)
        typer.echo(f"copied global_step_{step}'s saved Hugging Face model ({dtype} weights, as trained): "
                   f"{actor_dir / 'huggingface'} -> {target}", err=True)
    else:
        _replace_folder(target / lm.ADAPTER_DIR)  # (--overwrite) one there now is verl's merger's, of this step
        cmd = mg.merger_command(actor_dir, target, python)
        typer.echo(f"merging global_step_{step} ({actor.world_size} rank(s)): {' '.join(cmd)}", err=True)
        code = mg.run_merger(cmd, lambda line: typer.echo(f"  | {line}", err=True))
        if code != 0:
            typer.echo(f"error: the merger failed (exit {code}); its output is above", err=True)
            raise typer.Exit(1)
        if lora or (target / lm.ADAPTER_DIR).exists():
            _fold_merged(step, target, _export_hint(root, step))
    merged = mg.check_merged_model(target, expect_config=actor_dir / "huggingface" / "config.json", load=not skip_load)
    for p in merged.problems:
        typer.echo(f"error: {p}", err=True)
    if not merged.ok:
        raise typer.Exit(1)
    info = merged.info
    loaded = (f"loads as {info['architecture']} ({info['parameters']:,} parameters, {info['dtype']})"
              if "parameters" in info else "weights not loaded (--skip-load)")
    typer.echo(f"merged global_step_{step} -> {target}: config, weights, tokenizer ({', '.join(info['tokenizer_files'])}), "
               f"chat template; {loaded}")


def _export_hint(root: Path, step: int) -> str:
    """The command that writes a LoRA step's adapter alone."""
    return f"tbt checkpoint merge {root} --step {step} --target ADAPTER_DIR --adapter-only"


def _replace_folder(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _drop_weights(target: Path) -> None:
    """Remove the merged weights from `target`: they lack the adapter (the model is not the trained one)."""
    for f in target.iterdir():
        if f.is_file() and (f.name in ck.WEIGHT_FILES or f.suffix in (".safetensors", ".bin")):
            f.unlink()


def _fold_merged(step: int, target: Path, hint: str) -> None:
    """After verl's merger on a LoRA step: fold TARGET/lora_adapter into TARGET's weights, then remove
    the adapter from the model folder. On any failure the merged weights are removed (they are the
    base model's, not the trained one's) and the command fails."""
    adapter_dir = target / lm.ADAPTER_DIR
    try:
        if not adapter_dir.is_dir():
            raise lm.AdapterError(f"{adapter_dir}: missing: verl's merger wrote no adapter for a LoRA step")
        adapter = lm.read_adapter(adapter_dir)
        lm.fold_adapter_into(target, adapter)
    except lm.AdapterError as e:
        _drop_weights(target)
        typer.echo(f"error: {e}", err=True)
        typer.echo(f"error: {target}'s weights were removed: without the adapter they are the base model's", err=True)
        raise typer.Exit(1)
    _replace_folder(adapter_dir)
    typer.echo(f"folded global_step_{step}'s LoRA adapter into {target}'s weights (W + scale * B @ A in float32, "
               f"stored in the model's dtype): {adapter.summary()}; the adapter alone: {hint}", err=True)


def _export_adapter(step: int, actor_dir: Path, actor, target: Path, full_precision: bool) -> None:
    """--adapter-only: the step's adapter as trained, from its shards, in PEFT's layout; checked by
    reading it back."""
    if full_precision:
        _fail("--adapter-only writes the adapter as trained (its own dtype); --full-precision is for a merged model")
    if not actor.lora:
        _fail(f"global_step_{step} has no LoRA adapter ({actor_dir}: no {ck.LORA_META}, no lora_A/lora_B in its "
              "model shards): a full-model checkpoint; merge it without --adapter-only")
    try:
        adapter, _ = lm.adapter_from_step(actor_dir, actor.world_size)
        lm.write_adapter(adapter, target)
        back = lm.read_adapter(target)
    except lm.AdapterError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1)
    typer.echo(f"exported global_step_{step}'s LoRA adapter -> {target}: {back.summary()} (adapter_config.json, "
               "adapter_model.safetensors)")
    typer.echo(f"use it on the run's base model (actor_rollout_ref.model.path): vllm serve BASE --enable-lora "
               f"--lora-modules NAME={target}, or peft.PeftModel.from_pretrained(base, {str(target)!r})")
