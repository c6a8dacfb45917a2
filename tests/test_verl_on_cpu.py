"""The episode as a verl agent loop, on CPU, with real verl modules (the `*_on_cpu` way verl tests
its own loops): a token-level server stands in for vLLM behind verl's server-manager interface,
driven by the synthetic policy, so tool calls and tool turns really happen through tb_interpret,
the sandbox and the grader; the outputs go through verl's own worker post-processing, GRPO
advantages and the token-mean loss.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf
from qwen_tok import tokenizer as tok  # loaded on first use, not at collection

from trainer.domains import DOMAINS
from trainer.env.sandbox.mcp_host import ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.policy import EpisodeInfo
from trainer.formats.record import read_records
from trainer.rollout.runner import episode_seed, step_seed
from trainer.rollout.synthetic import SyntheticJudge, SyntheticPolicy
from trainer.rollout.setup import make_user

# verl and torch (trainer.verl.agent_loop imports verl) load in the tests that use them, not at collection

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
DS = load_dataset(SAMPLES)
WRITE_TASK = "toy_loans.py:test_fine_correction"
RESPONSE_LENGTH = 4096


class SyntheticServer:
    """verl's server-manager interface (`generate(request_id, prompt_ids=, sampling_params=)` ->
    `TokenOutput`) backed by the synthetic policy: one synthetic session per request id, for the
    task whose query the first prompt holds. Records every call."""

    def __init__(self, p: float, seed: int):
        self.policy = SyntheticPolicy(p=p, tokenizer=tok())
        self.seed = seed
        self.sessions: dict[str, Any] = {}
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw) -> TokenOutput:
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling_params": sampling_params})
        if request_id not in self.sessions:
            text = tok().decode(prompt_ids)
            task = max((t for t in DS.tasks.values() if t.query in text), key=lambda t: len(t.query))
            self.sessions[request_id] = self.policy.session(EpisodeInfo(task, 0, self.seed))
        gen = await self.sessions[request_id].generate(list(prompt_ids), max_tokens=sampling_params["max_tokens"])
        return TokenOutput(token_ids=gen.ids, log_probs=[-0.5] * len(gen.ids), stop_reason="completed")


def trainer_config(**tb: Any):
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": RESPONSE_LENGTH, "n": 8,
                                          "multi_turn": {"tool_config_path": None}}, "model": {}},
        "data": {"apply_chat_template_kwargs": {}, "continuous_token": {"enable": False, "model_family": "auto"}},
        "thinkingbox": {"user": "scripted", "judge": "synthetic", **tb},
    })


def agent_loop(server, **tb: Any) -> ThinkingBoxAgentLoop:
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from trainer.verl.agent_loop import ThinkingBoxAgentLoop

    config = trainer_config(**tb)
    return ThinkingBoxAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tok(),
                                processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data))


def row(uid: str, **extra: Any) -> dict[str, Any]:
    task = DS.tasks[uid]
    return {"extra_info": {"uid": uid, "dataset": str(SAMPLES), "index": 0, **extra},
            "raw_prompt": [{"role": "user", "content": task.query}], "index": 0}


def run(coro):
    return asyncio.run(coro)


SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def test_seeded_requests_carry_a_seed_per_turn_drawn_from_the_episode_seed():
    """thinkingbox.seed_requests: each turn's request carries its own seed, from the episode's
    seed and the turn's index (two members differ, a rerun of a member is the same, every turn
    differs); off (the default), no seed is sent and the engine samples as it does."""
    def seeds(member: int, **tb: Any) -> list:
        server = SyntheticServer(p=1.0, seed=3)
        run(agent_loop(server, **tb).run(dict(SAMPLING), **row(WRITE_TASK), session_id=member, global_steps=1))
        return [c["sampling_params"].get("seed") for c in server.calls]

    a, again, other = seeds(0, seed_requests=True), seeds(0, seed_requests=True), seeds(1, seed_requests=True)
    assert a == again and len(set(a)) == len(a) >= 3 and all(isinstance(s, int) and 0 <= s < 2**31 for s in a)
    assert set(a).isdisjoint(other)
    plain = seeds(0)
    assert plain == [None] * len(plain)


def test_one_sample_through_the_agent_loop_and_verls_postprocessing():
    server = SyntheticServer(p=1.0, seed=3)
    out = run(agent_loop(server).run(dict(SAMPLING), **row(WRITE_TASK)))
    assert out.reward_score == 1.0 and out.extra_fields["reward_extra_info"]["score"] == 1.0
    rec = out.extra_fields["tb_record"]
    assert rec["end_reason"] == "done" and rec["system_error"] is None and len(rec["tool_calls"]) == 3
    # masks and alignment: 1 exactly on what the server generated, in order; the rest are template deltas
    generated = []
    assert server.calls[0]["prompt_ids"] == out.prompt_ids
    spans = [out.response_ids[i] for i, m in enumerate(out.response_mask) if m == 1]
    for call, nxt in zip(server.calls, server.calls[1:] + [None]):
        full = out.prompt_ids + out.response_ids
        assert full[: len(call["prompt_ids"])] == call["prompt_ids"]  # never re-rendered: each prompt is a prefix
        prev = len(call["prompt_ids"])
        end = len(nxt["prompt_ids"]) if nxt else len(full)
        mask = out.response_mask[prev - len(out.prompt_ids): end - len(out.prompt_ids)]
        generated += [x for x, m in zip(full[prev:end], mask) if m == 1]
        assert mask[0] == 1 and (nxt is None or mask[-1] == 0)
    assert generated == spans
    assert len(out.response_logprobs) == len(out.response_ids) == len(out.response_mask)
    assert all(lp == -0.5 for lp, m in zip(out.response_logprobs, out.response_mask) if m == 1)
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, out.response_mask) if m == 0)
    # the prompt is what tb_interpret renders: system messages merged, tools block, the query
    text = tok().decode(out.prompt_ids)
    assert text.count("<|im_start|>system") == 1 and "# Tools" in text and DS.tasks[WRITE_TASK].query in text
    # each mask-0 span is the template's delta for the turn the episode recorded
    deltas = tok().decode([x for x, m in zip(out.response_ids, out.response_mask) if m == 0])
    assert deltas.count("<tool_response>") == 3 and deltas.count("<|im_start|>assistant") == 4
    # verl's own post-processing (padding, masks, rm_scores, reward_extra_info into the batch)
    batch = verl_batch([out])
    assert batch.batch["responses"].shape == (1, RESPONSE_LENGTH)
    assert int(batch.batch["response_mask"].sum()) == sum(out.response_mask)
    assert float(batch.batch["rm_scores"].sum()) == 1.0
    assert batch.non_tensor_batch["score"].tolist() == [1.0]
    assert batch.non_tensor_batch["end_reason"].tolist() == ["done"]
    # what each generation followed, as the conversation has it (the prompt, then the role of the
    # message before each later assistant turn), reaches verl's batch, and the agreement table
    # reads it against the padded mask
    msgs = [m for m in rec["messages"] if m["role"] != "system" and not m.get("direct")]
    follows = [msgs[i - 1]["role"] for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 1]
    assert rec["tokens"]["turn_kinds"] == ["first", *follows] and follows.count("tool") == 3 and "user" in follows
    assert batch.non_tensor_batch["turn_kinds"].tolist() == [",".join(rec["tokens"]["turn_kinds"])]
    from trainer.verl.agreement import KINDS, PREFIX, agreement_table

    lp = batch.batch["rollout_log_probs"]
    table = agreement_table(lp, lp + 0.25, batch.batch["response_mask"], batch.non_tensor_batch["turn_kinds"].tolist())
    assert sum(table[f"{PREFIX}/{k}/tokens"] for k in KINDS if f"{PREFIX}/{k}/tokens" in table) == sum(out.response_mask)
    assert table[f"{PREFIX}/tool/ppo_kl"] == pytest.approx(-0.25) and table[f"{PREFIX}/turn_3_on/tokens"] > 0


def verl_batch(outs: list) -> Any:
    """Agent-loop outputs through verl's own post-processing (padding, masks, rm_scores,
    reward_extra_info and the version fields into the batch), one prompt index for all."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    worker = dummy_worker()
    internal = [run(AgentLoopWorker._agent_loop_postprocess(worker, o, False, **row(WRITE_TASK))) for o in outs]
    return AgentLoopWorker._postprocess(worker, inputs=internal, input_non_tensor_batch={
        "index": np.array([0] * len(outs), dtype=object),
        "agent_name": np.array(["thinkingbox_agent"] * len(outs), dtype=object)})


def dummy_worker():
    """What AgentLoopWorker's post-processing reads of its worker (as verl's own CPU tests do)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    class _DummyWorker:
        _compute_multi_modal_inputs = AgentLoopWorker._compute_multi_modal_inputs
        _compute_position_ids = AgentLoopWorker._compute_position_ids
        _get_mm_processor_kwargs = AgentLoopWorker._get_mm_processor_kwargs
        _compute_score = AgentLoopWorker._compute_score
        _compute_teacher_logprobs = AgentLoopWorker._compute_teacher_logprobs
        _pad_token_ids = AgentLoopWorker._pad_token_ids
        distillation_enabled = False
        reward_loop_worker_handles = None

        def __init__(self):
            self.tokenizer = tok()
            self.rollout_config = OmegaConf.create({"prompt_length": 4096, "response_length": RESPONSE_LENGTH})
            self.processor = None
            self.mm_processor_kwargs = {}

    return _DummyWorker()


def generated_runs(tokens: dict) -> list[list[int]]:
    """The response's mask-1 runs (each a model turn's ids)."""
    runs, cur = [], []
    for x, m in zip(tokens["response_ids"], tokens["response_mask"]):
        if m:
            cur.append(x)
        elif cur:
            runs.append(cur)
            cur = []
    return runs + ([cur] if cur else [])


def test_the_agent_loop_and_tbt_run_give_the_same_record():
    """One episode implementation: the same seeded synthetic episode through `run_episode` (what
    `tbt run` calls) and through the agent loop gives the same messages, tokens and verdict."""
    run_seed = 11
    policy = SyntheticPolicy(p=0.5, tokenizer=tok())
    setup = EpisodeSetup(ServerRegistry(domains=DOMAINS), DS.agent(), policy, make_user("scripted"), SyntheticJudge(),
                         {"kind": "synthetic"}, EpisodeConfig(max_response_tokens=RESPONSE_LENGTH))
    for uid in (WRITE_TASK, "toy_loans.py:test_checkout_book"):
        seed = episode_seed(run_seed, uid, 0)  # how tbt run and the loop derive it (the row pins the run seed)
        direct = run(run_episode(DS.tasks[uid], setup, seed=seed))
        out = run(agent_loop(SyntheticServer(p=0.5, seed=seed)).run(dict(SAMPLING), **row(uid, seed=run_seed)))
        via = out.extra_fields["tb_record"]
        said = [m for m in direct.messages if m["role"] != "tool"]  # tool results carry wall-clock stamps
        assert said == [m for m in via["messages"] if m["role"] != "tool"]
        assert direct.tokens.prompt_ids == via["tokens"]["prompt_ids"] == out.prompt_ids
        # the model's spans, one by one (tool results carry wall-clock stamps, so their deltas may differ in length)
        assert generated_runs(direct.tokens.to_dict()) == generated_runs(via["tokens"])
        mine = [x for x, m in zip(direct.tokens.response_ids, direct.tokens.response_mask) if m]
        assert mine == [x for x, m in zip(out.response_ids, out.response_mask) if m]
        assert (direct.verdict["passed"], direct.end_reason, direct.seed) == (via["verdict"]["passed"], via["end_reason"], via["seed"])


def test_a_group_of_8_gives_grpo_advantages_and_a_token_mean_loss():
    """Eight members of one task through the agent loop and verl's post-processing, then verl's
    GRPO advantages and token-mean loss: members that passed get positive advantages, those that
    failed negative, and only the model's tokens carry them."""
    import torch
    from verl.trainer.ppo.core_algos import agg_loss, compute_grpo_outcome_advantage

    outs = []
    for seed in range(8):
        server = SyntheticServer(p=0.5, seed=seed)
        outs.append(run(agent_loop(server).run(dict(SAMPLING), **row(WRITE_TASK, seed=seed))))
    rewards = [o.reward_score for o in outs]
    assert 0 < sum(rewards) < 8, rewards  # a mixed group (seeds chosen so)
    batch = verl_batch(outs)
    mask = batch.batch["response_mask"].float()
    adv, _ = compute_grpo_outcome_advantage(batch.batch["rm_scores"], mask, np.array(["g"] * 8, dtype=object))
    per_member = [float(adv[i][mask[i] > 0][0]) for i in range(8)]
    for r, a in zip(rewards, per_member):
        assert (a > 0) == (r == 1.0) and (a < 0) == (r == 0.0)
    assert torch.all(adv[mask == 0] == 0)
    loss = agg_loss(-adv * mask, mask, "token-mean")
    assert torch.isclose(loss, (-adv * mask).sum() / mask.sum())


class _FlakyServer:
    """A toy-domain server whose tool calls fail as a timed-out backend would."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def direct_call(self, name, arguments):
        if not name.startswith("__reserved__"):
            raise TimeoutError("backend did not answer within 30 s")
        return self._inner.direct_call(name, arguments)


class FlakyDomains(dict):
    """{toy: factory}: the sessions numbered in `bad` get a backend that times out."""

    def __init__(self, bad: set[int]):
        super().__init__(toy=self.make)
        self.bad, self.made = bad, 0

    def make(self):
        n, self.made = self.made, self.made + 1
        server = DOMAINS["toy"]()
        return _FlakyServer(server) if n in self.bad else server


FLAKY_ONCE = FlakyDomains({3})  # the 4th session of the group: one member's first attempt
FLAKY_ALWAYS = FlakyDomains(set(range(100)))


def test_a_member_hit_by_a_backend_timeout_is_rerun_and_its_7_siblings_kept():
    loop_cfg = {"domains": f"{__name__}:FLAKY_ONCE", "call_timeout": 30.1}
    outs = []
    for seed in range(8):
        outs.append(run(agent_loop(SyntheticServer(p=1.0, seed=seed), **loop_cfg).run(dict(SAMPLING),
                                                                                         **row(WRITE_TASK, seed=seed))))
    reruns = [o.extra_fields["reward_extra_info"]["system_error_reruns"] for o in outs]
    assert reruns == [0, 0, 0, 1, 0, 0, 0, 0]
    assert all(o.reward_score == 1.0 for o in outs)  # nothing lost, nothing scored from the failure
    assert outs[3].extra_fields["tb_record"]["attempt"] == 1 and FLAKY_ONCE.made == 9


def test_a_member_that_keeps_failing_fails_its_group():
    from trainer.verl.agent_loop import MemberSystemError

    loop = agent_loop(SyntheticServer(p=1.0, seed=0), domains=f"{__name__}:FLAKY_ALWAYS", retries=1,
                      call_timeout=30.2)
    with pytest.raises(MemberSystemError, match="system error in all 2 attempts.*backend did not answer"):
        run(loop.run(dict(SAMPLING), **row(WRITE_TASK)))


def test_a_record_json_cannot_hold_is_a_system_error_rerun_and_the_group_keeps_its_member(tmp_path, monkeypatch):
    """A backend bug that leaves a value no JSON can hold in the record: that attempt is written
    to the errors file and re-run; the scored record of the rerun is written and trained on."""
    import trainer.verl.agent_loop as al

    real, calls = al.run_episode, []

    async def poisoned_once(task, setup, **kw):
        rec = await real(task, setup, **kw)
        calls.append(kw["attempt"])
        if len(calls) == 1:
            loop = {}
            loop["self"] = loop
            rec.messages.append(loop)
        return rec

    monkeypatch.setattr(al, "run_episode", poisoned_once)
    out = run(agent_loop(SyntheticServer(p=1.0, seed=0), records_dir=str(tmp_path)).run(
        dict(SAMPLING), **row(WRITE_TASK), global_steps=1))
    assert calls == [0, 1] and out.reward_score == 1.0
    assert out.extra_fields["reward_extra_info"]["system_error_reruns"] == 1
    [err] = read_records(tmp_path / "step_1.errors.jsonl")
    assert err.attempt == 0 and err.system_error.startswith("record cannot be written: RecursionError")
    [ok] = read_records(tmp_path / "step_1.jsonl")
    assert (ok.uid, ok.attempt, ok.passed) == (WRITE_TASK, 1, True)


def test_a_row_that_names_no_task_is_an_error_naming_it():
    loop = agent_loop(SyntheticServer(p=1.0, seed=0))
    with pytest.raises(ValueError, match="extra_info.uid"):
        run(loop.run(dict(SAMPLING), extra_info={}, index=7))
    with pytest.raises(KeyError, match="toy_loans.py:test_gone"):
        run(loop.run(dict(SAMPLING), **{**row(WRITE_TASK), "extra_info": {"uid": "toy_loans.py:test_gone",
                                                                          "dataset": str(SAMPLES)}}))


def test_unknown_thinkingbox_config_keys_are_named():
    with pytest.raises(ValueError, match="unknown key.*usr"):
        agent_loop(SyntheticServer(p=1.0, seed=0), usr="scripted")


def test_the_registration_yaml_names_the_loop_the_prepared_rows_ask_for():
    from trainer.data.prepare import AGENT_LOOP_NAME

    entries = OmegaConf.load(ROOT / "configs" / "agent_loop.yaml")
    assert [(e.name, e._target_) for e in entries] == [(AGENT_LOOP_NAME, "trainer.verl.agent_loop.ThinkingBoxAgentLoop")]


def test_the_dataset_filters_on_the_rendered_prompt(tmp_path):
    """ThinkingBoxDataset measures the prompt the agent loop will send (system + tools + query),
    not the bare query, and reports rows it cannot turn into an episode."""
    from trainer.data.prepare import parquet_bytes
    from trainer.verl.dataset import ThinkingBoxDataset

    uids = ["toy_loans.py:test_fine_correction", "toy_loans.py:test_checkout_book", "toy_loans.py:test_gone"]
    rows = [{"data_source": "toy", "agent_name": "thinkingbox_agent", "prompt": [{"role": "user", "content": "q"}],
             "reward_model": {"style": "thinkingbox", "ground_truth": ""},
             "extra_info": {"uid": u, "dataset": str(SAMPLES), "band": "difficult", "index": i}} for i, u in enumerate(uids)]
    path = tmp_path / "train.parquet"
    path.write_bytes(parquet_bytes(rows))
    lengths = {}
    for uid in uids[:2]:
        out = run(agent_loop(SyntheticServer(p=1.0, seed=0)).run(dict(SAMPLING), **row(uid)))
        lengths[uid] = len(out.prompt_ids)
    assert min(lengths.values()) > 500  # the tools block: far more than the bare query's few tokens

    def dataset(limit):
        cfg = OmegaConf.create({"max_prompt_length": limit, "filter_overlong_prompts": True,
                                "cache_dir": str(tmp_path / "cache"), "thinkingbox": {"user": "scripted"}})
        return ThinkingBoxDataset(data_files=[str(path)], tokenizer=tok(), config=cfg)

    ds = dataset(4096)
    assert len(ds) == 2 and ds.prompt_lengths == lengths and "toy_loans.py:test_gone" in ds.dropped
    assert ds[0]["extra_info"]["uid"] == uids[0]
    cut = dataset(min(lengths.values()))
    assert len(cut) == 1 and "max_prompt_length" in cut.dropped[max(lengths, key=lengths.get)]

    async def in_a_running_loop():  # where verl's fully-async rollouter builds it (an async Ray actor's __init__)
        return dataset(4096)

    inside = run(in_a_running_loop())
    assert len(inside) == 2 and inside.prompt_lengths == lengths and not set(inside.dropped) - {"toy_loans.py:test_gone"}


def test_step_metrics_from_the_episodes_of_two_groups():
    """trainer.verl.metrics.step_metrics, what patch 0001's replay buffer logs every step, over the
    `reward_extra_info` the agent loop leaves in each trajectory's extra_fields (the replay buffer
    reads them from there; tests/test_verl_patches_on_cpu.py runs it through the patched buffer)."""
    from trainer.verl.metrics import step_metrics

    outs = [run(agent_loop(SyntheticServer(p=0.5, seed=s)).run(dict(SAMPLING), **row(WRITE_TASK, seed=s))) for s in range(4)]
    outs += [run(agent_loop(SyntheticServer(p=1.0, seed=s)).run(dict(SAMPLING), **row("toy_loans.py:test_checkout_book", seed=s)))
             for s in range(4)]
    infos = [o.extra_fields["reward_extra_info"] for o in outs]
    m = step_metrics(infos)
    rewards = [o.reward_score for o in outs]
    assert m["training/episode/score/mean"] == pytest.approx(sum(rewards) / 8)
    assert m["training/episode/passed/mean"] == pytest.approx(sum(float(i["passed"]) for i in infos) / 8)
    assert m["training/episode/end_reason/done"] == 1.0 and m["training/episode/system_error_reruns/mean"] == 0
    assert m["training/episode/generated_tokens/mean"] > 0 and m["training/episode/tool_calls/mean"] >= 1
    assert step_metrics(infos, "validation").keys() == {k.replace("training/", "validation/", 1) for k in m}
    assert step_metrics([]) == {}


class VersionedServer(SyntheticServer):
    """Stamps each output with a weight version as verl's rollout servers and `LLMServerClient`
    do (`global_steps`, then `min_/max_global_steps` set from it): versions 3, 3, 4, ... across the
    episode's turns, as when weights change under a running episode."""

    def __init__(self, *a: Any, versions: list[int | None], **kw: Any):
        super().__init__(*a, **kw)
        self.versions = versions

    async def generate(self, request_id, **kw) -> TokenOutput:
        out = await super().generate(request_id, **kw)
        v = self.versions[min(len(self.calls) - 1, len(self.versions) - 1)]
        out.extra_fields = {"global_steps": v, "min_global_steps": v, "max_global_steps": v}
        return out


def test_the_weight_versions_of_an_episodes_tokens_reach_verls_batch():
    """verl's trainer reads `min_global_steps` / `max_global_steps` of every sample (its staleness
    metrics: `int()` of each, a missing one stops the step): the first and last version an
    episode generated under, through verl's own post-processing."""

    server = VersionedServer(p=1.0, seed=3, versions=[3, 3, 4])
    out = run(agent_loop(server).run(dict(SAMPLING), **row(WRITE_TASK), global_steps=4))
    assert len(server.calls) >= 3
    assert (out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"]) == (3, 4)
    # the record keeps each generation's versions, in order
    assert out.extra_fields["tb_record"]["tokens"]["weight_versions"] == [[3, 3], [3, 3]] + [[4, 4]] * (len(server.calls) - 2)
    batch = verl_batch([out])
    assert batch.non_tensor_batch["min_global_steps"].tolist() == [3]
    assert batch.non_tensor_batch["max_global_steps"].tolist() == [4]
    # a server that stamps nothing: the episode is put at the weights being served (step - 1)
    unstamped = SyntheticServer(p=1.0, seed=3)
    plain = run(agent_loop(unstamped).run(dict(SAMPLING), **row(WRITE_TASK), global_steps=5))
    assert (plain.extra_fields["min_global_steps"], plain.extra_fields["max_global_steps"]) == (4, 4)
    assert plain.extra_fields["tb_record"]["tokens"]["weight_versions"] == [None] * len(unstamped.calls)


# ---------------------------------------------------------------- under verl's fully-async trainer (issue 29)


def fully_async_group(uid: str, group: str, n: int = 8):
    """One group as verl's fully-async rollouter hands it to an agent-loop worker: the row through
    `prepare_single_generation_data` (repeated `rollout.n` times, interleaved), the group uid set
    as `_process_single_sample_streaming` sets it, no `global_steps` in the meta info."""
    from verl.experimental.fully_async_policy.detach_utils import prepare_single_generation_data

    r = row(uid)
    batch_dict = {"raw_prompt": np.array([r["raw_prompt"]], dtype=object), "extra_info": np.array([r["extra_info"]], dtype=object),
                  "index": np.array([0], dtype=object), "agent_name": np.array(["thinkingbox_agent"], dtype=object),
                  "data_source": np.array(["toy"], dtype=object)}
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": n, "multi_turn": {"enable": True}}}})
    batch = prepare_single_generation_data(batch_dict, cfg)
    batch.non_tensor_batch["uid"] = np.array([group] * len(batch), dtype=object)
    return batch


def worker_for(server, monkeypatch, **tb: Any):
    """What `AgentLoopWorker.generate_sequences` reads of its worker, our loop registered under
    the name the rows ask for (as configs/agent_loop.yaml registers it)."""
    import verl.experimental.agent_loop.agent_loop as al
    from verl.utils.dataset.rl_dataset import RLHFDataset

    monkeypatch.setitem(al._agent_loop_registry, "thinkingbox_agent",
                        {"_target_": "trainer.verl.agent_loop.ThinkingBoxAgentLoop"})
    worker = dummy_worker()
    worker.config = trainer_config(**tb)
    worker.rollout_config = OmegaConf.create({
        "prompt_length": 4096, "response_length": RESPONSE_LENGTH, "n": 8, "temperature": 1.0, "top_p": 1.0, "top_k": -1,
        "calculate_log_probs": True, "agent": {"default_agent_loop": "single_turn_agent"},
        "val_kwargs": {"top_p": 1.0, "top_k": -1, "temperature": 0, "n": 1}})
    worker.llm_client, worker.dataset_cls, worker.tools = server, RLHFDataset, []
    for name in ("_run_agent_loop", "_agent_loop_postprocess", "_postprocess"):
        setattr(worker, name, getattr(al.AgentLoopWorker, name).__get__(worker))
    return worker


def test_members_of_a_fully_async_group_get_distinct_reproducible_seeds_and_their_steps_file(tmp_path, monkeypatch):
    """verl's fully-async rollouter passes run() no `session_id` and no `global_steps`: the
    members are counted per group uid (0..7, distinct seeds, the same in a second run of the same
    group, others in another group) and the records go to the step after the weight version of
    the first turn (version 6: step_7.jsonl)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    def play(group: str, where: Path):
        server = VersionedServer(p=1.0, seed=3, versions=[6])
        worker = worker_for(server, monkeypatch, records_dir=str(where))
        out = run(AgentLoopWorker.generate_sequences(worker, fully_async_group(WRITE_TASK, group)))
        return out, sorted(read_records(where / "step_7.jsonl"), key=lambda r: r.repetition)

    out, recs = play("uid_sample_0_5", tmp_path / "a")
    assert [r.repetition for r in recs] == list(range(8)) and len({r.seed for r in recs}) == 8
    assert not (tmp_path / "a" / "step_0.jsonl").exists()
    assert out.non_tensor_batch["min_global_steps"].tolist() == [6] * 8
    assert out.non_tensor_batch["score"].tolist() == [1.0] * 8
    assert {r.run["seed"] for r in recs} == {step_seed(0, 7)}  # the step's run seed, as in the sync trainer
    _, again = play("uid_sample_0_5", tmp_path / "b")
    assert [r.seed for r in again] == [r.seed for r in recs]  # reproducible
    _, other = play("uid_sample_0_6", tmp_path / "c")
    assert not {r.seed for r in other} & {r.seed for r in recs}  # another group, other seeds


class FakeEngine:
    """A rollout replica behind verl's real `FullyAsyncLLMServerClient` (through a one-server load
    balancer): the synthetic policy's turns, stamped with the replica's weight version
    (`global_steps`), log-prob -0.5 at version 3 and -0.25 at version 4. `cut` maps a call number
    (per request id) to what a weight sync does to that call: the engine returns the first half
    of the turn with stop_reason "aborted" (the sync's abort, `checkpoint_engine/base.py`), and
    its version becomes 4 (the new weights); a resumed request (prompt + the cut tokens) gets
    the rest. `once` aborts only an episode's first attempt."""

    def __init__(self, cut: set[int], once: bool = False):
        self.inner = SyntheticServer(p=1.0, seed=3)
        self.version, self.cut, self.once = 3, cut, once
        self.calls: dict[str, int] = {}
        self.pending: dict[str, list[int]] = {}
        self.resumes: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.generate = self  # the actor handle's `generate.remote(...)`

    async def remote(self, *, request_id, prompt_ids, sampling_params, **kw):
        from verl.workers.rollout.replica import TokenOutput

        def out(ids, stop):
            lp = -0.5 if self.version == 3 else -0.25
            return TokenOutput(token_ids=ids, log_probs=[lp] * len(ids), stop_reason=stop,
                               extra_fields={"global_steps": self.version})

        first, rest = self.pending.pop(request_id, ([], []))
        if first and prompt_ids[-len(first):] == first:  # the client resumes: prompt + what was generated so far
            self.resumes.append({"prompt_ids": list(prompt_ids), "first": first, "max_tokens": sampling_params["max_tokens"]})
            return out(rest, "completed")
        n = self.calls[request_id] = self.calls.get(request_id, 0) + 1
        full = await self.inner.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        if n in self.cut and not (self.once and self.aborted):
            half = len(full.token_ids) // 2
            self.pending[request_id] = (full.token_ids[:half], full.token_ids[half:])
            self.aborted.append(request_id)
            result = out(full.token_ids[:half], "aborted")
            self.version = 4  # the weight sync
            return result
        return out(full.token_ids, "completed")


class OneServerBalancer:
    def __init__(self, engine):
        self.engine = engine
        self.acquire_server, self.release_server = self, self

    def remote(self, **kw):
        async def acquired():
            return "replica-0", self.engine

        return acquired() if "request_id" in kw else None


def fully_async_client(engine, *, partial_rollout: bool):
    """verl 0.9.0's own `FullyAsyncLLMServerClient` (the fully-async rollouter's server manager)."""
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": RESPONSE_LENGTH, "full_determinism": True}},
                            "async_training": {"partial_rollout": partial_rollout}})
    return FullyAsyncLLMServerClient(cfg, load_balancer_handle=OneServerBalancer(engine))


def test_a_turn_cut_by_a_weight_sync_resumes_on_the_new_weights_with_its_sandbox_intact(tmp_path):
    """partial_rollout=true: a weight sync aborts the 4th model turn (the one that calls
    adjust_fines, the write) halfway, and another cut pauses the 5th (the answer after the write);
    verl's client re-sends prompt + the tokens so far on the new weights and merges. The episode
    sees whole turns: the resumed turn's tool call is made, the sandbox the write went to is the
    one graded after the pause (the verdict reads the write: passed), and the cut turn's tokens
    carry both versions through to verl's batch."""

    engine = FakeEngine(cut={4, 5})
    loop = agent_loop(fully_async_client(engine, partial_rollout=True), records_dir=str(tmp_path))
    out = run(loop.run(dict(SAMPLING), **row(WRITE_TASK), uid="uid_sample_0_1"))
    assert len(engine.aborted) == 2 and len(engine.resumes) == 2
    rec = out.extra_fields["tb_record"]
    assert [c["name"] for c in rec["tool_calls"]] == ["find_member", "list_loans", "adjust_fines"]
    assert rec["end_reason"] == "done" and out.reward_score == 1.0 and rec["system_error"] is None
    assert out.extra_fields["reward_extra_info"]["system_error_reruns"] == 0
    assert (out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"]) == (3, 4)
    # the record's versions per model turn: the 4th began on version 3 and ended on 4, the 5th on 4
    assert rec["tokens"]["weight_versions"] == [[3, 3], [3, 3], [3, 3], [3, 4], [4, 4]]
    # each cut turn is one generated span: the write's first half at version 3, the rest at version 4
    spans = generated_runs(rec["tokens"])
    assert len(spans) == 5
    for span, resume in zip(spans[3:], engine.resumes):
        first = resume["first"]
        assert span[: len(first)] == first and len(span) > len(first)
        k = len(resume["prompt_ids"]) - len(out.prompt_ids)  # the resume's prompt is the trajectory so far
        assert resume["prompt_ids"] == out.prompt_ids + out.response_ids[:k]
    lps = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m]
    n3, n4, first = len(spans[3]), len(spans[4]), engine.resumes[0]["first"]
    assert lps[-(n3 + n4):] == [-0.5] * len(first) + [-0.25] * (n3 - len(first) + n4)
    assert set(lps[: -(n3 + n4)]) == {-0.5}
    [written] = read_records(tmp_path / "step_4.jsonl")  # first turn on version 3: step 4
    assert written.passed
    batch = verl_batch([out])
    assert batch.non_tensor_batch["min_global_steps"].tolist() == [3]
    assert batch.non_tensor_batch["max_global_steps"].tolist() == [4]


def test_a_turn_that_comes_back_aborted_is_a_system_error_rerun(tmp_path):
    """partial_rollout=false: verl's client returns the cut turn as it is (stop_reason
    "aborted"); that attempt is a system error (written to the errors file, never scored) and the
    member is re-run, its rerun trained on."""
    engine = FakeEngine(cut={2}, once=True)
    loop = agent_loop(fully_async_client(engine, partial_rollout=False), records_dir=str(tmp_path))
    out = run(loop.run(dict(SAMPLING), **row(WRITE_TASK), uid="uid_sample_0_2"))
    assert len(engine.aborted) == 1 and engine.resumes == []
    assert out.extra_fields["reward_extra_info"]["system_error_reruns"] == 1 and out.reward_score == 1.0
    [err] = read_records(tmp_path / "step_4.errors.jsonl")
    assert err.attempt == 0 and "aborted" in err.system_error and err.end_reason == "system_error"
    [ok] = read_records(tmp_path / "step_5.jsonl")  # the rerun started on version 4
    assert (ok.attempt, ok.passed) == (1, True)


def test_the_member_counter_forgets_a_full_group_and_keeps_a_bounded_number():
    from trainer.verl import env as env_mod
    from trainer.verl.env import TBConfig, WorkerEnv

    env = WorkerEnv(TBConfig(), None)  # type: ignore[arg-type]  (no world: counting only)
    assert [env.member("g", 3) for _ in range(4)] == [0, 1, 2, 0]  # a key seen again after its group: a new group
    assert [env.member("h", 1) for _ in range(2)] == [0, 0] and "h" not in env.members
    for i in range(env_mod.MAX_GROUPS + 5):
        env.member(f"k{i}", 8)
    assert len(env.members) == env_mod.MAX_GROUPS and "g" not in env.members and f"k{env_mod.MAX_GROUPS + 4}" in env.members
