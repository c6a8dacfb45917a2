-- Property management: properties, units, tenants, leases, the rent ledger, deposits,
-- maintenance work orders, vendors, manager approvals and the audit-like tables.
-- Invariants SQL can state live here; policy rules (who may do what) are the agent's job.
-- Dates are YYYY-MM-DD, times are ISO 8601 UTC (YYYY-MM-DDTHH:MM:SSZ), money is dollars (REAL).

CREATE TABLE staff (
    id          TEXT PRIMARY KEY,                 -- S-01
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('property_manager', 'leasing_agent', 'maintenance_coordinator')),
    email       TEXT NOT NULL UNIQUE
);

CREATE TABLE properties (
    id                   TEXT PRIMARY KEY,        -- P-01
    name                 TEXT NOT NULL UNIQUE,
    address              TEXT NOT NULL,
    city                 TEXT NOT NULL,
    manager_id           TEXT NOT NULL REFERENCES staff(id),
    renewal_increase_pct REAL NOT NULL CHECK (renewal_increase_pct >= 0),
    pet_policy           TEXT NOT NULL CHECK (pet_policy IN ('none', 'cats_only', 'cats_and_dogs')),
    max_dog_weight_lb    INTEGER,                 -- NULL: no dogs
    pet_rent             REAL NOT NULL DEFAULT 0 CHECK (pet_rent >= 0)
);

CREATE TABLE units (
    id          TEXT PRIMARY KEY,                 -- U-0001
    property_id TEXT NOT NULL REFERENCES properties(id),
    number      TEXT NOT NULL,
    bedrooms    INTEGER NOT NULL CHECK (bedrooms >= 0),
    bathrooms   REAL NOT NULL CHECK (bathrooms > 0),
    sqft        INTEGER NOT NULL CHECK (sqft > 0),
    market_rent REAL NOT NULL CHECK (market_rent > 0),
    status      TEXT NOT NULL CHECK (status IN ('occupied', 'notice', 'vacant')),
    UNIQUE (property_id, number)
);

CREATE TABLE tenants (
    id                 TEXT PRIMARY KEY,          -- T-0001
    first_name         TEXT NOT NULL,
    last_name          TEXT NOT NULL,
    email              TEXT NOT NULL UNIQUE,
    phone              TEXT NOT NULL,
    date_of_birth      TEXT NOT NULL,
    forwarding_address TEXT,                      -- where a former tenant's deposit refund is mailed
    payment_method     TEXT CHECK (payment_method IN ('card', 'bank_account')),  -- on file, NULL: none
    status             TEXT NOT NULL CHECK (status IN ('current', 'former'))
);

CREATE TABLE leases (
    id                TEXT PRIMARY KEY,           -- L-0001
    unit_id           TEXT NOT NULL REFERENCES units(id),
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    start_date        TEXT NOT NULL,
    end_date          TEXT NOT NULL,
    monthly_rent      REAL NOT NULL CHECK (monthly_rent > 0),
    status            TEXT NOT NULL CHECK (status IN ('upcoming', 'active', 'notice', 'ended')),
    notice_given_on   TEXT,
    move_out_date     TEXT,
    previous_lease_id TEXT REFERENCES leases(id), -- a renewal points at the lease it renews
    CHECK (end_date > start_date)
);

CREATE TABLE ledger_entries (
    id        TEXT PRIMARY KEY,                   -- E-00001
    lease_id  TEXT NOT NULL REFERENCES leases(id),
    posted_on TEXT NOT NULL,
    kind      TEXT NOT NULL CHECK (kind IN (
        'rent', 'late_fee', 'utility', 'pet_rent', 'damage',              -- charges
        'payment', 'concession', 'deposit_applied')),                       -- credits
    amount    REAL NOT NULL CHECK (amount > 0),
    status    TEXT NOT NULL DEFAULT 'posted' CHECK (status IN ('posted', 'waived', 'returned')),
    method    TEXT CHECK (method IN ('card', 'bank_account', 'check', 'cash_office')),  -- payments only
    memo      TEXT NOT NULL DEFAULT '',
    ref_id    TEXT                                -- approval or work order the entry relies on
);
CREATE INDEX ledger_by_lease ON ledger_entries(lease_id, posted_on);

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,                -- A-0001
    lease_id     TEXT NOT NULL REFERENCES leases(id),
    kind         TEXT NOT NULL CHECK (kind IN ('concession', 'deposit_refund')),
    amount       REAL NOT NULL CHECK (amount > 0),
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    requested_on TEXT NOT NULL,
    decided_by   TEXT REFERENCES staff(id),
    decided_on   TEXT
);

CREATE TABLE deposits (
    id            TEXT PRIMARY KEY,               -- D-0001
    lease_id      TEXT NOT NULL UNIQUE REFERENCES leases(id),
    amount_held   REAL NOT NULL CHECK (amount_held >= 0),
    status        TEXT NOT NULL CHECK (status IN ('held', 'refunded')),
    refund_amount REAL CHECK (refund_amount >= 0),
    refunded_on   TEXT,
    approval_id   TEXT REFERENCES approvals(id),
    CHECK (refund_amount IS NULL OR refund_amount <= amount_held)
);

CREATE TABLE deposit_deductions (
    id         TEXT PRIMARY KEY,                  -- DD-0001
    deposit_id TEXT NOT NULL REFERENCES deposits(id),
    reason     TEXT NOT NULL,
    amount     REAL NOT NULL CHECK (amount > 0)
);

CREATE TABLE pets (
    id          TEXT PRIMARY KEY,                 -- PET-0001
    lease_id    TEXT NOT NULL REFERENCES leases(id),
    species     TEXT NOT NULL CHECK (species IN ('cat', 'dog')),
    name        TEXT NOT NULL,
    weight_lb   REAL NOT NULL CHECK (weight_lb > 0),
    monthly_fee REAL NOT NULL CHECK (monthly_fee >= 0),
    added_on    TEXT NOT NULL
);

CREATE TABLE vendors (
    id                TEXT PRIMARY KEY,           -- V-101
    name              TEXT NOT NULL UNIQUE,
    trade             TEXT NOT NULL CHECK (trade IN ('plumbing', 'electrical', 'hvac', 'appliance', 'general', 'pest', 'locksmith')),
    hourly_rate       REAL NOT NULL CHECK (hourly_rate > 0),
    emergency_service INTEGER NOT NULL CHECK (emergency_service IN (0, 1)),
    callout_fee       REAL,                       -- emergency call-out fee; NULL without emergency service
    insurance_expires TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('active', 'suspended'))
);

CREATE TABLE work_orders (
    id                  TEXT PRIMARY KEY,         -- WO-0001
    unit_id             TEXT NOT NULL REFERENCES units(id),
    reported_by         TEXT REFERENCES tenants(id),
    category            TEXT NOT NULL CHECK (category IN ('plumbing', 'electrical', 'hvac', 'appliance', 'general', 'pest', 'locksmith')),
    priority            TEXT NOT NULL CHECK (priority IN ('emergency', 'urgent', 'routine')),
    description         TEXT NOT NULL,
    permission_to_enter INTEGER NOT NULL CHECK (permission_to_enter IN (0, 1)),
    status              TEXT NOT NULL CHECK (status IN ('open', 'assigned', 'in_progress', 'completed', 'cancelled')),
    vendor_id           TEXT REFERENCES vendors(id),
    created_at          TEXT NOT NULL,
    due_by              TEXT NOT NULL,
    closed_at           TEXT,
    resolution          TEXT,
    CHECK (status NOT IN ('assigned', 'in_progress') OR vendor_id IS NOT NULL)
);
CREATE INDEX work_orders_by_unit ON work_orders(unit_id, status);

CREATE TABLE showings (
    id             TEXT PRIMARY KEY,              -- SH-0001
    unit_id        TEXT NOT NULL REFERENCES units(id),
    prospect_name  TEXT NOT NULL,
    prospect_phone TEXT NOT NULL,
    starts_at      TEXT NOT NULL,                 -- local time YYYY-MM-DDTHH:MM
    status         TEXT NOT NULL CHECK (status IN ('scheduled', 'cancelled'))
);

CREATE TABLE identity_checks (
    id         TEXT PRIMARY KEY,                  -- IC-0001
    tenant_id  TEXT REFERENCES tenants(id),
    result     TEXT NOT NULL CHECK (result IN ('passed', 'failed')),
    checked_at TEXT NOT NULL
);

CREATE TABLE notes (
    id         TEXT PRIMARY KEY,                  -- N-0001
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
