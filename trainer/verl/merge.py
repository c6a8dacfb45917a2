"""A verl FSDP checkpoint step merged into a Hugging Face model, and the merged model checked.

`merger_command` / `run_merger`: verl's own merger (`python -m verl.model_merger merge --backend
fsdp`) in a subprocess; `copy_saved_hf`: the float32 model verl's checkpoint manager saved beside
the shards (`save_contents` with hf_model), copied as trained; `check_merged_model`: config,
weights, tokenizer, chat template, and the weights loaded with AutoModelForCausalLM on CPU.
Verifying a step is trainer/verl/checkpoint.py's; a LoRA step's fold and export
trainer/verl/lora_merge.py's. transformers is imported only to load a merged model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainer.verl.checkpoint import (
    CHAT_TEMPLATE_FILES, CONFIG_KEYS_MATCHED, TOKENIZER_FILES, WEIGHT_FILES, has_chat_template
)

def merger_command(actor_dir: Path, target: Path, python: str | None = None) -> list[str]:
    """verl's own merger, in this interpreter: `python -m verl.model_merger merge --backend fsdp`."""
    return [python or sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
            "--local_dir", str(actor_dir), "--target_dir", str(target)]


def run_merger(cmd: list[str], echo: Callable[[str], None], env: dict[str, str] | None = None) -> int:
    """Run the merger, passing each line of its output (stdout and stderr) to `echo`; its exit code."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n").split("\r")[-1]  # a progress bar's last state
            if line.strip():
                echo(line)
        return proc.wait()


SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}


class NoSavedWeights(ValueError):
    """A step whose huggingface/ folder holds no weights (saved without hf_model)."""


def copy_saved_hf(actor_dir: Path, target: Path) -> str:
    """Copy the Hugging Face model verl's checkpoint manager saved beside a step's shards
    (`actor_dir/huggingface`, weights included when the run sets `actor.checkpoint.save_contents`
    with `hf_model`) into `target`, the weights as trained (no cast); config.json's `dtype` is set
    to the saved tensors' (verl builds that model in bfloat16 and fills it with the full-precision
    state). Returns that dtype; tensors of several dtypes leave config.json's as saved and return
    "mixed: A, B" (no one dtype to name). `NoSavedWeights` when the folder has no safetensors weights."""
    import shutil

    from safetensors import safe_open

    hf = Path(actor_dir) / "huggingface"
    files = sorted(hf.glob("*.safetensors"))
    if not files:
        raise NoSavedWeights(f"{hf}: no weights (*.safetensors): the step was saved without hf_model; set "
                             "actor_rollout_ref.actor.checkpoint.save_contents to [model, optimizer, extra, hf_model]")
    dtypes = set()
    for f in files:
        with safe_open(str(f), "pt") as st:
            dtypes |= {st.get_slice(k).get_dtype() for k in st.keys()}
    names = {SAFETENSORS_DTYPES.get(d, d.lower()) for d in dtypes}
    target.mkdir(parents=True, exist_ok=True)
    for f in hf.iterdir():
        if f.is_file():
            shutil.copy2(f, target / f.name)
    if len(names) != 1:
        return "mixed: " + ", ".join(sorted(names))
    dtype = names.pop()
    config = json.loads((target / "config.json").read_text())
    config["dtype"] = dtype
    config.pop("torch_dtype", None)
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dtype




@dataclass
class MergedReport:
    path: str
    problems: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_merged_model(target: Path, *, expect_config: Path | None = None, load: bool = True) -> MergedReport:
    """Check a merged Hugging Face model folder: config.json (matching `expect_config`, the
    checkpoint's huggingface/config.json, on the keys that define the model), weights, tokenizer
    files, a chat template; then the tokenizer loads and renders the template, and (with `load`)
    the weights load into `AutoModelForCausalLM` on CPU with no key missing, unexpected or of the
    wrong shape, every value finite."""
    target = Path(target)
    report = MergedReport(path=str(target))
    p = report.problems
    config: dict = {}
    try:
        config = json.loads((target / "config.json").read_text())
        if not isinstance(config, dict) or not config.get("architectures"):
            p.append(f"{target}/config.json: no architectures")
    except FileNotFoundError:
        p.append(f"{target}/config.json: missing")
    except (OSError, UnicodeError, ValueError) as e:
        p.append(f"{target}/config.json: unreadable: {e}")
    if expect_config is not None and config:
        try:
            want = json.loads(Path(expect_config).read_text())
            for key in CONFIG_KEYS_MATCHED:
                if want.get(key) != config.get(key):
                    p.append(f"{target}/config.json: {key} is {config.get(key)!r}, the checkpoint's is {want.get(key)!r}")
        except (OSError, UnicodeError, ValueError) as e:
            p.append(f"{expect_config}: unreadable: {e}")
    if not any((target / name).is_file() and (target / name).stat().st_size > 0 for name in WEIGHT_FILES):
        p.append(f"{target}: no weights ({', '.join(WEIGHT_FILES[:2])} or an index)")
    tok_files = [n for n in TOKENIZER_FILES if (target / n).is_file()]
    if not tok_files:
        p.append(f"{target}: no tokenizer ({', '.join(TOKENIZER_FILES)})")
    if not (target / "tokenizer_config.json").is_file():
        p.append(f"{target}/tokenizer_config.json: missing")
    if not has_chat_template(target):
        p.append(f"{target}: no chat template ({', '.join(CHAT_TEMPLATE_FILES)} or tokenizer_config.json "
                 "chat_template)")
    report.info["tokenizer_files"] = tok_files
    if p:
        return report
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(target), local_files_only=True)
        rendered = tok.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False,
                                           add_generation_prompt=True)
        if not rendered or "hello" not in rendered:
            p.append(f"{target}: the chat template renders {rendered!r} for a user 'hello'")
        report.info["vocab"] = len(tok)
    except Exception as e:  # any failure to load is the finding, named
        p.append(f"{target}: the tokenizer does not load or render its chat template: {type(e).__name__}: {e}")
    if not load or p:
        return report
    try:
        import torch
        from transformers import AutoModelForCausalLM

        model, info = AutoModelForCausalLM.from_pretrained(str(target), dtype="auto", local_files_only=True,
                                                           output_loading_info=True)
    except Exception as e:
        p.append(f"{target}: the weights do not load with AutoModelForCausalLM: {type(e).__name__}: {e}")
        return report
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        values = sorted(map(str, info.get(key) or ()))
        if values:
            p.append(f"{target}: {key.replace('_', ' ')} loading the weights: {', '.join(values[:5])}"
                     + (f" (+{len(values) - 5})" if len(values) > 5 else ""))
    with torch.no_grad():
        bad = [n for n, t in model.state_dict().items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad:
        p.append(f"{target}: non-finite values in {', '.join(bad[:5])}")
    report.info.update(parameters=sum(t.numel() for t in model.parameters()),
                       dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
                       architecture=type(model).__name__)
    return report
