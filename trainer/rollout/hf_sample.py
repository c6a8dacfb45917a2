"""Token sampling for a local transformers causal LM on CPU, with a KV cache: the `hf:` policy's
turns (trainer/rollout/hf_policy.py) and the CPU rollout engine's (trainer/verl/cpu/rollout.py).

`sample(model, prompt_ids, max_tokens, ...)` draws one turn the way vLLM's sampler does:
logits / temperature, then top-k, then top-p over the top-k renormalized distribution (a token
is dropped when the probability mass of the tokens less likely than it, itself included, is at
most 1 - top_p; the most likely token is always kept), a categorical draw from what is left, as vLLM draws it: an
exponential race over the vocabulary (vLLM's `random_sample`: argmax of p / E with one exponential
E per token id; here the same race in its Gumbel-max form, argmax of log p + G). The noise belongs to
the token id, not to its rank, so two models sampled with the same seed draw the same token
wherever their distributions differ little: a paired evaluation (base and trained played with the
same seeds) then compares like with like. A draw by rank (the k-th most likely token for the k-th
slice of [0, 1)) turns the swap of two nearly tied tokens into a different token for every seed: a
task whose first step is a 50/50 choice read 8 of 8 for one model and 0 of 8 for the other.
temperature 0 is greedy (argmax of the raw logits).

Why not `model.generate`: with a 151k-token vocabulary its top-p warper sorts the whole
vocabulary and draws from it at every token (14 ms + 4 ms of the ~20 ms a token of a tiny model
costs on a laptop's core). Here top-k comes first, so top-p sorts and the draw reads k values;
without top-k the whole vocabulary is sorted, as there (unless top-p is 1 too: then nothing is cut
and the draw reads the softmax directly, no sort). The prompt's prefill computes the logits
of its last position only (`logits_to_keep=1`).

An episode's turns share their history: with a `Prefix` (one per episode, kept by its caller
between turns) a turn prefills only what its prompt adds to the ids the prefix's KV cache holds
(the longest common prefix; the last prompt token is always run, its logits are the first
draw's), and leaves the cache holding its prompt and what it generated. Its keys and values were
computed one turn's prefill and one token's decode at a time instead of in one prefill of the
whole context: equal up to float rounding (~1e-6), so a draw differs only where two tokens tie
that closely; an episode that keeps its own prefix computes them the same way every run.

Each drawn token comes with two log-probs: `logprobs`, under the distribution it was drawn from
(top-k and top-p renormalized: transformers' `output_scores`), and `raw_logprobs`, under
log_softmax(logits / temperature) (vLLM's default `logprobs`); greedy gives log_softmax(logits)
for both. The draw reads only `generator` (one 62-bit key a token; the token ids' noise is
splitmix64 of key and id), so a seeded generator gives the same ids every time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class Turn:
    ids: list[int]
    logprobs: list[float]
    raw_logprobs: list[float]
    stopped: bool  # ended on a stop id (kept as the last id); False: max_tokens reached
    reused: int = 0  # prompt tokens whose keys and values came from the prefix (not prefilled)


@dataclass
class Prefix:
    """One episode's KV cache between its turns: `past` holds the keys and values of `ids`."""
    ids: list[int] = field(default_factory=list)
    past: Any = None

    def take(self, prompt: Sequence[int]) -> tuple[Any, int]:
        """(the cache cut to the longest common prefix of `ids` and `prompt`, its length), leaving at
        least the prompt's last token to run; (None, 0) when nothing is shared or the cache cannot be
        cut (a cache type without `crop`, or one holding recurrent states where the prompt departs
        from `ids`). The prefix is empty afterwards until `put`.

        A linear-attention layer (Qwen3.5's Gated DeltaNet) keeps one state for the whole sequence,
        not one entry per token: transformers' `crop` leaves it as it is, so a cut cache would carry
        the departed tokens in those layers. Such a cache is reused only when `prompt` extends all
        of `ids` (an episode's next turn), where nothing is cut."""
        past, ids, self.past, self.ids = self.past, self.ids, None, []
        n = 0
        for a, b in zip(ids, prompt[:-1]):
            if a != b:
                break
            n += 1
        if past is None or n == 0 or not hasattr(past, "crop"):
            return None, 0
        if n < len(ids):
            if _recurrent(past):
                return None, 0
            past.crop(n)
        return (past, n) if past.get_seq_length() == n else (None, 0)

    def put(self, ids: list[int], past: Any) -> None:
        self.ids, self.past = ids, past


def _recurrent(past: Any) -> bool:
    """Whether a cache holds a layer whose state cannot be cut back to a shorter prefix."""
    from transformers.cache_utils import LinearAttentionCacheLayerMixin

    return any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in getattr(past, "layers", ()))


def keep(scaled: Any, top_k: int, top_p: float) -> tuple[Any, Any]:
    """(ids, logits) of the tokens that survive top-k then top-p, most likely first."""
    import torch

    if 0 < top_k < scaled.numel():
        kth = torch.topk(scaled, top_k).values[-1]
        ids = torch.nonzero(scaled >= kth).squeeze(1)  # ties at the k-th value are kept (vLLM, transformers)
        values, order = torch.sort(scaled[ids], descending=True)
        ids = ids[order]
    else:
        values, ids = torch.sort(scaled, descending=True)
    if top_p < 1.0:
        probs = torch.softmax(values, -1)
        below = torch.flip(torch.cumsum(torch.flip(probs, (0,)), 0), (0,))  # mass of this token and all less likely
        n = max(1, int((below > 1.0 - top_p).sum()))
        ids, values = ids[:n], values[:n]
    return ids, values


def race(ids: Any, values: Any, generator: Any = None) -> int:
    """Index into `ids` of the token drawn from softmax(`values`): Gumbel-max with noise keyed by
    token id (`module docstring`), one key drawn from `generator` (torch's global one when None)."""
    import numpy as np
    import torch

    key = np.uint64(int(torch.randint(0, 2**62, (1,), generator=generator)))
    with np.errstate(over="ignore"):
        x = ids.numpy().astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + key
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = ((x >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # in (0, 1)
    gumbel = torch.from_numpy(-np.log(-np.log(u)))
    return int(torch.argmax(values.double() + gumbel))


def sample(model: Any, prompt_ids: Sequence[int], max_tokens: int, *, temperature: float = 1.0, top_k: int = 0,
           top_p: float = 1.0, stop_ids: Sequence[int] = (), generator: Any = None, prefix: Prefix | None = None) -> Turn:
    import torch

    stops = set(int(s) for s in stop_ids)
    prompt = list(prompt_ids)
    past, start = prefix.take(prompt) if prefix is not None else (None, 0)
    turn = Turn([], [], [], False, start)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt[start:]]), past_key_values=past, use_cache=True, logits_to_keep=1)
        for i in range(max_tokens):
            logits = out.logits[0, -1].float()
            if temperature <= 0:
                tok = int(torch.argmax(logits))
                lp = float(torch.log_softmax(logits, -1)[tok])
                turn.logprobs.append(lp)
                turn.raw_logprobs.append(lp)
            elif top_k <= 0 and top_p >= 1.0:  # the whole distribution: nothing to cut, no sort
                lps = torch.log_softmax(logits / temperature, -1)
                tok = race(torch.arange(lps.numel()), lps, generator)
                turn.logprobs.append(float(lps[tok]))
                turn.raw_logprobs.append(float(lps[tok]))
            else:
                scaled = logits / temperature
                ids, values = keep(scaled, top_k, top_p)
                j = race(ids, values, generator)
                tok = int(ids[j])
                turn.logprobs.append(float(torch.log_softmax(values, -1)[j]))
                turn.raw_logprobs.append(float(torch.log_softmax(scaled, -1)[tok]))
            turn.ids.append(tok)
            if tok in stops:
                turn.stopped = True
                break
            if i + 1 < max_tokens:  # the last id of a capped turn is never run
                out = model(input_ids=torch.tensor([[tok]]), past_key_values=out.past_key_values, use_cache=True)
    if prefix is not None:  # the cache holds the prompt and every drawn id but the last
        past = out.past_key_values
        prefix.put((prompt + turn.ids)[:past.get_seq_length()], past)
    return turn


__all__ = ["Prefix", "Turn", "keep", "race", "sample"]
