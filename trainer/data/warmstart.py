"""The golden warm start: supervised fine-tuning on the tasks' golden trajectories, token for token
as training renders them (`tbt warm-start`, docs/training-laptop.md "The golden warm start").

A random tiny model fails every task, so every GRPO group has zero variance and nothing trains.
The warm start gives it a policy that solves some tasks some of the time:

1. **Trajectories**: each task is played once by the synthetic policy's golden mode
   (`synthetic:p=1.0,tokenizer=BASE`) through the one run assembly (`runner.run(spec, plan)`, as
   `tbt run`: real sandbox, real tool results, real grader). Its record's `tokens` are the episode
   as the token path renders it (trainer/core/tb_render.py `TokenTrajectory`: the prompt with the
   system messages merged and the tools block, each generated turn kept as generated with mask 1,
   each tool / user turn the chat template's delta with mask 0) — the same ids training's agent
   loop hands verl. Nothing is re-rendered here.
2. **Examples** (`examples_from_records`): input ids = prompt ids + response ids; labels = the ids
   where the response mask is 1 (the assistant's tokens, each turn through its `<|im_end|>`),
   -100 elsewhere (prompt, tool results, user turns, generation prompts). `keep_turns` keeps the
   first fraction of each trajectory's assistant turns (the rest is cut off), `keep_tasks` a seeded
   fraction of the tasks: the knobs, with `epochs`, for a pool of mixed difficulty rather than a
   model that solves everything.
3. **Fine-tuning** (`fine_tune`): transformers' `Trainer` on CPU (AdamW, linear schedule, seeded),
   with one change to its loss (`MaskedLMTrainer.compute_loss`): the LM head is applied only at the
   positions that predict a labelled token (a token-mean cross-entropy equal to the model's own
   shifted loss with those labels; it spares the 151k-wide logits of every prompt token). The
   result is an HF checkpoint (`hf:DIR` loads it, so do verl's actor and the CPU rollout engine)
   with the tokenizer and `warm_start.json` (options, tasks, tokens, losses, seconds).

Why not verl's SFT trainer (`verl.trainer.sft_trainer`): its dataset (`MultiTurnSFTDataset`) renders
the messages again with the tokenizer's chat template, one message at a time, so what it trains on
is not the ids the token path produced (tool results, the tools block and the system merge as
tb_render has them), and it runs under torchrun with verl's FSDP engine; transformers' `Trainer`
takes our ids as they are, in one CPU process.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from trainer.rollout.policy import stable_seed
from trainer.formats.record import EpisodeRecord, TokenTrace

IGNORE = -100  # the label torch's cross-entropy (and transformers') leaves out
MANIFEST = "warm_start.json"


def golden_policy(tokenizer_path: str | Path) -> str:
    """The policy spec that plays the golden actions, token level, with this tokenizer."""
    return f"synthetic:p=1.0,tokenizer={tokenizer_path}"


@dataclass
class Example:
    uid: str
    input_ids: list[int]
    labels: list[int]  # IGNORE where the token is not the model's
    turns: int  # assistant turns kept
    total_turns: int  # assistant turns in the trajectory

    @property
    def trained_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


def assistant_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of 1s in a response mask: one per generated (assistant) turn."""
    spans, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(mask)))
    return spans


class WarmStartError(ValueError):
    """Input the warm start cannot use (a record without tokens, an option out of range)."""


def example_from_record(rec: EpisodeRecord, keep_turns: float = 1.0) -> Example:
    """The training example of one token-level record; `keep_turns` (0, 1]: the first
    ceil(keep_turns x turns) assistant turns are kept, everything after the last kept one is cut."""
    if not 0 < keep_turns <= 1:
        raise WarmStartError(f"keep_turns={keep_turns}: expected a fraction in (0, 1]")
    t = rec.tokens
    if not isinstance(t, TokenTrace):
        raise WarmStartError(f"{rec.uid}: the record has no token trajectory (tokens.prompt_ids/response_ids/"
                             "response_mask): play it with a token-level policy (tokenizer=PATH)")
    prompt, response, mask = list(t.prompt_ids), list(t.response_ids), list(t.response_mask)
    if len(response) != len(mask):
        raise WarmStartError(f"{rec.uid}: tokens.response_ids ({len(response)}) and tokens.response_mask "
                             f"({len(mask)}) differ in length")
    spans = assistant_spans(mask)
    if not spans:
        raise WarmStartError(f"{rec.uid}: the trajectory has no assistant tokens")
    kept = max(1, math.ceil(keep_turns * len(spans) - 1e-9))
    end = spans[kept - 1][1]
    labels = [IGNORE] * len(prompt) + [i if m else IGNORE for i, m in zip(response[:end], mask[:end])]
    return Example(rec.uid, prompt + response[:end], labels, kept, len(spans))


@dataclass
class Selection:
    examples: list[Example]
    failed: list[str]  # golden episodes that did not pass (not trained on)
    left_out: list[str]  # tasks keep_tasks left out


def examples_from_records(records: Iterable[EpisodeRecord], *, keep_turns: float = 1.0, keep_tasks: float = 1.0,
                          seed: int = 0) -> Selection:
    """One example per passed record (first repetition of each uid), in uid order; `keep_tasks`
    (0, 1]: a seeded choice of round(keep_tasks x tasks) of them (at least one)."""
    if not 0 < keep_tasks <= 1:
        raise WarmStartError(f"keep_tasks={keep_tasks}: expected a fraction in (0, 1]")
    by_uid: dict[str, EpisodeRecord] = {}
    for r in records:
        if r.uid not in by_uid or r.repetition < by_uid[r.uid].repetition:
            by_uid[r.uid] = r
    failed = sorted(u for u, r in by_uid.items() if not r.passed)
    good = sorted(u for u, r in by_uid.items() if r.passed)
    n = max(1, round(keep_tasks * len(good))) if good else 0
    chosen = set(random.Random(stable_seed("warm-start-tasks", seed)).sample(good, n))
    return Selection([example_from_record(by_uid[u], keep_turns) for u in good if u in chosen], failed,
                     [u for u in good if u not in chosen])


@dataclass
class TrainOptions:
    epochs: float = 30.0
    learning_rate: float = 3e-3
    batch_size: int = 1  # sequences per optimizer step (padded to the longest)
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    seed: int = 0
    threads: int | None = 2  # torch intra-op threads (process-wide); None: torch's default
    logging_steps: int = 10
    progress: bool = False

    def check(self) -> None:
        if not self.epochs > 0:
            raise WarmStartError(f"epochs={self.epochs}: expected a positive number")
        if not self.learning_rate > 0:
            raise WarmStartError(f"learning_rate={self.learning_rate}: expected a positive number")
        if self.batch_size < 1:
            raise WarmStartError(f"batch_size={self.batch_size}: expected 1 or more")
        if self.threads is not None and self.threads < 1:
            raise WarmStartError(f"threads={self.threads}: expected 1 or more")


class _Examples:
    """A map-style dataset over the examples (what `Trainer`'s DataLoader reads)."""

    def __init__(self, examples: Sequence[Example]):
        self.examples = list(examples)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": self.examples[i].input_ids, "labels": self.examples[i].labels}


def collate(pad_id: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    """Right-pad a batch: pad ids, attention mask 0 and labels IGNORE on the padding."""
    import torch

    def collate_batch(batch: list[dict[str, list[int]]]) -> dict[str, Any]:
        n = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), n), pad_id, dtype=torch.long)
        labels = torch.full((len(batch), n), IGNORE, dtype=torch.long)
        attn = torch.zeros((len(batch), n), dtype=torch.long)
        for row, b in enumerate(batch):
            k = len(b["input_ids"])
            ids[row, :k] = torch.tensor(b["input_ids"])
            labels[row, :k] = torch.tensor(b["labels"])
            attn[row, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": attn}

    return collate_batch


def masked_lm_loss(model: Any, input_ids: Any, labels: Any, attention_mask: Any) -> Any:
    """Token-mean next-token cross-entropy over the labelled tokens: the causal LM's own loss
    (`model(input_ids, labels=labels).loss`), with the LM head applied only at the positions that
    predict a labelled token."""
    import torch.nn.functional as F

    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != IGNORE
    logits = model.get_output_embeddings()(hidden[:, :-1][keep])
    return F.cross_entropy(logits.float(), targets[keep])


def golden_probability(model: Any, examples: Sequence[Example], *, temperature: float = 1.0, top_k: int | None = None,
                       top_p: float = 1.0) -> dict[str, float]:
    """Per example: the probability that sampling as the policy samples (temperature, then top-k,
    then top-p: transformers' own warpers, in `generate`'s order) reproduces its labelled tokens,
    teacher-forced on the rest of its trajectory. Tool results and the scripted user's replies
    follow from the calls, so for a full golden trajectory this is a lower bound of the task's pass
    rate (other paths may pass too); 0 where a golden token falls outside the nucleus."""
    import torch
    from transformers.generation import TopKLogitsWarper, TopPLogitsWarper

    out = {}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for ex in examples:
            ids = torch.tensor([ex.input_ids])
            labels = torch.tensor([ex.labels])
            hidden = model.get_decoder()(input_ids=ids).last_hidden_state
            targets = labels[:, 1:]
            keep = targets != IGNORE
            scores = model.get_output_embeddings()(hidden[:, :-1][keep]).float()
            if temperature > 0:
                scores = scores / temperature
                if top_k:
                    scores = TopKLogitsWarper(top_k)(None, scores)
                if top_p < 1:
                    scores = TopPLogitsWarper(top_p)(None, scores)
                logp = torch.log_softmax(scores, dim=-1).gather(1, targets[keep][:, None]).sum().item()
                out[ex.uid] = math.exp(logp)
            else:  # greedy: the golden tokens are reproduced or not
                out[ex.uid] = float(bool((scores.argmax(-1) == targets[keep]).all()))
    model.train(was_training)
    return out


def checkpoint_golden_probability(checkpoint: str | Path, records: Iterable[EpisodeRecord], **sampling: Any) -> dict[str, float]:
    """`golden_probability` of the model at `checkpoint` on every passed golden trajectory of
    `records`, whole (the turns and tasks left out of training too); `sampling`: temperature,
    top_k, top_p."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32, local_files_only=True)
    return golden_probability(model, examples_from_records(records).examples, **sampling)


def _trainer_class() -> type:
    from transformers import Trainer

    class MaskedLMTrainer(Trainer):
        """transformers' Trainer with `masked_lm_loss` as its loss."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ARG002
            loss = masked_lm_loss(model, inputs["input_ids"], inputs["labels"], inputs["attention_mask"])
            return (loss, None) if return_outputs else loss

    return MaskedLMTrainer


@dataclass
class TrainResult:
    steps: int
    seconds: float
    losses: list[dict[str, float]] = field(default_factory=list)  # {step, epoch, loss} every logging_steps
    first_loss: float | None = None
    last_loss: float | None = None


def fine_tune(base: str | Path, examples: Sequence[Example], out: str | Path, options: TrainOptions) -> TrainResult:
    """Fine-tune the causal LM at `base` on `examples` and save it (and its tokenizer) to `out`."""
    options.check()
    if not examples:
        raise WarmStartError("no examples to train on")
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, TrainingArguments

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32, local_files_only=True)
    losses: list[dict[str, float]] = []

    class Losses(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):  # noqa: ARG002
            if logs and "loss" in logs:
                losses.append({"step": state.global_step, "epoch": round(state.epoch or 0.0, 3),
                               "loss": float(logs["loss"])})

    out = Path(out)
    t0 = time.perf_counter()
    steps = math.ceil(math.ceil(len(examples) / options.batch_size) * options.epochs)
    warmup = round(options.warmup_ratio * steps)
    with tempfile.TemporaryDirectory(prefix="tbt-warm-start-") as scratch:
        args = TrainingArguments(
            output_dir=scratch, num_train_epochs=options.epochs, learning_rate=options.learning_rate,
            per_device_train_batch_size=options.batch_size, warmup_steps=warmup,
            weight_decay=options.weight_decay, lr_scheduler_type="linear", seed=options.seed,
            data_seed=options.seed, use_cpu=True, save_strategy="no", report_to="none",
            logging_steps=options.logging_steps, logging_first_step=True, disable_tqdm=not options.progress,
            dataloader_num_workers=0, dataloader_pin_memory=False, remove_unused_columns=False)
        trainer = _trainer_class()(model=model, args=args, train_dataset=_Examples(examples),
                                   data_collator=collate(tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                                                         else tokenizer.eos_token_id),
                                   callbacks=[Losses()])
        state = trainer.train()
        trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    return TrainResult(steps=state.global_step, seconds=time.perf_counter() - t0, losses=losses,
                       first_loss=losses[0]["loss"] if losses else None,
                       last_loss=losses[-1]["loss"] if losses else None)


def write_manifest(out: str | Path, *, base: str, dataset: str, test_list: str | None, options: TrainOptions,
                   keep_turns: float, keep_tasks: float, selection: Selection, result: TrainResult,
                   golden_seconds: float, golden_p: dict[str, float] | None = None) -> dict[str, Any]:
    """`out/warm_start.json`: what the checkpoint was trained from and how."""
    manifest = {
        "base": base, "dataset": dataset, "test_list": test_list,
        "options": {**asdict(options), "keep_turns": keep_turns, "keep_tasks": keep_tasks},
        "tasks": [{"uid": e.uid, "turns": e.turns, "total_turns": e.total_turns, "tokens": len(e.input_ids),
                   "trained_tokens": e.trained_tokens} for e in selection.examples],
        "golden_failed": selection.failed, "left_out": selection.left_out, "golden_p": golden_p or {},
        "steps": result.steps, "first_loss": result.first_loss, "last_loss": result.last_loss, "losses": result.losses,
        "seconds": {"golden": round(golden_seconds, 2), "train": round(result.seconds, 2)},
    }
    Path(out, MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


__all__ = ["IGNORE", "MANIFEST", "Example", "Selection", "TrainOptions", "TrainResult", "WarmStartError",
           "assistant_spans", "checkpoint_golden_probability", "collate", "example_from_record", "examples_from_records", "fine_tune", "golden_policy", "golden_probability",
           "masked_lm_loss", "write_manifest"]
