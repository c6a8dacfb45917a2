"""The telecom billing domain: Brightwave Mobile's accounts, lines, plans, usage, bills and ports.

About 300 customers with 320 billing accounts, 620 lines, add-ons, four months of usage, three
bills per account, payments, credits and charges, supervisor escalations, payment arrangements
and port requests (`seed.py`), a written policy with real decision rules (`policy.md`: identity
verification, the agent's credit limit and escalations, proration from cycle dates, roaming and
stolen-phone credits from usage dates, payment arrangements, ports, privacy of other account
holders) and 27 tools (`billing.py`, `lines.py`). Tools enforce data invariants only (one
pending escalation per account, an escalation must be approved and cover the credit, one live
line per number); the policy is the agent's to follow, so a task can catch an agent that
writes what the policy forbids.

Tool names are distinct from every other domain's (the policy search is `search_billing_policy`),
so this server can share a scenario with another domain's. The clock is fixed at 2025-07-15
10:00 UTC (`seed.NOW`, a Tuesday).
"""

from __future__ import annotations

from trainer.domains.telecom import billing, lines  # noqa: F401  (declare the tools)
from trainer.domains.telecom.domain import DOMAIN

create_server = DOMAIN.create_server
