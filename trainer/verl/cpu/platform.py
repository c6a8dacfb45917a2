"""verl's platform for CPU-only machines: device "cpu", collectives over gloo.

Registered in verl's `PlatformRegistry` as "cpu" when trainer.verl.cpu is imported (verl imports
it itself when `VERL_USE_EXTERNAL_MODULES=trainer.verl.cpu`), selected by `VERL_PLATFORM=cpu`.
Test and laptop use only: it is what lets verl's own trainer, FSDP engine and checkpoint manager
run a real step without an accelerator.

Ray: the trainer's placement groups and worker actors ask for one accelerator slot per rank
(`RayResourcePool` bundles, `ResourcePoolManager._check_resource_available` counting "GPU").
On CPU those slots are Ray's *logical* GPUs: the local Ray is started with `num_gpus=N` (N ranks),
which Ray accepts on any machine; nothing ever touches CUDA (torch sees no device, and this
platform never asks it). So `ray_resource_name()` stays "GPU" and no verl file changes.
"""

from __future__ import annotations

import types
from contextlib import contextmanager
from typing import Any, Optional

import torch

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


def _cpu_module() -> types.ModuleType:
    """`torch.cpu` plus what verl calls on `get_torch_device()` that torch.cpu lacks (RNG state,
    memory statistics, IPC): the CPU meaning of each (the CPU generator, zero bytes, no-ops)."""
    m = types.ModuleType("tbt_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(m, name, getattr(torch.cpu, name))
    m.is_available = lambda: True
    m.device_count = lambda: 1
    m.current_device = lambda: torch.device("cpu")
    m.set_device = lambda *a, **k: None
    m.synchronize = lambda *a, **k: None
    m.empty_cache = lambda: None
    m.ipc_collect = lambda: None
    m.get_rng_state = lambda *a, **k: torch.get_rng_state()
    m.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    m.manual_seed = lambda seed: torch.manual_seed(seed)
    m.manual_seed_all = lambda seed: torch.manual_seed(seed)
    m.get_device_name = lambda *a, **k: "cpu"
    m.set_per_process_memory_fraction = lambda *a, **k: None
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(m, name, lambda *a, **k: 0)
    m.reset_peak_memory_stats = lambda *a, **k: None

    def mem_get_info(*a: Any, **k: Any) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return vm.available, vm.total

    m.mem_get_info = mem_get_info
    m.memory = types.SimpleNamespace(_set_allocator_settings=lambda s: None)
    return m


_DEVICE = _cpu_module()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """Device "cpu", backend gloo, Ray's logical GPU slots as the ranks' slots (module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

    def current_device(self) -> torch.device:  # type: ignore[override]
        # verl passes get_device_id() to `.to()`, `to_empty(device=)` and `torch.device()`; a bare 0
        # there means cuda:0 to torch, so on CPU the "index" is the CPU device itself.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for its logical GPU slots; never read by torch here

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


__all__ = ["PlatformCPU"]
