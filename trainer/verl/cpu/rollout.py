"""A test-only rollout engine for verl on CPU: a transformers-`generate` token server behind the
interface of verl's vLLM server, in verl's hybrid (colocated) mode.

Three pieces, each registered through verl's own extension points (trainer/verl/cpu/__init__.py):

- `HFTokenServer`: a Ray actor holding a `transformers` causal LM on CPU. `generate(prompt_ids,
  sampling_params, request_id)` -> `TokenOutput(token_ids, log_probs, stop_reason)`, the call
  verl's `LLMServerClient` makes on `vLLMHttpServer`; `wake_up` / `sleep` / `clear_kv_cache` /
  ... as the replica and the checkpoint manager call them. The log-probs of the sampled tokens are
  what vLLM returns for the config's `rollout.logprobs_mode` (`LOGPROBS_MODES`): raw_logprobs,
  the project's setting (configs/train_single_node.yaml), is log_softmax(logits), at temperature
  1.0 (sampling.yaml's) the distribution verl's actor scores them with; processed_logprobs is
  after temperature, top-k and top-p, verl's default.
  Requests run `$TBT_CPU_ROLLOUT_SLOTS` at a time (default 1), each in its own thread on
  `$TBT_CPU_ROLLOUT_THREADS` torch threads (default 1): a correctness engine, not a fast one. A
  request's ops are the same whatever runs beside it, so its seeded draws are too. A request
  with `sampling_params.seed` draws from its own generator seeded with it (the same ids whatever
  order requests come in); one without draws from the server's. Each request id (our agent loop
  sends one per episode, a sticky session as for vLLM's prefix cache) keeps its KV cache between
  its turns (hf_sample's `Prefix`: a turn prefills only what its prompt adds), least recently used
  dropped beyond `$TBT_CPU_ROLLOUT_PREFIX_MB` (default 1024) and all of them at a weight sync (their
  keys and values are the old weights').
- `HFCPUReplica` (`RolloutReplicaRegistry`, rollout.name=hf_cpu): launches one server per replica,
  named `hf_cpu_server_<replica>_0`, on the node of the replica's first trainer rank.
- `HFServerAdapter` (verl's `_ROLLOUT_REGISTRY[("hf_cpu", "async")]`): the rollout object inside
  each FSDP worker (verl's `ActorRolloutRefWorker` builds it as it builds vLLM's `ServerAdapter`).
  Weight sync is verl's hybrid path, `checkpoint_engine.backend=naive`:
  `ActorRolloutRefWorker.update_weights` hands it the actor's full per-tensor parameters
  (`engine.get_per_tensor_param()`), every rank iterates them (FSDP gathers are collective) and
  rollout rank 0 ships them to its server (`update_weights.remote`, one Ray object: tiny models
  only), which loads them (`load_state_dict(strict=True)`: a missing or extra name fails the sync).

After each sync the server scores a fixed probe prompt and appends its log-probs, with the step,
to `$TBT_CPU_PROBE_FILE` when that is set (tests compare them with the saved actor's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import OrderedDict
from typing import Any, Generator, Optional

import ray
import torch

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from trainer.rollout.hf_sample import Prefix, sample

log = logging.getLogger(__name__)

NAME = "hf_cpu"
PROBE_IDS = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]  # <|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n
PROBE_RESPONSE = [9707, 0, 2585, 525, 498, 30]  # "Hello! How are you?"


def server_name(replica_rank: int, node_rank: int = 0) -> str:
    return f"{NAME}_server_{replica_rank}_{node_rank}"


def _env_count(name: str, default: int = 1) -> int:
    """A positive count from the environment (`default` when unset); anything else is an error naming it."""
    raw = os.environ.get(name, "").strip() or str(default)
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{name}={raw!r}: expected a whole number >= 1")
    return n


def token_logprobs(model: Any, prompt_ids: list[int], response_ids: list[int], temperature: float = 1.0) -> list[float]:
    """log p(response_ids[i] | prompt + response[:i]) under log_softmax(logits / temperature)."""
    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1: -1].float() / temperature
    lp = torch.log_softmax(logits, dim=-1)
    return lp.gather(-1, torch.tensor(response_ids)[:, None])[:, 0].tolist()


def load_as_actor(model_path: str, dtype: Any) -> Any:
    """The checkpoint as the class verl's actor loads it (`verl.utils.model`: an image-text-to-text
    class where transformers maps the config to one, as Qwen3.5's `Qwen3_5ForConditionalGeneration`,
    else a causal LM), so a weight sync's names are the model's own. Text-only input runs through
    either class alike."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(model_path)
    auto = AutoModelForImageTextToText if type(config) in AutoModelForImageTextToText._model_mapping else AutoModelForCausalLM
    return auto.from_pretrained(model_path, dtype=dtype).eval()


# vLLM's `logprobs_mode`s that hf_cpu returns: raw_logprobs, log_softmax(logits) before any
# processing (at temperature 1.0, what verl's actor computes); processed_logprobs, after the
# temperature, top-k and top-p (renormalized over the tokens they keep)
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")


class HFTokenServer:
    """The token server (module docstring). Constructed by `HFCPUReplica` as a Ray actor."""

    def __init__(self, model_path: str, max_model_len: int, dtype: str = "float32", seed: int = 0,
                 logprobs_mode: str = "raw_logprobs"):
        from transformers import GenerationConfig

        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"hf_cpu: actor_rollout_ref.rollout.logprobs_mode={logprobs_mode} is not one it returns "
                             f"({', '.join(LOGPROBS_MODES)})")
        self.logprobs_mode = logprobs_mode

        torch.set_num_threads(_env_count("TBT_CPU_ROLLOUT_THREADS"))
        self.model = load_as_actor(model_path, getattr(torch, dtype))
        gen = self.model.generation_config if self.model.generation_config is not None else GenerationConfig()
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.model.config.eos_token_id
        self.eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.pad = gen.pad_token_id if gen.pad_token_id is not None else (self.eos[0] if self.eos else 0)
        self.max_model_len = int(max_model_len)
        # generation takes one slot; a weight sync or a drain takes them all (nothing generates while
        # the weights change)
        self.slots = _env_count("TBT_CPU_ROLLOUT_SLOTS")
        self.free = asyncio.Semaphore(self.slots)
        self.sync_lock = asyncio.Lock()
        self.global_steps: Optional[int] = None
        self.syncs = 0
        self.requests = 0
        self.generated = 0
        self.reused = 0  # prompt tokens served from a request's prefix instead of prefilled
        self.seconds = 0.0
        self.generator = torch.Generator().manual_seed(seed)
        cfg = self.model.config.get_text_config()
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        per_token = 2 * cfg.num_hidden_layers * heads * head_dim * self.model.dtype.itemsize
        self.prefix_tokens = _env_count("TBT_CPU_ROLLOUT_PREFIX_MB", 1024) * 2**20 // per_token
        self.prefixes: OrderedDict[str, Prefix] = OrderedDict()  # request id -> its KV cache, oldest use first

    # -- what verl's server client and replica call
    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **_: Any) -> TokenOutput:
        params = dict(sampling_params)
        max_tokens = int(params.pop("max_tokens", params.pop("max_new_tokens", 16)))
        max_tokens = max(0, min(max_tokens, self.max_model_len - len(prompt_ids)))
        if max_tokens < 1:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room within max_model_len={self.max_model_len}")
        async with self.free:
            t = time.perf_counter()
            prefix = self.prefixes.pop(request_id, None) or Prefix()
            ids, lps, stop, reused = await asyncio.to_thread(self._sample, list(prompt_ids), max_tokens, params, prefix)
            self._keep(request_id, prefix)
            self.reused += reused
            self.seconds += time.perf_counter() - t
        self.requests += 1
        self.generated += len(ids)
        return TokenOutput(token_ids=ids, log_probs=lps, stop_reason=stop,
                           extra_fields={"global_steps": self.global_steps})

    def _keep(self, request_id: str, prefix: Prefix) -> None:
        """Keep a request's prefix for its next turn, the least recently used dropped beyond the budget."""
        self.prefixes[request_id] = prefix
        total = sum(len(p.ids) for p in self.prefixes.values())
        while total > self.prefix_tokens and self.prefixes:
            total -= len(self.prefixes.popitem(last=False)[1].ids)

    def _sample(self, prompt: list[int], max_tokens: int, p: dict[str, Any],
                prefix: Prefix | None = None) -> tuple[list[int], list[float], str, int]:
        """Sampling as vLLM applies it (temperature, top-k, top-p: trainer/rollout/hf_sample.py), with a
        KV cache (`prefix`'s, when given); the log-prob of each sampled id as vLLM's `logprobs_mode`
        gives it (module docstring); the prompt tokens the prefix spared."""
        seed = p.get("seed")  # a request's own seed (thinkingbox.seed_requests): what it draws is its own
        generator = self.generator if seed is None else torch.Generator().manual_seed(int(seed))
        temperature = float(p.get("temperature", 1.0))
        if self.logprobs_mode == "raw_logprobs" and temperature > 0 and temperature != 1.0:
            raise ValueError(f"hf_cpu: raw_logprobs at temperature {temperature} (vLLM's are before the temperature; "
                             "hf_cpu computes them at temperature 1.0 or 0 only)")
        turn = sample(self.model, prompt, max_tokens, temperature=temperature,
                      top_k=int(p.get("top_k", -1) or -1), top_p=float(p.get("top_p", 1.0)), stop_ids=sorted(self.eos),
                      generator=generator, prefix=prefix)
        lps = turn.logprobs if self.logprobs_mode == "processed_logprobs" else turn.raw_logprobs
        return turn.ids, lps, "completed", turn.reused  # length-capped: vLLM's "length" is also "completed" to verl

    @contextlib.asynccontextmanager
    async def _all_slots(self) -> Any:
        async with self.sync_lock:  # one taker of every slot at a time: two could each hold half
            for _ in range(self.slots):
                await self.free.acquire()
            try:
                yield
            finally:
                for _ in range(self.slots):
                    self.free.release()

    async def update_weights(self, state: dict[str, torch.Tensor], global_steps: Optional[int] = None) -> dict[str, Any]:
        async with self._all_slots():
            own = self.model.state_dict()
            missing = sorted(set(own) - set(state) - {"lm_head.weight"} if self.model.config.tie_word_embeddings else set(own) - set(state))
            extra = sorted(set(state) - set(own))
            if missing or extra:
                raise ValueError(f"weight sync: missing {missing[:5]}, unexpected {extra[:5]}")
            for name, t in state.items():
                own[name].copy_(t.to(own[name].dtype))
            self.prefixes.clear()  # the old weights' keys and values
            self.syncs += 1
            self.global_steps = global_steps
            probe = token_logprobs(self.model, PROBE_IDS, PROBE_RESPONSE)
        path = os.environ.get("TBT_CPU_PROBE_FILE")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"global_steps": global_steps, "sync": self.syncs, "logprobs": probe}) + "\n")
        return {"syncs": self.syncs}

    async def score(self, prompt_ids: list[int], response_ids: list[int], temperature: float = 1.0) -> list[float]:
        async with self.free:
            return token_logprobs(self.model, prompt_ids, response_ids, temperature)

    async def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "generated_tokens": self.generated, "reused_prompt_tokens": self.reused,
                "generate_seconds": self.seconds,
                "syncs": self.syncs, "global_steps": self.global_steps}

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # weights and cache stay in host memory: nothing to free or restore
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None:
        self.prefixes.clear()
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def wait_for_requests_to_drain(self) -> None:
        async with self._all_slots():
            return None
    async def abort_all_requests(self, reset_prefix_cache: bool = True) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}
    async def resume_generation(self) -> None: ...
    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        return {"aborted": False, "request_id": request_id}
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...


class HFCPUReplica(RolloutReplica):
    """One `HFTokenServer` per replica (module docstring)."""

    async def launch_servers(self) -> None:
        node_id = None
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id())
        opts: dict[str, Any] = {"name": server_name(self.replica_rank), "num_cpus": 0,
                                "max_concurrency": self.max_concurrency}
        if node_id is not None:
            opts["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        env = {k: v for k, v in os.environ.items() if k in ("TBT_CPU_PROBE_FILE", "TBT_CPU_ROLLOUT_THREADS",
                                                             "TBT_CPU_ROLLOUT_SLOTS")}
        if env:
            opts["runtime_env"] = {"env_vars": env}
        model_path = self.model_config.local_path if hasattr(self.model_config, "local_path") else self.model_config.path
        server = ray.remote(HFTokenServer).options(**opts).remote(
            model_path=str(model_path), max_model_len=int(self.config.max_model_len or
                                                          self.config.prompt_length + self.config.response_length),
            dtype=str(self.config.dtype) if str(self.config.dtype) in ("float32", "bfloat16", "float16") else "float32",
            seed=self.replica_rank, logprobs_mode=str(self.config.logprobs_mode))
        await server.stats.remote()  # constructed (the model loaded) before the trainer goes on
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"ray-actor:{server_name(self.replica_rank)}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


class HFServerAdapter(BaseRollout):
    """The rollout inside each FSDP worker: weight sync to its replica's server (module docstring)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size * self.config.pipeline_model_parallel_size
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.server_handle = None
        self.sleep_level = 1

    def _server(self) -> Any:
        if self.rollout_rank != 0:
            return None
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_name(self.replica_rank))
        return self.server_handle

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None], global_steps: int = None,
                             wire_format: str = "named_tensors", **kwargs: Any) -> None:
        assert wire_format == "named_tensors", f"hf_cpu consumes full named tensors, not {wire_format!r}"
        state = {}

        def keep(name: str, t: Any) -> None:
            if hasattr(t, "full_tensor"):
                t = t.full_tensor()
            if self.rollout_rank == 0:
                state[name] = t.detach().to("cpu", copy=True)

        if hasattr(weights, "__aiter__"):  # a checkpoint engine's receive_weights (standalone rollout workers)
            async for name, t in weights:
                keep(name, t)
        else:
            for name, t in weights:  # every rank iterates: the gathers behind the generator are collective
                keep(name, t)
        server = self._server()
        if server is not None:
            await server.update_weights.remote(state, global_steps)


__all__ = ["HFCPUReplica", "HFServerAdapter", "HFTokenServer", "NAME", "PROBE_IDS", "PROBE_RESPONSE", "server_name",
           "token_logprobs"]
