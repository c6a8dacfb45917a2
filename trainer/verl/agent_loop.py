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
                        `tb_record`: the episode record, `turn_kinds`: what each run of
                        the model's ids follows, comma-joined ("first,tool,user": the
                        agreement table's token kinds, trainer/verl/agreement.py), and `min_global_steps` /
                        `max_global_steps`: the weight versions its tokens came from (the
                        record's `tokens.weight_versions`: [first, last] of each generation)
    num_turns, metrics  chat turns; model / tool / grading seconds

The episode is `tbt run`'s: its setup comes from the same functions (trainer/verl/env.py), its
seed is `episode_seed(stable_seed("dispatch", step_seed(thinkingbox.seed, step), dispatch), uid,
member)` (`member_seed`): `tbt run`'s derivation with the step's run seed and the row's
`dispatch`, the dataset's number for the row (trainer/verl/dataset.py), so that a group verl
refills with a task the step already played (same step, same members 0..n-1) draws other
episodes, and the same run of the same seeds draws the same ones; a validation row keeps
`episode_seed(step_seed(thinkingbox.seed, step), uid, member)`, and a row's `extra_info.seed`
pins the run seed instead (`episode_seed(extra_info.seed, uid, member)`, wherever the row comes).
Its sampling is verl's rollout sampling (temperature, top_p, top_k: configs/sampling.yaml through
the launch) with `thinkingbox.max_turn_tokens` per turn.

Member and step. verl's synchronous v1 trainer passes each row its member index (`session_id`)
and step (`global_steps`). Its fully-async trainer (`verl.experimental.fully_async_policy`)
passes neither: one `AgentLoopWorker.generate_sequences` call gets a group's `rollout.n` rows,
all with the rollouter's group `uid` (`uid_sample_<epoch>_<n>`). There the member index is
counted per group uid on the worker (`WorkerEnv.member`, in the order verl starts the rows), the
episode seed is drawn from `stable_seed("group", thinkingbox.seed, group uid)` instead of the
step's run seed (the step is not known before the first turn), and the step is one past the weight version of
the episode's first turn (`global_steps`, which the rollout server stamps: as in the synchronous
trainer, step N's episodes are generated on the weights of step N - 1), which names its records
file and its run seed (`run.seed = step_seed(thinkingbox.seed, step)`, as in the synchronous
trainer). A weight sync during a turn is invisible here with `async_training.partial_rollout=true`:
verl's `FullyAsyncLLMServerClient` aborts the request, re-sends prompt + tokens so far on the new
weights and returns one merged turn whose `min_/max_global_steps` span both versions; tool calls,
user turns and the judge run between generation calls, so the sandbox is never paused. A turn
that comes back `aborted` (`partial_rollout=false`) is a system error of the attempt.

Records: every episode is appended, as `tbt run` writes it (`RecordWriter`), to
`<thinkingbox.records_dir>/step_<N>.jsonl` (default records_dir: `trainer.default_local_dir`/
records; validation rows to `val_step_<N>.jsonl`), and every system-error attempt to
`step_<N>.errors.jsonl`: `tbt show`, `tbt aggregate` and a reward audit read training as they read
`tbt run`. Each worker appends whole lines (one write each) to the shared files. Their run
identity (`run`, trainer/formats/identity.py) names the policy `verl:<model path>`, the user and
judge specs, the step's run seed and the dataset. A record JSON cannot hold (`writable`: a circular
or too deeply nested value, never model text) is that attempt's system error, re-run as below.

A member whose episode ends in a **system error** (a backend timeout, a crashed server, an
endpoint fault) is re-run here with a fresh sandbox, same task, same weights, up to
`thinkingbox.retries` times, by the runner's own retry policy (`play_with_retries`), so its group
keeps its good members. When the retries are exhausted `run()` raises `MemberSystemError`: verl
marks the group failed, and with the project's patches (trainer/verl/patches/: 0001 for the v1
replay buffer, 0003 for the fully-async rollouter) the whole group is dropped (and refilled)
rather than trained on with a member missing. Nothing with a system error is ever scored.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from trainer.rollout.config import dispatch_seed, group_seed
from trainer.rollout.episode import run_episode
from trainer.formats.identity import run_block
from trainer.rollout.policy import Generation, PolicyError, SamplingParams, TokenClientPolicy, stable_seed
from trainer.formats.record import EpisodeRecord, TokenTrace
from trainer.rollout.runner import episode_seed, play_with_retries, step_seed, writable
from trainer.rollout.setup import role_names
from trainer.verl.env import TBConfig, worker_env

log = logging.getLogger(__name__)




class MemberSystemError(RuntimeError):
    """A group member that kept ending in system errors: its group must not be trained on."""


class PolicyVersions:
    """The weight versions (verl's `global_steps`, stamped by the rollout server on every
    generation) an episode's tokens were generated under: verl's trainer reads the first and the
    last as `min_global_steps` / `max_global_steps` (staleness metrics, off-policy handling)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.last: int | None = None
        self.turns: list[list[int] | None] = []  # [first, last] version of each generation, in order

    def see(self, extra_fields: dict[str, Any] | None) -> None:
        fields = extra_fields or {}
        low = fields.get("min_global_steps", fields.get("global_steps"))
        high = fields.get("max_global_steps", fields.get("global_steps"))
        if self.first is None and low is not None:
            self.first = int(low)
        if high is not None:
            self.last = int(high)
        if low is None and high is None:
            self.turns.append(None)
        else:
            self.turns.append([int(low if low is not None else high), int(high if high is not None else low)])

    def fields(self, current: int) -> dict[str, int]:
        """The two fields; an episode that generated nothing (or a server that stamps no version)
        is put at `current`, the weights being served now."""
        first = self.first if self.first is not None else current
        return {"min_global_steps": first, "max_global_steps": self.last if self.last is not None else first}


ABORTED = ("aborted", "abort")  # verl's stop reasons of a generation cut by a weight sync


def server_generate(server_manager: Any, sampling_params: dict[str, Any], versions: PolicyVersions | None = None,
                    *, seeded: bool = False):
    """A `TokenClientPolicy` generate function over verl's server manager (one request id per
    episode: a sticky session for the engine's prefix cache); each output's weight version goes to
    `versions`. With `seeded` (thinkingbox.seed_requests) the n-th turn's request carries
    `seed` = stable_seed("turn", episode seed, n) mod 2**31. A turn that comes back `aborted` (a
    weight sync cut it and nothing resumed it: verl's `FullyAsyncLLMServerClient` with
    `async_training.partial_rollout=false`) is not the model's turn: `PolicyError`, a system error
    of the attempt (re-run, never scored)."""
    request_id = uuid.uuid4().hex
    turns = 0

    async def generate(prompt_ids: list[int], max_tokens: int, seed: int) -> Generation:
        nonlocal turns
        params = {**sampling_params, "max_tokens": max_tokens}
        if seeded:
            params["seed"] = stable_seed("turn", seed, turns) % 2**31
        turns += 1
        out = await server_manager.generate(request_id, prompt_ids=list(prompt_ids), sampling_params=params)
        if versions is not None:
            versions.see(getattr(out, "extra_fields", None))
        stop = getattr(out, "stop_reason", None)
        if stop in ABORTED:
            raise PolicyError(f"the generation was aborted (stop_reason {stop!r}, {len(out.token_ids)} tokens): "
                              "a weight sync cut the turn and it was not resumed (async_training.partial_rollout=false?)")
        ids = list(out.token_ids)
        lps = list(out.log_probs) if out.log_probs is not None else None
        return Generation(ids=ids, logprobs=lps if lps is not None and len(lps) == len(ids) else None,
                          input_tokens=len(prompt_ids), output_tokens=len(ids))

    return generate


def to_output(rec: EpisodeRecord, *, response_length: int, prompt_length: int | None, reruns: int,
              versions: PolicyVersions | None = None, step: int = 0) -> AgentLoopOutput:
    """The record as verl's `AgentLoopOutput` (module docstring)."""
    tokens = rec.tokens
    if not isinstance(tokens, TokenTrace):
        raise ValueError(f"{rec.uid}: the episode kept no token ids (the policy must be token-level)")
    prompt = list(tokens.prompt_ids)
    if prompt_length is not None and len(prompt) > prompt_length:
        raise ValueError(f"{rec.uid}: the rendered prompt has {len(prompt)} tokens, more than "
                         f"rollout.prompt_length={prompt_length} (the dataset filters such tasks out)")
    ids = list(tokens.response_ids)[:response_length]
    mask = list(tokens.response_mask)[:response_length]
    lps = [0.0 if x is None else float(x) for x in tokens.logprobs][:response_length]
    reward = rec.reward
    info = {"score": reward, "passed": float(rec.passed), "end_reason": rec.end_reason,
            "system_error_reruns": reruns, "tool_calls": len(rec.tool_calls),
            "parse_failures": sum(1 for c in rec.tool_calls if c.get("problem")),
            "agent_turns": rec.turns.get("agent", 0), "episode_seconds": rec.timings.get("total", 0.0),
            "generated_tokens": rec.usage.get("agent", {}).get("output_tokens", 0),
            "truncated": float(len(tokens.response_ids) > response_length)}
    turns = sum(1 for m in rec.messages if m.get("role") != "system")
    metrics = AgentLoopMetrics(generate_sequences=rec.timings.get("agent", 0.0), tool_calls=rec.timings.get("tools", 0.0),
                               compute_score=rec.timings.get("grade", 0.0))
    return AgentLoopOutput(prompt_ids=prompt, response_ids=ids, response_mask=mask, response_logprobs=lps,
                           reward_score=reward, num_turns=turns, metrics=metrics,
                           extra_fields={"reward_extra_info": info, "tb_record": rec.to_dict(),
                                         "turn_kinds": ",".join(tokens.turn_kinds or ()),
                                         **(versions or PolicyVersions()).fields(max(step - 1, 0))})


class ThinkingBoxAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, dataset_cls: Any,
                 data_config: Any, **kwargs: Any):
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config, **kwargs)
        self.tb = TBConfig.from_trainer(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length) if self.rollout_config.get("prompt_length") else None
        model = self.config.get("actor_rollout_ref", {}).get("model", {}) if hasattr(self.config, "get") else {}
        self.model_name = str(model.get("path") or "verl")  # the policy's name in records

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        extra = row.get("extra_info") or {}
        uid, path = extra.get("uid"), extra.get("dataset")
        if not uid or not path:
            raise ValueError(f"dataset row without extra_info.uid / extra_info.dataset (index {row.get('index')}): "
                             "prepare the data with data/prepare_data.py")
        env = worker_env(self.tb)
        task = env.task(path, uid)
        validation = extra.get("split") == "validation"
        # before the first await: `env.member` counts a group's rows in the order verl starts them
        member = self._member(env, row, validation)
        row_step = None if row.get("global_steps") is None else int(row["global_steps"])
        pinned = None if extra.get("seed") is None else int(extra["seed"])
        seed = member_seed(self.tb.seed, row, member)
        sampling = rollout_sampling(sampling_params, self.tb.max_turn_tokens)
        user, judge = role_names(self.tb.user, self.tb.judge, env.judge_identity, synthetic_policy=False)
        run_fields = dict(policy=f"verl:{self.model_name}", user=user, judge=judge, dataset=env.dataset_block(path))

        versions: dict[int, PolicyVersions] = {}
        steps: dict[int, int] = {}

        async def play(attempt: int) -> EpisodeRecord:
            versions[attempt] = PolicyVersions()
            policy = TokenClientPolicy(server_generate(self.server_manager, sampling_params, versions[attempt],
                                                       seeded=self.tb.seed_requests),
                                       self.tokenizer,
                                       name=self.model_name, family=self.tb.family,  # type: ignore[arg-type]
                                       thinking=self.tb.thinking, sampling=sampling)
            setup = env.setup(path, policy, max_response_tokens=self.response_length)
            try:
                rec = await run_episode(task, setup, repetition=member, seed=seed, attempt=attempt)
            finally:
                env.saw_version(versions[attempt].last)
            if isinstance(rec.tokens, TokenTrace):
                rec.tokens.weight_versions = versions[attempt].turns
            steps[attempt] = episode_step(row_step, versions[attempt], env.served_version)
            rec.run = dict(run_block(seed=pinned if pinned is not None else step_seed(self.tb.seed, steps[attempt]),
                                     **run_fields))
            if row.get("uid") is not None:  # verl's group (the fully-async rollouter's sample): a resume's rollback reads it
                rec.run["group"] = str(row["uid"])
            return writable(rec, task) if self.tb.records and self.tb.records_dir else rec

        def failed(rec: EpisodeRecord) -> None:
            log.warning("group member %s #%d attempt %d: system error (%s)", uid, member, rec.attempt, rec.system_error)
            where = records_paths(self.tb, steps[rec.attempt], validation=validation)
            if where is not None:
                env.writer(where[1]).write(rec)

        rec = await play_with_retries(play, retries=self.tb.retries, on_system_error=failed)
        if rec.system_error is not None:
            raise MemberSystemError(f"{uid}: system error in all {rec.attempt + 1} attempts (last: {rec.system_error}); "
                                    "its group is dropped and refilled, never trained on")
        step = steps[rec.attempt]
        where = records_paths(self.tb, step, validation=validation)
        if where is not None:
            env.writer(where[0]).write(rec)
        return to_output(rec, response_length=self.response_length, prompt_length=self.prompt_length, reruns=rec.attempt,
                         versions=versions.get(rec.attempt), step=step)

    def _member(self, env: Any, row: dict[str, Any], validation: bool) -> int:
        """The row's member index in its group: verl's `session_id` (the synchronous v1 trainer),
        else counted per group `uid` on the worker (`WorkerEnv.member`: the fully-async rollouter
        passes none, and sends a group's rows to one worker in one call), else 0 (a row alone).
        verl's legacy synchronous trainer (`trainer.use_v1=false`, not used here) also passes none
        but may split a group between workers, which would count two members 0."""
        if row.get("session_id") is not None:
            return int(row["session_id"])
        if row.get("uid") is None:
            return 0
        size = self.rollout_config.get("n", 1)
        if validation:
            size = (self.rollout_config.get("val_kwargs") or {}).get("n", 1)
        return env.member(str(row["uid"]), int(size or 1))


def member_seed(seed: int, row: dict[str, Any], member: int) -> int:
    """A group member's episode seed, `episode_seed(base, task uid, member)`. The base is a row's
    `extra_info.seed` (pinned: the same episodes wherever the row comes); else the step's run seed
    (`step_seed(seed, step)`) where verl passes the step; else, as the step is known only once the
    first turn comes back (`episode_step`), the group's: `group_seed(seed, uid)` of verl's
    group uid (the fully-async rollouter's `uid_sample_<epoch>_<n>`, the same in every run of a
    config); else step 0's. Unless pinned, the row's `dispatch` (the dataset's number for the row,
    trainer/verl/dataset.py) is mixed in, `dispatch_seed(base, dispatch)`: verl refills a
    group with the same step and members 0..n-1, maybe of a task the step already played, and the
    refill must not replay that group token for token (seeded requests). A validation row
    (`extra_info.split`) is never refilled and keeps the step's seed, whatever validation pass
    numbered it."""
    extra = row.get("extra_info") or {}
    if extra.get("seed") is not None:
        return episode_seed(int(extra["seed"]), extra["uid"], member)
    if row.get("global_steps") is not None:
        base = step_seed(seed, int(row["global_steps"]))
    elif row.get("uid") is not None:
        base = group_seed(seed, str(row["uid"]))
    else:
        base = step_seed(seed, 0)
    if row.get("dispatch") is not None and extra.get("split") != "validation":
        base = dispatch_seed(base, int(row["dispatch"]))
    return episode_seed(base, extra["uid"], member)


def episode_step(row_step: int | None, versions: PolicyVersions, served: int | None) -> int:
    """The training step an attempt belongs to (its records file, its run seed): the step verl
    passes (the synchronous trainers), else one past the weight version of its first turn (the
    fully-async trainer, whose servers stamp each output with `global_steps`, the parameter
    version: as in the synchronous trainer, step N's episodes are generated on version N - 1),
    else one past the newest version this worker has seen (an attempt that generated nothing),
    else 0."""
    if row_step is not None:
        return row_step
    first = versions.first if versions.first is not None else served
    return 0 if first is None else first + 1


def rollout_sampling(sampling_params: dict[str, Any], max_turn_tokens: int) -> SamplingParams:
    """verl's per-sample sampling parameters as the episode's `SamplingParams` (top_k <= 0: off)."""
    return SamplingParams.from_verl(sampling_params, max_turn_tokens)


def records_paths(cfg: TBConfig, step: int, *, validation: bool) -> tuple[Path, Path] | None:
    """(scored records, system-error attempts) of a training step, or None when records are off."""
    if not cfg.records or not cfg.records_dir:
        return None
    stem = f"{'val_' if validation else ''}step_{step}"
    return Path(cfg.records_dir) / f"{stem}.jsonl", Path(cfg.records_dir) / f"{stem}.errors.jsonl"


__all__ = ["ABORTED", "MemberSystemError", "PolicyVersions", "ThinkingBoxAgentLoop", "episode_step", "member_seed",
           "records_paths", "rollout_sampling", "server_generate", "to_output"]
