"""What a campaign costs: token usage per role × a price table.

The price table is YAML, dollars per million tokens, one entry per model name (the `model` of a
record's policy / user / judge identity, or the name `--price-model ROLE=NAME` gives a role):

    models:
      Qwen/Qwen3-8B:  {input: 0.10, cached_input: 0.025, output: 0.40}
      gpt-5-chat:     {input: 1.25, cached_input: 0.125, output: 10.00}

`cached_input` is optional (cached tokens are then billed as input). Input token counts include
the cached ones (OpenAI's `prompt_tokens` and `cached_tokens`), so one role's cost is

    ((input − cached) · $input + cached · $cached_input + output · $output) / 10^6

and the campaign's the sum over roles and models. From it (the seed's Table 3):

    cost per successful attempt = campaign cost / Σc
    cost per dependable task    = campaign cost / #tasks passing every attempt (observed k/k)

A role that spent tokens under a model with no price (or with no model named at all) is listed
in `unpriced`, never counted as free: `complete` is then false and the figures are lower bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from trainer.env.taskformat import yamlio
from trainer.formats.attempts import Usage  # the records' token counts (read there); priced here

ROLES = ("agent", "user", "judge")


class PriceError(ValueError):
    """A price table or a --price-model that cannot be used (names the file, line and field)."""


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float
    cached_input: float | None = None


def usage_cost(u: Usage, p: Price) -> float:
    """((input − cached) · $input + cached · $cached_input + output · $output) / 10^6."""
    cached_price = p.input if p.cached_input is None else p.cached_input
    return ((u.input_tokens - u.cached_tokens) * p.input + u.cached_tokens * cached_price
            + u.output_tokens * p.output) / 1e6


def load_prices(path: str | Path) -> dict[str, Price]:
    """The `models:` table of a price YAML; `PriceError` naming file:line: field on any fault."""
    path = Path(path)
    try:
        obj, lines = yamlio.load(path.read_text(encoding="utf-8"), _model_lines)
    except OSError as e:
        raise PriceError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise PriceError(f"{path}{f':{mark.line + 1}' if mark else ''}: invalid YAML: "
                         f"{getattr(e, 'problem', None) or e}") from None
    models = obj.get("models") if isinstance(obj, dict) else None
    if not isinstance(models, dict) or not models:
        raise PriceError(f"{path}:1: models: expected a mapping of model name -> {{input, cached_input, output}} "
                         "in $ per million tokens")
    prices = {}
    for name, entry in models.items():
        where = f"{path}:{lines.get(str(name), 1)}: models.{name}"
        if not isinstance(entry, dict):
            raise PriceError(f"{where}: expected {{input, cached_input, output}} ($ per million tokens)")
        unknown = set(entry) - {"input", "cached_input", "output"}
        if unknown:
            raise PriceError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                             "(have: input, cached_input, output)")
        vals = {}
        for key in ("input", "cached_input", "output"):
            v = entry.get(key)
            if v is None and key == "cached_input":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
                raise PriceError(f"{where}.{key}: expected a number >= 0 ($ per million tokens), got {v!r}")
            vals[key] = float(v)
        prices[str(name)] = Price(**vals)
    return prices


def _model_lines(node: yaml.Node | None) -> dict[str, int]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == "models":
            return yamlio.key_lines(v)
    return {}


def parse_price_models(items: list[str] | None) -> dict[str, str]:
    """`--price-model ROLE=NAME` options -> {role: model}; PriceError on a malformed one."""
    out = {}
    for item in items or []:
        role, sep, name = item.partition("=")
        if not sep or role not in ROLES or not name:
            raise PriceError(f"--price-model {item!r}: expected ROLE=MODEL with ROLE one of {', '.join(ROLES)}")
        out[role] = name
    return out


def campaign_cost(usage: Mapping[str, Mapping[str | None, Usage]], prices: Mapping[str, Price], *,
                  passes: int, dependable: int) -> dict[str, Any]:
    """Cost of the records whose usage is given ({role: {model or None: Usage}}): the campaign,
    per successful attempt (÷ passes), per dependable task (÷ tasks passing every attempt);
    None where the divisor is 0. Roles with tokens but no price are in `unpriced`."""
    total, by_role, unpriced = 0.0, {}, []
    for role, per_model in usage.items():
        for model, u in per_model.items():
            if not u.tokens:
                continue
            row: dict[str, Any] = {"model": model, **u.to_dict(), "cost": None}
            price = prices.get(model) if model else None
            if price is None:
                why = (f"model {model!r} has no price in the table" if model else
                       f"no model named (the records' {role} identity has none: pass --price-model {role}=NAME)")
                unpriced.append(f"{role}: {why} ({u.input_tokens:,} input, {u.output_tokens:,} output tokens)")
            else:
                row["cost"] = usage_cost(u, price)
                total += row["cost"]
            by_role.setdefault(role, []).append(row)
    return {"campaign": total, "per_successful_attempt": total / passes if passes else None,
            "per_dependable_task": total / dependable if dependable else None, "passes": passes,
            "dependable_tasks": dependable, "by_role": by_role, "unpriced": unpriced, "complete": not unpriced}


__all__ = ["PriceError", "Price", "ROLES", "Usage", "campaign_cost", "load_prices", "parse_price_models", "usage_cost"]
