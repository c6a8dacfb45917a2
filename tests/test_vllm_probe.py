"""trainer/verl/cpu/vllm_probe.py: after each weight sync verl's vLLM server scores the fixed probe.
The engine tests run it inside verl's real vLLM server (tests/test_train_on_cpu.py,
tests/test_train_qwen3_5_on_cpu.py); here the descriptor's own behaviour, on a class shaped as
verl's server (an attribute set in __init__, then by `set_global_steps`) with an engine that
answers prompt log-probs as vLLM's `AsyncLLM.generate` does."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from types import SimpleNamespace

from need import need_vllm

from trainer.verl.cpu import vllm_probe
from trainer.verl.cpu.rollout import PROBE_IDS, PROBE_RESPONSE


class Engine:
    """Answers every prompt token with log-prob -(its position)."""

    def __init__(self, fail: bool = False):
        self.fail, self.requests = fail, []

    async def generate(self, prompt, sampling_params, request_id):
        self.requests.append((prompt, sampling_params, request_id))
        if self.fail:
            raise RuntimeError("engine dead")
        ids = prompt["prompt_token_ids"]
        lps = [None] + [{t: SimpleNamespace(logprob=-float(i))} for i, t in enumerate(ids) if i]
        yield SimpleNamespace(prompt_logprobs=lps)


def server_module():
    class vLLMHttpServer:  # noqa: N801 - verl's name
        def __init__(self, engine, node_rank=0):
            self.engine, self.node_rank, self.global_steps = engine, node_rank, None

        async def set_global_steps(self, global_steps):
            self.global_steps = global_steps

    mod = types.ModuleType(vllm_probe.SERVER)
    mod.vLLMHttpServer = vLLMHttpServer
    return mod


def test_each_sync_appends_the_engines_probe_log_probs_with_its_version(tmp_path, monkeypatch):
    need_vllm()  # the probe builds vLLM's SamplingParams and TokensPrompt
    path = tmp_path / "probe.jsonl"
    monkeypatch.delenv(vllm_probe.ENV, raising=False)
    mod = server_module()
    monkeypatch.setitem(sys.modules, vllm_probe.SERVER, mod)
    assert not vllm_probe.install()  # no probe file asked for: nothing changes
    monkeypatch.setenv(vllm_probe.ENV, str(path))
    assert vllm_probe.install() and vllm_probe.install()  # idempotent

    async def run():
        engine = Engine()
        server = mod.vLLMHttpServer(engine)
        other = mod.vLLMHttpServer(Engine(), node_rank=1)
        assert server.global_steps is None and not path.exists()
        for steps in (0, 1, 2):
            await server.set_global_steps(steps)
            await other.set_global_steps(steps)
            assert server.global_steps == steps  # read back as the plain attribute
            await asyncio.gather(*server.__dict__["_tb_probes"])
        return engine

    engine = asyncio.run(run())
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    n = len(PROBE_IDS)
    assert [(x["global_steps"], x["sync"]) for x in lines] == [(0, 1), (1, 2), (2, 3)]  # node 1 never probes
    assert all(x["logprobs"] == [-float(i) for i in range(n, n + len(PROBE_RESPONSE))] for x in lines)
    prompt, params, _ = engine.requests[0]
    assert prompt["prompt_token_ids"] == PROBE_IDS + PROBE_RESPONSE
    assert params.prompt_logprobs == 0 and params.max_tokens == 1 and params.temperature == 1.0


def test_a_failed_probe_is_written_down_and_training_goes_on(tmp_path, monkeypatch):
    need_vllm()
    path = tmp_path / "probe.jsonl"
    mod = server_module()
    monkeypatch.setitem(sys.modules, vllm_probe.SERVER, mod)
    monkeypatch.setenv(vllm_probe.ENV, str(path))
    vllm_probe.install()

    async def run():
        server = mod.vLLMHttpServer(Engine(fail=True))
        await server.set_global_steps(3)
        await asyncio.gather(*server.__dict__["_tb_probes"])

    asyncio.run(run())
    [line] = [json.loads(x) for x in path.read_text().splitlines()]
    assert line["global_steps"] == 3 and "logprobs" not in line and line["error"] == "RuntimeError: engine dead"
