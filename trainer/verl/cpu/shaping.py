"""The CPU smoke's agent loop: `ThinkingBoxAgentLoop` plus a tiny, smoke-only reward shaping.

Why: the smoke trains a random-weight model. Its episodes never make a well-formed tool call, so
every verdict of a group is the same (0.0: the task's checks fail on the untouched database) and
GRPO's advantages are all zero: the loss and its gradient are exactly zero, the actor cannot
change, and DAPO's zero-variance filter (on the verdict) would evict every group forever. A
trainer step would then prove nothing about the update or the weight sync.

What: reward = verdict + `shaping` x (share of the generated ids that decode to printable ASCII),
a trajectory-dependent number in [0, shaping] that differs between the members of a group, so
advantages are non-zero and std-normalised GRPO gives them unit scale. `reward_extra_info.score`
stays the **verdict**; the shaped reward is `reward_extra_info.shaped` (configs/cpu_smoke.yaml's
zero-variance filter reads that field). `shaping: 0` makes it the plain loop. Registered for the
smoke only, by configs/agent_loop_cpu.yaml (same agent name as configs/agent_loop.yaml).
"""

from __future__ import annotations

from typing import Any

from trainer.verl.agent_loop import ThinkingBoxAgentLoop


def printable_share(tokenizer: Any, ids: list[int], mask: list[int]) -> float:
    own = [i for i, m in zip(ids, mask) if m]
    if not own:
        return 0.0
    text = tokenizer.decode(own)
    return sum(1 for c in text if 32 <= ord(c) < 127) / max(1, len(text))


class ShapedThinkingBoxAgentLoop(ThinkingBoxAgentLoop):
    def __init__(self, *args: Any, shaping: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.shaping = float(shaping)

    async def run(self, sampling_params: dict[str, Any], **row: Any):
        out = await super().run(sampling_params, **row)
        info = out.extra_fields["reward_extra_info"]
        bonus = self.shaping * printable_share(self.tokenizer, out.response_ids, out.response_mask) if self.shaping else 0.0
        out.reward_score = float(out.reward_score) + bonus
        info["shaping"] = bonus
        info["shaped"] = out.reward_score
        return out


__all__ = ["ShapedThinkingBoxAgentLoop", "printable_share"]
