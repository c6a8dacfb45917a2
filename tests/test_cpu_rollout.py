"""The CPU rollout server (trainer/verl/cpu/rollout.py `HFTokenServer`, the class its Ray actor
runs) on a real tiny Qwen3: a request that carries `sampling_params.seed` draws the same ids
whatever the server generated before it; one without draws from the server's own generator."""

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
