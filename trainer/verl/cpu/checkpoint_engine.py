"""A test-only checkpoint engine for verl's disaggregated trainers on CPU: weights through Ray's
object store (`checkpoint_engine.backend=cpu_object_store`).

verl's fully-async trainer gives rollout and training their own workers and syncs weights with a
checkpoint engine (`verl/checkpoint_engine/`): the actor workers' `send_weights(per-tensor
generator)` and, in every rollout replica's `CheckpointEngineWorker`, `receive_weights()` into the
rollout's `update_weights`. verl's engines (nccl, hccl, nixl, mooncake, kimi) need an accelerator
or RDMA library (nccl imports cupy); `naive` is the colocated path only. This one:

- `send_weights`: every actor rank iterates the generator (FSDP's gathers are collective), rank 0
  keeps full CPU copies and publishes them, with the version, to a named Ray actor
  (`WeightStore`, one per Ray namespace, created on first use);
- `receive_weights(global_steps)`: waits until the store holds that version, then yields its
  tensors (`HFServerAdapter.update_weights` ships them to its `HFTokenServer`).

One object-store copy of the whole model per sync: tiny models only (configs/cpu_smoke_async.yaml).
Registered on import; verl imports it through `checkpoint_engine.custom_backend_module`.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator, Generator

import ray
import torch

from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

BACKEND = "cpu_object_store"
STORE = "tb_cpu_weight_store"


class WeightStore:
    """The newest published weights: (version, [object ref of {name: tensor}])."""

    def __init__(self) -> None:
        self.version: Any = None
        self.ref: list[Any] = []
        self.changed = asyncio.Condition()

    async def put(self, version: Any, ref: list[Any]) -> None:
        async with self.changed:
            self.version, self.ref = version, ref
            self.changed.notify_all()

    async def get(self, version: Any, timeout: float = 600.0) -> list[Any]:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.ref and self.version == version), timeout)
            return self.ref


def store() -> Any:
    return ray.remote(WeightStore).options(name=STORE, get_if_exists=True, num_cpus=0, max_concurrency=64).remote()


@CheckpointEngineRegistry.register(BACKEND)
class ObjectStoreCheckpointEngine(CheckpointEngine):
    def __init__(self, bucket_size: int = 0, is_master: bool = False, **kwargs: Any) -> None:
        self.is_master = is_master
        self.rank: int | None = None
        self.handle: Any = None  # held while this engine lives: a named actor with no handle left is gone

    def store(self) -> Any:
        if self.handle is None:
            self.handle = store()
        return self.handle

    def prepare(self) -> dict[str, Any]:
        return {}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]):
        return ({"rank": list(range(actor_wg_world_size))},
                {"rank": list(range(actor_wg_world_size, actor_wg_world_size + rollout_world_size))})

    def init_process_group(self, rank: int, **kwargs: Any) -> None:
        self.rank = rank

    def finalize(self) -> None:
        return None

    @torch.no_grad()
    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None], global_steps: int | None = None):
        state = {}
        for name, t in weights:  # every rank iterates: the gathers behind the generator are collective
            if hasattr(t, "full_tensor"):
                t = t.full_tensor()
            if self.is_master:
                state[name] = t.detach().to("cpu", copy=True)
        if self.is_master:
            await self.store().put.remote(global_steps, [ray.put(state)])
        return {}

    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        [ref] = await self.store().get.remote(global_steps)
        state = await ref
        for name, t in state.items():
            yield name, t


__all__ = ["BACKEND", "ObjectStoreCheckpointEngine", "STORE", "WeightStore", "store"]
