"""verl's unpadding helpers without flash-attn, in plain torch (the CPU path).

`verl.utils.attention_utils` (`unpad_input`, `pad_input`, `index_first_axis`: what
`left_right_2_no_padding` calls in the trainer's log-prob and update steps) imports
`flash_attn.bert_padding` on anything but an NPU, and verl's NPU copy needs einops; neither is
installed on CPU. These are the same functions (flash-attn's `bert_padding` semantics: the
tokens where the mask is set, in row-major order, and the cumulative lengths), which
trainer/verl/cpu/__init__.py installs only where flash-attn is missing (scripts/gpu_smoke.sh
keeps flash-attn's).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def index_first_axis(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    return x[indices]


def pad_input(hidden_states: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int) -> torch.Tensor:
    out = hidden_states.new_zeros((batch * seqlen, *hidden_states.shape[1:]))
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])


def unpad_input(hidden_states: torch.Tensor, attention_mask: torch.Tensor, unused_mask: torch.Tensor | None = None):
    """(tokens, indices, cu_seqlens, max_seqlen_in_batch, seqused), as flash-attn's."""
    masks = attention_mask + unused_mask if unused_mask is not None else attention_mask
    seqlens = masks.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(masks.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, cu_seqlens, int(seqlens.max().item()), used


def rearrange(*args: Any, **kwargs: Any):
    raise NotImplementedError("einops' rearrange is not available on the CPU path (trainer/verl/cpu/padding.py)")


__all__ = ["index_first_axis", "pad_input", "rearrange", "unpad_input"]
