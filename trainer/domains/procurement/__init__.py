"""The procurement domain: Brightwater Manufacturing's requisitions, purchase orders, receipts, payables and stock.

Eight cost centres with approvers, sixteen suppliers with contract prices, four warehouses, a year
of requisitions, purchase orders, goods receipts, supplier invoices, payments, transfers and returns
(`seed.py`), a written policy with real decision rules (`policy.md`: approval levels by amount and
cost centre, no self-approval, no split orders, the supplier rule, three-way match before payment,
early-payment discounts, transfers above the reorder point, the return window, bank-detail changes)
and 27 tools (`purchasing.py`, `stock.py`, `payables.py`). Tools enforce data invariants only (a
line cannot receive more than was ordered, an invoice is paid once, only the routed approver can
decide); the policy is the agent's to follow, so a task can catch an agent that writes what it forbids.

The policy search tool is `search_procurement_policy` (the kit's `search_policy`, renamed so that
this domain's server and another domain's can serve one scenario together).
The clock is fixed at 2025-09-15 10:00 UTC (`seed.NOW`, a Monday).
"""

from __future__ import annotations

from dataclasses import replace
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
    instructions="Brightwater Manufacturing: requisitions, purchase orders, receipts, supplier invoices and stock.",
)
# Every domain with a policy gets `search_policy` from the kit; two domains in one scenario would
# then offer the same name. This one's is renamed (same function, same FTS5 index).
DOMAIN.tools["search_procurement_policy"] = replace(DOMAIN.tools.pop("search_policy"), name="search_procurement_policy")

from trainer.domains.procurement import payables, purchasing, stock  # noqa: E402,F401  (declare the tools)

create_server = DOMAIN.create_server
