"""The CPU rollout server (trainer/verl/cpu/rollout.py `HFTokenServer`, the class its Ray actor
runs) on a real tiny Qwen3: a request that carries `sampling_params.seed` draws the same ids
whatever the server generated before it or beside it; one without draws from the server's own
generator; a weight sync waits for the requests in flight, and they finish on the old weights; a
request id's next turn prefills only what its prompt adds, until a weight sync drops every prefix."""

from __future__ import annotations

import asyncio

import pytest

PROMPT = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]  # <|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 12}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from trainer.verl.cpu.rollout import HFTokenServer
    from trainer.verl.tiny import build_tiny_qwen3

    path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", hidden=32, layers=1)
    return HFTokenServer(str(path), max_model_len=256)


def generate(server, prompt=PROMPT, request_id=None, **params):
    """One request; each its own request id (episode) unless one is given."""
    import uuid

    out = asyncio.run(server.generate(prompt, {**SAMPLING, **params}, request_id=request_id or uuid.uuid4().hex))
    return list(out.token_ids), list(out.log_probs)


def test_a_seeded_request_draws_the_same_ids_whatever_came_before(server):
    first = generate(server, seed=7)
    for _ in range(2):
        generate(server)  # unseeded requests move the server's own generator
    assert generate(server, seed=7) == first
    assert any(generate(server, seed=s)[0] != first[0] for s in (8, 9, 10))  # a random tiny model: seeds differ


def test_unseeded_requests_draw_from_the_servers_generator(server):
    a, b = generate(server), generate(server)
    assert a[0] != b[0]  # the server's generator moved on between the two


def _parallel_server(path, monkeypatch, slots: int):
    from trainer.verl.cpu.rollout import HFTokenServer

    monkeypatch.setenv("TBT_CPU_ROLLOUT_SLOTS", str(slots))
    return HFTokenServer(str(path), max_model_len=256)


def test_seeded_requests_in_parallel_draw_what_they_draw_alone(server, monkeypatch, tmp_path):
    alone = [generate(server, seed=s) for s in (1, 2, 3, 4)]
    two = _parallel_server(server.model.name_or_path, monkeypatch, 2)
    assert two.slots == 2

    async def together():
        outs = await asyncio.gather(*(two.generate(PROMPT, {**SAMPLING, "seed": s}, request_id=f"r{s}") for s in (1, 2, 3, 4)))
        return [(list(o.token_ids), list(o.log_probs)) for o in outs]

    assert asyncio.run(together()) == alone


def test_a_weight_sync_waits_for_the_requests_in_flight(server, monkeypatch):
    import torch

    two = _parallel_server(server.model.name_or_path, monkeypatch, 2)
    before = generate(two, seed=5)
    zeroed = {k: torch.zeros_like(v) for k, v in two.model.state_dict().items() if k != "lm_head.weight"}

    async def race():
        first = asyncio.create_task(two.generate(PROMPT, {**SAMPLING, "seed": 5}, request_id="a"))
        await asyncio.sleep(0)  # the request holds its slot before the sync asks for all of them
        sync = asyncio.create_task(two.update_weights(zeroed, global_steps=1))
        out = await first
        await sync
        return (list(out.token_ids), list(out.log_probs))

    assert asyncio.run(race()) == before  # generated whole on the weights it started with
    after = generate(two, seed=5)
    assert after != before and two.global_steps == 1  # the sync did land


@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_a_bad_slot_count_is_refused_by_name(server, monkeypatch, bad):
    monkeypatch.setenv("TBT_CPU_ROLLOUT_SLOTS", bad)
    from trainer.verl.cpu.rollout import HFTokenServer

    with pytest.raises(ValueError, match="TBT_CPU_ROLLOUT_SLOTS"):
        HFTokenServer(str(server.model.name_or_path), max_model_len=256)


def test_a_request_ids_next_turn_reuses_its_history_until_a_weight_sync(server, monkeypatch):
    """Our agent loop sends one request id per episode: its second turn prefills only the tool
    result it adds (and draws what a fresh request draws); another id shares nothing; a weight
    sync drops every prefix (their keys and values are the old weights'); beyond the budget the
    least recently used goes; a bad budget is refused by name."""
    import torch

    from trainer.verl.cpu.rollout import HFTokenServer

    fresh = HFTokenServer(str(server.model.name_or_path), max_model_len=256)
    ids, _ = generate(fresh, request_id="episode", seed=3)
    assert fresh.reused == 0
    second = PROMPT + ids + [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]  # a tool result, the next turn
    cached = generate(fresh, second, request_id="episode", seed=4)
    assert fresh.reused == len(PROMPT) + len(ids) - 1
    whole = generate(fresh, second, seed=4)  # a new id: prefilled whole
    assert fresh.reused == len(PROMPT) + len(ids) - 1
    assert cached[0] == whole[0] and cached[1] == pytest.approx(whole[1], abs=1e-5)
    asyncio.run(fresh.update_weights({k: v.clone() for k, v in fresh.model.state_dict().items()
                                      if k != "lm_head.weight"}, global_steps=1))
    assert not fresh.prefixes
    generate(fresh, second, request_id="episode", seed=4)
    assert fresh.reused == len(PROMPT) + len(ids) - 1  # nothing reused after the sync

    monkeypatch.setenv("TBT_CPU_ROLLOUT_PREFIX_MB", "1")
    small = HFTokenServer(str(server.model.name_or_path), max_model_len=256)
    per_token = small.model.config.num_hidden_layers * 2 * small.model.config.num_key_value_heads * \
        small.model.config.head_dim * torch.float32.itemsize
    assert small.prefix_tokens == 2**20 // per_token
    small.prefix_tokens = len(PROMPT) + 20  # room for one history
    generate(small, request_id="a", seed=1)
    generate(small, request_id="b", seed=1)
    assert list(small.prefixes) == ["b"]  # "a", used least recently, went
    monkeypatch.setenv("TBT_CPU_ROLLOUT_PREFIX_MB", "lots")
    with pytest.raises(ValueError, match="TBT_CPU_ROLLOUT_PREFIX_MB"):
        HFTokenServer(str(server.model.name_or_path), max_model_len=256)


def test_the_log_probs_are_those_of_vllms_logprobs_mode(server, tmp_path):
    """raw_logprobs (the configs'): log_softmax(logits), the actor's at temperature 1.0, whatever
    top-k/top-p cut; processed_logprobs: renormalized over the tokens top-k/top-p keep, so higher."""
    from trainer.verl.cpu.rollout import HFTokenServer

    cut = {"top_k": 5, "top_p": 0.9, "seed": 3}
    ids, raw = generate(server, **cut)
    assert asyncio.run(server.score(PROMPT, ids, 1.0)) == pytest.approx(raw, abs=1e-5)
    processed = HFTokenServer(str(server.model.name_or_path), max_model_len=256, logprobs_mode="processed_logprobs")
    ids2, kept = generate(processed, **cut)
    assert ids2 == ids and all(k > r + 1.0 for k, r in zip(kept, raw))  # top-5 of a near-uniform 151k vocabulary
    with pytest.raises(ValueError, match="raw_logits"):
        HFTokenServer(str(server.model.name_or_path), max_model_len=256, logprobs_mode="raw_logits")
    with pytest.raises(ValueError, match="temperature 0.7"):
        generate(server, temperature=0.7)
