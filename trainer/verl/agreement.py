"""The rollout-actor agreement table: how far the actor's log-probs are from the rollout engine's,
split by the model turn a token belongs to and by what that turn follows.

A multi-turn episode's response holds runs of the model's ids (response_mask 1) between the
template deltas of tool results and user replies (mask 0). A token's **turn** is the index of its
run (0: the first generation, after the prompt); its **kind** is what the run follows, as the
episode recorded it (`tokens.turn_kinds`, carried to verl by the agent loop as the comma-joined
`turn_kinds` field): `first` (the prompt), `tool` (tool results), `user` (a user reply) or
`self` (the model's own previous turn, re-prompted with nothing added, as after an empty turn). The
split is where engine differences hide: a turn after a long tool result is scored over a long
context the engine prefilled in one pass (chunked prefill, prefix cache), the first turn over the
prompt alone.

For each group with tokens, every step logs (keys `training/rollout_actor/{group}/...`, groups
`first`, `tool`, `user`, `self`, `turn_0`, `turn_1`, `turn_2`, `turn_3_on`):

    logp_abs_diff_mean   token mean of |log p_actor - log p_rollout|
    logp_abs_diff_max    its max
    ppo_kl               token mean of log p_rollout - log p_actor (k1 of KL(rollout || actor),
                         verl's `actor/ppo_kl` convention)
    k3_kl                token mean of exp(d) - d - 1, d = log p_actor - log p_rollout (k3 of the
                         same KL: never negative, so a group's errors cannot cancel)
    tokens               how many tokens the group has

Token means over the whole step batch, on the driver, where verl compares the two itself
(`training/rollout_probs_diff_*`, in `_compute_old_log_prob`; patch 0020): the actor's log-probs are
the old log-probs it recomputed before the update (decoupled mode, every config here but the
laptop's bypass one, where patch 0011's overall `actor/rollout_actor/*` is the measure).
Imported by patched verl: torch and the standard library only.
"""

from __future__ import annotations

from typing import Sequence

import torch

KINDS = ("first", "tool", "user", "self")
TURN_GROUPS = ("turn_0", "turn_1", "turn_2", "turn_3_on")
PREFIX = "training/rollout_actor"


def token_turns(response_mask: torch.Tensor) -> torch.Tensor:
    """Each token's run index among the runs of mask-1 ids in its row (-1 where the mask is 0)."""
    mask = response_mask.bool()
    prev = torch.zeros_like(mask)
    prev[:, 1:] = mask[:, :-1]
    runs = torch.cumsum((mask & ~prev).long(), dim=1) - 1
    return torch.where(mask, runs, torch.full_like(runs, -1))


def token_kinds(turns: torch.Tensor, turn_kinds: Sequence[str | None]) -> list[list[str]]:
    """Per row, the kind of each run: from the row's comma-joined `turn_kinds`; run 0 follows the
    prompt ("first") whatever is recorded, a run past what is recorded is "unknown"."""
    out = []
    for row, recorded in zip(turns, turn_kinds):
        kinds = [k for k in (recorded or "").split(",") if k]
        n = int(row.max().item()) + 1 if row.numel() else 0
        out.append(["first" if i == 0 else (kinds[i] if i < len(kinds) else "unknown") for i in range(n)])
    return out


def agreement_table(rollout_log_probs: torch.Tensor, actor_log_probs: torch.Tensor, response_mask: torch.Tensor,
                    turn_kinds: Sequence[str | None]) -> dict[str, float]:
    """The table (module docstring) for one batch: [batch, response] log-probs and mask, and each
    row's comma-joined turn kinds."""
    if len(turn_kinds) != rollout_log_probs.shape[0]:
        raise ValueError(f"agreement table: {len(turn_kinds)} rows of turn kinds for a batch of "
                         f"{rollout_log_probs.shape[0]}")
    turns = token_turns(response_mask)
    diff = (actor_log_probs.detach().float() - rollout_log_probs.detach().float())
    kinds = token_kinds(turns, turn_kinds)
    groups: dict[str, torch.Tensor] = {}
    kind_of = torch.full_like(turns, -1)
    for b, row in enumerate(kinds):
        for i, kind in enumerate(row):
            kind_of[b][turns[b] == i] = KINDS.index(kind) if kind in KINDS else len(KINDS)
    for k, kind in enumerate(KINDS):
        groups[kind] = kind_of == k
    for t, name in enumerate(TURN_GROUPS):
        groups[name] = (turns >= t) if name == TURN_GROUPS[-1] else (turns == t)
    out: dict[str, float] = {}
    for name, sel in groups.items():
        n = int(sel.sum().item())
        if not n:
            continue
        d = diff[sel]
        out[f"{PREFIX}/{name}/logp_abs_diff_mean"] = d.abs().mean().item()
        out[f"{PREFIX}/{name}/logp_abs_diff_max"] = d.abs().max().item()
        out[f"{PREFIX}/{name}/ppo_kl"] = (-d).mean().item()
        out[f"{PREFIX}/{name}/k3_kl"] = (torch.exp(d) - d - 1).mean().item()
        out[f"{PREFIX}/{name}/tokens"] = float(n)
    return out


__all__ = ["KINDS", "PREFIX", "TURN_GROUPS", "agreement_table", "token_kinds", "token_turns"]
