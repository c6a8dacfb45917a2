"""The episode as a verl agent loop: `ThinkingBoxAgentLoop` (registered by configs/agent_loop.yaml).

For each sample verl hands it (a row of the prepared parquet: `extra_info.uid` and
`extra_info.dataset` name the task), `run()` plays **the project's one episode implementation**
(`trainer.rollout.episode.run_episode`: fresh sandbox, MCP tools, simulated user, verdict) with a
token-level policy that generates through verl's server manager (`server_manager.generate(
request_id, prompt_ids=, sampling_params=)` -> `TokenOutput(token_ids, log_probs, stop_reason)`),
and returns what verl trains on:

    prompt_ids          the prompt as tb_interpret renders it (system messages merged, tools block)
    response_ids        every generated id as generated, tool and user turns as template deltas,
    response_mask       1 on the model's ids, 0 on ours; cut to `rollout.response_length`
    response_logprobs   the server's logprob per generated id, 0.0 on ours
    reward_score        the verdict's reward (the task's checks on the terminal database state)
    extra_fields        `reward_extra_info` {score, passed, end_reason, system_error_reruns, ...}
                        (DAPO filtering reads `score`: set algorithm.filter_groups.metric=score),
                        and `tb_record`: the episode record, for logging
    num_turns, metrics  chat turns; model / tool / grading seconds

A member whose episode ends in a **system error** (a backend timeout, a crashed server, an
endpoint fault) is re-run here with a fresh sandbox, same task, same weights, up to
`thinkingbox.member_retries` times, so its group keeps its good members. When the retries are
exhausted `run()` raises `MemberSystemError`: verl marks the group failed, and with the project's
patch (trainer/verl/patches/) the whole group is dropped and refilled rather than trained on
with a member missing. Nothing with a system error is ever scored.
"""

from __future__ import annotations

import logging
import random
import uuid
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from trainer.rollout.episode import run_episode
from trainer.rollout.policy import Generation, SamplingParams, TokenClientPolicy
from trainer.rollout.record import EpisodeRecord
from trainer.verl.env import TBConfig, worker_env

log = logging.getLogger(__name__)


class MemberSystemError(RuntimeError):
    """A group member that kept ending in system errors: its group must not be trained on."""


def server_generate(server_manager: Any, sampling_params: dict[str, Any]):
    """A `TokenClientPolicy` generate function over verl's server manager (one request id per
    episode: a sticky session for the engine's prefix cache)."""
    request_id = uuid.uuid4().hex

    async def generate(prompt_ids: list[int], max_tokens: int, seed: int) -> Generation:
        out = await server_manager.generate(request_id, prompt_ids=list(prompt_ids),
                                            sampling_params={**sampling_params, "max_tokens": max_tokens})
        ids = list(out.token_ids)
        lps = list(out.log_probs) if out.log_probs is not None else None
        return Generation(ids=ids, logprobs=lps if lps is not None and len(lps) == len(ids) else None,
                          input_tokens=len(prompt_ids), output_tokens=len(ids))

    return generate


def to_output(rec: EpisodeRecord, *, response_length: int, prompt_length: int | None, reruns: int) -> AgentLoopOutput:
    """The record as verl's `AgentLoopOutput` (module docstring)."""
    tokens = rec.tokens or {}
    if "prompt_ids" not in tokens:
        raise ValueError(f"{rec.uid}: the episode kept no token ids (the policy must be token-level)")
    prompt = list(tokens["prompt_ids"])
    if prompt_length is not None and len(prompt) > prompt_length:
        raise ValueError(f"{rec.uid}: the rendered prompt has {len(prompt)} tokens, more than "
                         f"rollout.prompt_length={prompt_length} (the dataset filters such tasks out)")
    ids = list(tokens["response_ids"])[:response_length]
    mask = list(tokens["response_mask"])[:response_length]
    lps = [0.0 if x is None else float(x) for x in tokens["logprobs"]][:response_length]
    reward = rec.reward
    info = {"score": reward, "passed": float(rec.passed), "end_reason": rec.end_reason,
            "system_error_reruns": reruns, "tool_calls": len(rec.tool_calls),
            "parse_failures": sum(1 for c in rec.tool_calls if c.get("problem")),
            "agent_turns": rec.turns.get("agent", 0), "episode_seconds": rec.timings.get("total", 0.0),
            "generated_tokens": rec.usage.get("agent", {}).get("output_tokens", 0),
            "truncated": float(len(tokens["response_ids"]) > response_length)}
    turns = sum(1 for m in rec.messages if m.get("role") != "system")
    metrics = AgentLoopMetrics(generate_sequences=rec.timings.get("agent", 0.0), tool_calls=rec.timings.get("tools", 0.0),
                               compute_score=rec.timings.get("grade", 0.0))
    return AgentLoopOutput(prompt_ids=prompt, response_ids=ids, response_mask=mask, response_logprobs=lps,
                           reward_score=reward, num_turns=turns, metrics=metrics,
                           extra_fields={"reward_extra_info": info, "tb_record": rec.to_dict()})


class ThinkingBoxAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, dataset_cls: Any,
                 data_config: Any, **kwargs: Any):
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config, **kwargs)
        self.tb = TBConfig.from_trainer(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length) if self.rollout_config.get("prompt_length") else None

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        extra = row.get("extra_info") or {}
        uid, path = extra.get("uid"), extra.get("dataset")
        if not uid or not path:
            raise ValueError(f"dataset row without extra_info.uid / extra_info.dataset (index {row.get('index')}): "
                             "prepare the data with data/prepare_data.py")
        env = worker_env(self.tb)
        task = env.task(path, uid)
        seed = int(extra["seed"]) if extra.get("seed") is not None else random.getrandbits(62)
        reruns = 0
        for attempt in range(self.tb.member_retries + 1):
            policy = TokenClientPolicy(server_generate(self.server_manager, sampling_params), self.tokenizer,
                                       name="verl", family=self.tb.family, thinking=self.tb.thinking,  # type: ignore[arg-type]
                                       sampling=SamplingParams(max_tokens=self.tb.max_turn_tokens))
            setup = env.setup(path, policy, max_response_tokens=self.response_length)
            rec = await run_episode(task, setup, repetition=int(row.get("session_id") or 0), seed=seed, attempt=attempt)
            if rec.system_error is None:
                return to_output(rec, response_length=self.response_length, prompt_length=self.prompt_length,
                                 reruns=reruns)
            reruns += 1
            log.warning("group member %s attempt %d: system error (%s); re-running it", uid, attempt, rec.system_error)
        raise MemberSystemError(f"{uid}: system error in all {reruns} attempts (last: {rec.system_error}); "
                                "its group is dropped and refilled, never trained on")


__all__ = ["MemberSystemError", "ThinkingBoxAgentLoop", "server_generate", "to_output"]
