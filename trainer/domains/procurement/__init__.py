"""The procurement domain: Brightwater Manufacturing's requisitions, purchase orders, receipts, payables and stock.

Eight cost centres with approvers, sixteen suppliers with contract prices, four warehouses, a year
of requisitions, purchase orders, goods receipts, supplier invoices, payments, transfers and returns
(`seed.py`), a written policy with real decision rules (`policy.md`: approval levels by amount and
cost centre, no self-approval, no split orders, the supplier rule, three-way match before payment,
early-payment discounts, transfers above the reorder point, the return window, bank-detail changes)
and 27 tools (`purchasing.py`, `stock.py`, `payables.py`). Tools enforce data invariants only (a
line cannot receive more than was ordered, an invoice is paid once, only the routed approver can
decide); the policy is the agent's to follow, so a task can catch an agent that writes what it forbids.

The policy search tool is `search_procurement_policy` (distinct from other domains': they may share a scenario).
The clock is fixed at 2025-09-15 10:00 UTC (`seed.NOW`, a Monday).
"""

from __future__ import annotations

from trainer.domains.procurement import payables, purchasing, stock  # noqa: F401  (declare the tools)
from trainer.domains.procurement.domain import DOMAIN

create_server = DOMAIN.create_server
