"""verl on CPU, through verl's own registries (no verl file edited):

- the platform "cpu" (`PlatformRegistry`; select with `VERL_PLATFORM=cpu`): trainer/verl/cpu/platform.py
- verl's FSDP engines (`EngineRegistry`: language and value model, backends fsdp / fsdp2) for
  the device "cpu" as well (verl registers them for cuda and npu only; the code is device-generic)
- the rollout "hf_cpu" (`RolloutReplicaRegistry` and verl's rollout-class table, hybrid mode,
  weight sync by `checkpoint_engine.backend=naive`; standalone under the fully-async trainer,
  weight sync by `cpu_object_store`: trainer/verl/cpu/checkpoint_engine.py): trainer/verl/cpu/rollout.py
- verl's unpadding helpers without flash-attn (`padding_without_flash_attn`: trainer/verl/cpu/padding.py)
- our advantage estimators (`AdvantageEstimator` table: `grpo_positive`, trainer/verl/advantage.py),
  which configs/laptop_grpo.yaml trains with

verl imports this package in every process that imports verl when
`VERL_USE_EXTERNAL_MODULES=trainer.verl.cpu` (configs/cpu_smoke.yaml sets it for every Ray worker).
A test-only path: see docs/training.md, "Run it on a laptop".
"""

from __future__ import annotations

from trainer.verl.cpu import platform as _platform  # noqa: F401  (registers "cpu")

NAME = "hf_cpu"


def _load_replica():
    from trainer.verl.cpu.rollout import HFCPUReplica

    return HFCPUReplica


def register() -> None:
    """Register the rollout "hf_cpu" (idempotent)."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(NAME, _load_replica)
    base._ROLLOUT_REGISTRY[(NAME, "async")] = "trainer.verl.cpu.rollout.HFServerAdapter"

    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        backends = [b for b in ("fsdp", "fsdp2") if "cpu" not in EngineRegistry._engines.get(model_type, {}).get(b, {})]
        if backends:
            EngineRegistry.register(model_type=model_type, backend=backends, device="cpu")(cls)
    padding_without_flash_attn()
    from trainer.verl import advantage

    advantage.register()


def padding_without_flash_attn() -> None:
    """verl's unpadding helpers (`verl.utils.attention_utils`, called by `left_right_2_no_padding`
    in the trainer's log-prob and update steps) import flash-attn (its NPU copy needs einops):
    where flash-attn is not installed, they get the plain-torch ones of trainer/verl/cpu/padding.py.
    Where it is (scripts/gpu_smoke.sh), nothing changes."""
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        return
    from verl.utils import attention_utils

    from trainer.verl.cpu import padding

    attention_utils._get_attention_functions = lambda: (padding.index_first_axis, padding.pad_input, padding.rearrange,
                                                        padding.unpad_input)

register()
