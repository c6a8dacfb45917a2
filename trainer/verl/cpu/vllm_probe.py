"""After every weight sync, verl's vLLM server scores a fixed probe: the smokes' proof that the
engine plays the weights the actor trained (with LoRA: base + adapter), as the hf_cpu engine's
own probe is (trainer/verl/cpu/rollout.py).

Only where `TBT_CPU_PROBE_FILE` is set (the engine tests set it): one JSON line a sync,
`{"global_steps", "sync", "logprobs"}`, the log-probs of `PROBE_RESPONSE` after `PROBE_IDS` as vLLM's
prompt log-probs (log-softmax of the raw logits, the `raw_logprobs` the configs sample with),
`sync` counting this server's syncs (1: the launch's first) and `global_steps` the version verl
stamps the synced weights with (0 at startup, N after step N's update).

How: verl's `vLLMHttpServer.set_global_steps` is the server's last step of a sync (after the new
weights are loaded and the prefix cache cleared) and only assigns `self.global_steps`. Ray bound the
actor's methods when it created the actor, so the method cannot be wrapped from inside it; the
attribute can: `install()` makes `global_steps` a data descriptor on the class, whose setter stores
the value as before and schedules the probe on the server's event loop. `install()` runs from the
project's vLLM plugin (trainer/verl/cpu/vllm_plugin.py), which vLLM loads in the server's process
when it builds the engine, after verl's server module is imported.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

SERVER = "verl.workers.rollout.vllm_rollout.vllm_async_server"
ENV = "TBT_CPU_PROBE_FILE"


class ProbedSteps:
    """`vLLMHttpServer.global_steps`: reads and writes as the plain attribute did; a write of a
    version (a sync's last step) schedules the probe."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __get__(self, server: Any, owner: Any = None) -> Any:
        if server is None:
            return self
        return server.__dict__.get("_tb_global_steps", server.__dict__.get("global_steps"))

    def __set__(self, server: Any, value: Any) -> None:
        server.__dict__["_tb_global_steps"] = value
        if value is None or getattr(server, "node_rank", 0) != 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # set outside the server's loop: no engine to ask
            return
        server.__dict__["_tb_syncs"] = server.__dict__.get("_tb_syncs", 0) + 1
        task = loop.create_task(self.probe(server, value, server.__dict__["_tb_syncs"]))
        server.__dict__.setdefault("_tb_probes", set()).add(task)  # held until done
        task.add_done_callback(server.__dict__["_tb_probes"].discard)

    async def probe(self, server: Any, global_steps: Any, sync: int) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from trainer.verl.cpu.rollout import PROBE_IDS, PROBE_RESPONSE

        line: dict[str, Any] = {"global_steps": global_steps, "sync": sync, "engine": "vllm"}
        try:
            ids = PROBE_IDS + PROBE_RESPONSE
            final = None
            async for out in server.engine.generate(prompt=TokensPrompt(prompt_token_ids=ids),
                                                    sampling_params=SamplingParams(max_tokens=1, temperature=1.0,
                                                                                   prompt_logprobs=0),
                                                    request_id=f"tb-probe-{uuid.uuid4().hex}"):
                final = out
            line["logprobs"] = [final.prompt_logprobs[i][ids[i]].logprob for i in range(len(PROBE_IDS), len(ids))]
        except Exception as e:  # noqa: BLE001 - recorded for the test to fail on, training goes on
            line["error"] = f"{type(e).__name__}: {e}"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def install() -> bool:
    """Put the probe in force in this process where `TBT_CPU_PROBE_FILE` is set and verl's vLLM
    server module is loaded (idempotent); whether it is."""
    path = os.environ.get(ENV)
    module = sys.modules.get(SERVER)
    if not path or module is None:
        return False
    cls = module.vLLMHttpServer
    if not isinstance(cls.__dict__.get("global_steps"), ProbedSteps):
        cls.global_steps = ProbedSteps(path)
    return True


__all__ = ["ENV", "SERVER", "ProbedSteps", "install"]
