"""The property-management domain: Northgate Residential's leases, rent ledger, deposits and repairs.

Six communities, 300 units, ~330 tenants, six months of rent ledger, work orders, vendors and
manager approvals (`seed.py`), a written policy with real decision rules (`policy.md`: identity
verification, late-fee waivers, concession and refund thresholds that need a manager approval,
emergency vs routine work orders and the vendor rule, renewals, notices, pets, showings) and 30
tools (`accounts.py`, `maintenance.py`). Tools enforce data invariants only (a late fee can be
waived once, an approval must match its lease and kind); the policy is the agent's to follow,
so a task can catch an agent that writes what the policy forbids.

The clock is fixed at 2025-06-16 14:00 UTC (`seed.NOW`; a Monday in June: cooling counts as essential).
"""

from __future__ import annotations

from trainer.domains.property import accounts, maintenance  # noqa: F401  (declare the tools)
from trainer.domains.property.domain import DOMAIN

create_server = DOMAIN.create_server
