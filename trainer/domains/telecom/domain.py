"""The telecom domain's `DOMAIN`, apart from the package: its tool modules import it from here
(the package's `__init__` imports them, and re-exports it), so none imports the package back."""

from __future__ import annotations

from pathlib import Path

from trainer.domains.kit import Domain
from trainer.domains.telecom.seed import NOW, SEED_ROWS

HERE = Path(__file__).parent

DOMAIN = Domain(
    "telecom",
    schema=(HERE / "schema.sql").read_text(encoding="utf-8"),
    seed=SEED_ROWS,
    policy=(HERE / "policy.md").read_text(encoding="utf-8"),
    now=NOW,
    instructions="Brightwave Mobile: billing accounts, lines, plans, add-ons, usage, bills, credits and ports.",
    policy_tool="search_billing_policy",  # distinct from other domains: they may share a scenario
)
