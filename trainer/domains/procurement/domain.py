"""The procurement domain's `DOMAIN`, apart from the package: its tool modules import it from here
(the package's `__init__` imports them, and re-exports it), so none imports the package back."""

from __future__ import annotations

from pathlib import Path

from trainer.domains.kit import Domain
from trainer.domains.procurement.seed import NOW, SEED_ROWS

HERE = Path(__file__).parent

DOMAIN = Domain(
    "procurement",
    schema=(HERE / "schema.sql").read_text(encoding="utf-8"),
    seed=SEED_ROWS,
    policy=(HERE / "policy.md").read_text(encoding="utf-8"),
    now=NOW,
    policy_tool="search_procurement_policy",  # distinct from other domains: they may share a scenario
    instructions="Brightwater Manufacturing: requisitions, purchase orders, receipts, supplier invoices and stock.",
)
