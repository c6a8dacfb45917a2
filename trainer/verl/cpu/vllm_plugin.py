"""A vLLM general plugin (entry point `vllm.general_plugins`: thinkingbox-cpu-weights) that lets
verl sync weights into vLLM's CPU build, as it does into vLLM on a GPU.

vLLM's CPU build, after loading a model, hands every linear layer's weight to a prepacked GEMM
(oneDNN, or sgl-kernel) and drops the weight itself (`dispatch_cpu_unquantized_gemm`,
`remove_weight=True`); the LM head keeps its weight, but the prepacked copy is what it multiplies
by. So a weight update (verl's `update_weights`, which calls the model's `load_weights`) finds no
loadable parameter ("'Parameter' object has no attribute 'weight_loader'"), and an update that did
land would not be read. Here every 2-D linear weight stays a parameter and is multiplied by
`torch.nn.functional.linear`, as vLLM on a GPU does (its `default_unquantized_gemm`); other layers
(convolutions, expert weights) keep vLLM's own dispatch. Only on vLLM's CPU platform; elsewhere
nothing changes. vLLM loads the plugin in every process it starts (engine core and workers);
`VLLM_PLUGINS` may name the plugins to load.

Where `TBT_CPU_PROBE_FILE` is set, it also puts the engine probe after each weight sync in force
in verl's vLLM server (trainer/verl/cpu/vllm_probe.py), on any platform.
"""

from __future__ import annotations

NAME = "thinkingbox-cpu-weights"


def register() -> None:
    from trainer.verl.cpu import vllm_probe
    from vllm.platforms import current_platform

    vllm_probe.install()
    if not current_platform.is_cpu():
        return
    import torch
    from vllm.model_executor.layers import utils

    if getattr(utils.dispatch_cpu_unquantized_gemm, "thinkingbox", False):
        return
    vllm_dispatch = utils.dispatch_cpu_unquantized_gemm

    def dispatch_keeping_weights(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return vllm_dispatch(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    dispatch_keeping_weights.thinkingbox = True
    utils.dispatch_cpu_unquantized_gemm = dispatch_keeping_weights
