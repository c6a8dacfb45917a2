"""The CPU rollout server (trainer/verl/cpu/rollout.py `HFTokenServer`, the class its Ray actor
runs) on a real tiny Qwen3: a request that carries `sampling_params.seed` draws the same ids
whatever the server generated before it or beside it; one without draws from the server's own
generator; a weight sync waits for the requests in flight, and they finish on the old weights."""

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


def generate(server, **params):
    out = asyncio.run(server.generate(PROMPT, {**SAMPLING, **params}, request_id="r"))
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
