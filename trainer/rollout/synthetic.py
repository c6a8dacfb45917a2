"""The synthetic policy: an instrument for probes, bands, sampling and eval statistics without a GPU.

`synthetic[:k=v,...]` plays each episode from the task's golden actions (`golden_paths()[0]`):
with the task's success probability p it follows them exactly; otherwise it deviates once, a
mistake drawn from the episode's seed: it drops one step, mutates one argument (type-preserving,
as `validate-golden --perturb` does) or stops after a prefix. Whether a deviation fails is for the
task's check to say (dropping a read-only step may still pass), so p is the probability of the
golden path, and the observed pass rate is at least p.

It writes every turn as model text in the configured family's markup (`tb_interpret.turn_text`:
reasoning, then one tool call), so its episodes go through tb_interpret, the sandbox and the
grader exactly as a model's do. Its reasoning starts with "synthetic:" and says what it does;
records of its episodes carry `synthetic: true`.

Options:
    p=FLOAT         the success probability of every task (default 0.7)
    dist=NAME       draw each task's p instead (seeded by seed and uid): uniform, bimodal (half
                    the tasks near 0 or 1, the rest in between, as real probes look), beta:A:B
    map=FILE        YAML {uid: p}; tasks it names use their p, the others p or dist
    seed=INT        the draw of task p's (default 0); each episode's choices follow its own seed
    ask=BOOL        when the task has a user context, ask the user first (default true)
    tokenizer=PATH  token-level: return the text's token ids (+ <|im_end|>) from this tokenizer
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

from trainer.core.tb_interpret import turn_text
from trainer.env.grading.chat_types import Text
from trainer.env.errors import TaskFormatError
from trainer.env.golden import mutations
from trainer.env.grading.judge import Judge
from trainer.env.taskformat.yamlio import load as load_yaml
from trainer.rollout.policy import (EpisodeInfo, Generation, Policy, PolicySession, SpecError, no_more, option,
                                    stable_seed, truthy)

DISTRIBUTIONS = ("uniform", "bimodal", "beta:A:B")
FINAL_TEXT = "I have taken care of your request. Is there anything else? <DONE>"
ASK_TEXT = "Before I go ahead, could you tell me who you are and what you need, please?"


def _draw(dist: str, rng: random.Random) -> float:
    if dist == "uniform":
        return rng.random()
    if dist == "bimodal":
        u = rng.random()
        if u < 0.25:
            return rng.betavariate(1, 12)
        if u < 0.5:
            return rng.betavariate(12, 1)
        return rng.betavariate(2, 2)
    if dist.startswith("beta:"):
        try:
            a, b = (float(x) for x in dist.split(":")[1:])
        except ValueError:
            a = b = 0.0
        if not (a > 0 and b > 0):
            raise ValueError(f"dist={dist!r}: expected beta:A:B with two numbers A, B > 0")
        return rng.betavariate(a, b)
    raise ValueError(f"unknown distribution {dist!r} ({', '.join(DISTRIBUTIONS)})")


class SyntheticPolicy(Policy):
    kind = "synthetic"
    synthetic = True

    def __init__(self, *, p: float = 0.7, dist: str | None = None, probabilities: dict[str, float] | None = None,
                 seed: int = 0, ask: bool = True, tokenizer: Any = None, tokenizer_path: str | None = None, **kw: Any):
        super().__init__(**kw)
        if not 0.0 <= p <= 1.0:
            raise SpecError(f"synthetic: p={p} is not a probability")
        if dist is not None:
            _draw(dist, random.Random(0))  # a bad name fails here, not in the first episode
        self.p, self.dist, self.seed, self.ask = p, dist, seed, ask
        self.probabilities = dict(probabilities or {})
        self.tokenizer = tokenizer
        self._tokenizer_path = tokenizer_path

    @classmethod
    def from_options(cls, opts: dict[str, str], spec: str, **kw: Any) -> SyntheticPolicy:
        p = option(opts, "p", float, 0.7, spec)
        dist = opts.pop("dist", None)
        path = opts.pop("map", None)
        probs = _read_map(Path(path)) if path else None
        seed = option(opts, "seed", int, 0, spec)
        ask = option(opts, "ask", truthy, True, spec)
        tok_path = opts.pop("tokenizer", None)
        no_more(opts, spec, ["p", "dist", "map", "seed", "ask", "tokenizer"])
        tok = None
        if tok_path:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(tok_path)
        try:
            return cls(p=p, dist=dist, probabilities=probs, seed=seed, ask=ask, tokenizer=tok,
                       tokenizer_path=tok_path, **kw)
        except ValueError as e:
            raise SpecError(f"{spec!r}: {e}") from None

    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {**super().identity(), "seed": self.seed}
        out.update({"dist": self.dist} if self.dist else {"p": self.p})
        if self.probabilities:
            out["map_tasks"] = len(self.probabilities)
        if self._tokenizer_path:
            out["tokenizer"] = self._tokenizer_path
        return out

    def success_probability(self, uid: str) -> float:
        if uid in self.probabilities:
            return self.probabilities[uid]
        if self.dist is None:
            return self.p
        return _draw(self.dist, random.Random(stable_seed("synthetic-p", self.seed, uid)))

    def session(self, info: EpisodeInfo) -> PolicySession:
        return _Session(self, info)


def _read_map(path: Path) -> dict[str, float]:
    try:
        data, _ = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError(f"synthetic map={path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"synthetic map={path}: not YAML: {e}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of task uid to success probability")
    out = {}
    for uid, p in data.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise SpecError(f"{path}: {uid}: {p!r} is not a probability in [0, 1]")
        out[str(uid)] = float(p)
    return out


class _Session(PolicySession):
    def __init__(self, policy: SyntheticPolicy, info: EpisodeInfo):
        self.policy = policy
        rng = random.Random(info.seed)
        try:
            actions = list(info.task.golden_paths()[0]) if info.task.golden_paths() else []
        except TaskFormatError:
            actions = []
        p = policy.success_probability(info.task.uid)
        self.plan, self.note = _plan(actions, rng.random() < p, rng)
        self.note = f"p={p:.3f}, {self.note}"
        self.asking = policy.ask and bool((info.task.user_context or "").strip())
        self.step = 0

    def _next_message(self) -> dict[str, Any]:
        if self.asking:
            self.asking = False
            return {"role": "assistant", "reasoning_content": f"synthetic: {self.note}; asking the user first.",
                    "content": ASK_TEXT}
        if self.step < len(self.plan):
            tool, args = self.plan[self.step]
            self.step += 1
            return {"role": "assistant", "content": "",
                    "reasoning_content": f"synthetic: step {self.step}/{len(self.plan)}, {tool}.",
                    "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": args}}]}
        return {"role": "assistant", "reasoning_content": f"synthetic: finished ({self.note}).", "content": FINAL_TEXT}

    def _text(self) -> str:
        p = self.policy
        return turn_text(self._next_message(), family=p.family, enable_thinking=p.thinking)

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, max_tokens: int) -> Generation:
        if self.policy.tokenizer is not None:
            raise NotImplementedError("this synthetic policy is token-level (tokenizer=...): use generate()")
        text = self._text()
        return Generation(text=text, output_tokens=max(1, len(text) // 4))

    async def generate(self, prompt_ids: list[int], *, max_tokens: int) -> Generation:
        tok = self.policy.tokenizer
        if tok is None:
            raise NotImplementedError("this synthetic policy is chat-level (no tokenizer=): use chat()")
        ids = tok.encode(self._text(), add_special_tokens=False)[:max_tokens]
        if len(ids) < max_tokens:
            ids.append(tok.convert_tokens_to_ids("<|im_end|>"))
        return Generation(ids=ids, logprobs=[0.0] * len(ids), input_tokens=len(prompt_ids), output_tokens=len(ids))


def _plan(actions: list[tuple[str, str, dict[str, Any]]], success: bool,
          rng: random.Random) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The calls to make, and a note of how they depart from the golden path."""
    calls = [(tool, dict(params)) for _, tool, params in actions]
    if success:
        return calls, "following the golden path"
    if not calls:
        return calls, "deviating: nothing to deviate from (no golden actions)"
    kinds = ["drop", "stop"]
    mutable = [(i, k, m) for i, (_, a) in enumerate(calls) for k, v in a.items() for m in mutations(v)]
    if mutable:
        kinds.append("mutate")
    kind = rng.choice(kinds)
    if kind == "drop":
        i = rng.randrange(len(calls))
        return calls[:i] + calls[i + 1:], f"deviating: dropped step {i + 1} ({calls[i][0]})"
    if kind == "stop":
        n = rng.randrange(len(calls))
        return calls[:n], f"deviating: stopped after {n} of {len(calls)} steps"
    i, k, new = rng.choice(mutable)
    calls[i] = (calls[i][0], {**calls[i][1], k: new})
    return calls, f"deviating: step {i + 1} ({calls[i][0]}) with {k}={new!r}"


class SyntheticJudge(Judge):
    """The judge of synthetic runs: answers every yes/no question Yes (its records say
    `judge: {"kind": "synthetic"}`), so the database part of each check decides."""

    def _reply(self, system: str, user: str) -> str:
        return "Yes"

    def _motivated(self, text: str, question: str) -> dict[str, Any]:
        return {"answer": True, "motivation": "synthetic judge"}

    def _get_text_completion(self, messages: list[Any]) -> Text:
        return Text(role="assistant", content="Yes")


__all__ = ["DISTRIBUTIONS", "SyntheticJudge", "SyntheticPolicy"]
