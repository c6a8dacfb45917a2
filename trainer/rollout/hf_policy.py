"""The `hf:` policy: a local transformers causal LM on CPU, token level.

`hf:PATH[,k=v,...]` loads `AutoModelForCausalLM` and `AutoTokenizer` from the directory PATH
(local files only, eval mode) and plays the agent through the token path of the episode
(trainer/rollout/episode.py): prompt ids in, generated ids and their logprobs out. It is the policy
for small checkpoints and for testing the token path end to end without a server or a GPU.

Options:
    temperature=FLOAT   sampling temperature; 0 means greedy
    top_p=FLOAT         nucleus sampling
    top_k=INT           top-k sampling (0: off)
    max_tokens=INT      per-turn generation limit
                        (defaults of these four: the run's sampling config, configs/sampling.yaml;
                        1.0 / 1.0 / off / 4096 when the policy is built without one)
    dtype=NAME          float32 (default), bfloat16 or float16
    threads=INT         torch intra-op threads (process-wide: `torch.set_num_threads`)
    slots=INT           turns generated at once on the one model, each in its own thread
                        (default 1); on 2 cores `threads=2,slots=2` plays the episodes as fast
                        as two single-thread processes, without starting them

The sampling distribution is exactly the spec's: the model's own generation_config.json (Qwen's
says top_k=20, temperature 0.6, ...) is replaced by a blank one at load time, and top_k is off unless the sampling sets it.

Generation stops on any of `tb_render.STOP_TOKENS` (``<|im_end|>``, ``<|endoftext|>``); the stop
token is kept in the returned ids, so `tb_interpret.parse_ids` reads how the turn finished.

Sampling is trainer/rollout/hf_sample.py's (vLLM's order: temperature, top-k, top-p; top-k first
spares a sort of the whole vocabulary at every token). Reproducibility: each turn draws from its own
`torch.Generator` seeded from (episode seed, call index), so an episode with the same seed yields the
same ids, whatever else runs in the process or beside it. The model is run by `slots` threads at a
time (a semaphore per policy object): further concurrent episodes queue. Each episode keeps its KV
cache between its turns (hf_sample's `Prefix`, dropped with the episode's session): a turn prefills
only what its prompt adds to the history, as vLLM's prefix cache does.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from trainer.core.tb_render import STOP_TOKENS
from trainer.rollout.policy import (SAMPLING_OPTIONS, EpisodeInfo, Generation, Policy, PolicySession, SpecError,
                                    no_more, option, sampling_from, stable_seed)

DTYPES = ("float32", "bfloat16", "float16")


class HFPolicy(Policy):
    kind = "hf"

    def __init__(self, model: Any, tokenizer: Any, *, path: str, dtype: str = "float32", slots: int = 1, **kw: Any):
        super().__init__(**kw)
        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.dtype = dtype
        self.max_context = getattr(model.config, "max_position_embeddings", None)
        self.stop_ids = [tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS]
        self.slots = slots
        self.free = threading.BoundedSemaphore(slots)  # `slots` generate() calls at a time on this model

    @classmethod
    def from_options(cls, body: str, opts: dict[str, str], spec: str, **kw: Any) -> HFPolicy:
        sampling = sampling_from(opts, spec, kw.pop("sampling", None))
        dtype = option(opts, "dtype", str, "float32", spec)
        threads = option(opts, "threads", int, None, spec)
        slots = option(opts, "slots", int, 1, spec)
        no_more(opts, spec, [*SAMPLING_OPTIONS, "dtype", "threads", "slots"])
        if dtype not in DTYPES:
            raise SpecError(f"{spec!r}: option dtype={dtype!r}: expected one of {', '.join(DTYPES)}")
        if threads is not None and threads < 1:
            raise SpecError(f"{spec!r}: option threads={threads}: expected a positive integer")
        if slots < 1:
            raise SpecError(f"{spec!r}: option slots={slots}: expected a positive integer")
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise SpecError(f"{spec!r}: expected temperature >= 0 and 0 < top_p <= 1")
        if not Path(body).is_dir():
            raise SpecError(f"{spec!r}: no model directory {body!r}")
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        model, tokenizer = _load(body, getattr(torch, dtype), spec)
        return cls(model, tokenizer, path=body, dtype=dtype, slots=slots, sampling=sampling, **kw)

    def identity(self) -> dict[str, Any]:
        s = self.sampling
        return {**super().identity(), "model": self.path, "dtype": self.dtype, "temperature": s.temperature,
                "top_p": s.top_p, "top_k": s.top_k, "max_tokens": s.max_tokens}

    def session(self, info: EpisodeInfo) -> PolicySession:
        return _Session(self, info.seed)

    def sample(self, prompt_ids: list[int], max_tokens: int, seed: int, prefix: Any = None) -> Generation:
        """One turn, synchronously (the session runs it in a worker thread): trainer/rollout/hf_sample.py
        (vLLM's order: temperature, top-k, top-p), drawn from a generator seeded with `seed`; with
        `prefix` (an hf_sample `Prefix`, the episode's) only what the prompt adds to it is prefilled.

        `logprobs` are those of the distribution the token was drawn from: top_k and top_p applied
        and renormalized (transformers' `output_scores`; the raw logits when greedy). With
        temperature 1, top_p 1 and top_k off they are the model's own logprobs (what vLLM reports by
        default); otherwise they differ from them.
        """
        import torch

        from trainer.rollout.hf_sample import sample

        s = self.sampling
        with self.free:
            turn = sample(self.model, prompt_ids, max_tokens, temperature=s.temperature, top_k=s.top_k or 0,
                          top_p=s.top_p, stop_ids=self.stop_ids, generator=torch.Generator().manual_seed(seed),
                          prefix=prefix)
        return Generation(ids=turn.ids, logprobs=turn.logprobs, input_tokens=len(prompt_ids), output_tokens=len(turn.ids))


def _load(path: str, dtype: Any, spec: str) -> tuple[Any, Any]:
    """Model (eval mode, CPU, a blank generation config) and tokenizer from `path`; any failure
    is a `SpecError` naming it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    except Exception as e:  # OSError, ValueError, KeyError...: whatever a bad directory raises
        raise SpecError(f"{spec!r}: cannot load a causal LM from {path!r}: {type(e).__name__}: {e}") from None
    unknown = [t for t in STOP_TOKENS if tokenizer.convert_tokens_to_ids(t) in (None, tokenizer.unk_token_id)]
    if unknown:
        raise SpecError(f"{spec!r}: the tokenizer in {path!r} has no {', '.join(unknown)} (not a Qwen chat tokenizer)")
    model.generation_config = GenerationConfig()
    return model.to("cpu").eval(), tokenizer


class _Session(PolicySession):
    def __init__(self, policy: HFPolicy, seed: int):
        from trainer.rollout.hf_sample import Prefix

        self.policy, self.seed = policy, seed
        self.calls = 0
        self.prefix = Prefix()  # this episode's KV cache between its turns

    async def generate(self, prompt_ids: list[int], *, max_tokens: int) -> Generation:
        seed = stable_seed("hf", self.seed, self.calls)
        self.calls += 1
        return await asyncio.to_thread(self.policy.sample, list(prompt_ids), max_tokens, seed, self.prefix)


__all__ = ["DTYPES", "HFPolicy"]
