-- Telecom billing support: customers, billing accounts, lines, plans and add-ons, usage, bills,
-- payments, credits and charges (adjustments), credit escalations, payment arrangements, ports.
-- Invariants SQL can state live here; policy rules (who may do what) are the agent's job.
-- Dates are YYYY-MM-DD, times are ISO 8601 UTC, money is dollars (REAL).

CREATE TABLE supervisors (
    id    TEXT PRIMARY KEY,                       -- SV-01: they decide credit escalations
    name  TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE
);

CREATE TABLE plans (
    id          TEXT PRIMARY KEY,                 -- PL-10
    name        TEXT NOT NULL UNIQUE,
    monthly_fee REAL NOT NULL CHECK (monthly_fee > 0),
    data_gb     INTEGER,                          -- NULL: unlimited
    hotspot     INTEGER NOT NULL CHECK (hotspot IN (0, 1))
);

CREATE TABLE addons (
    id          TEXT PRIMARY KEY,                 -- AD-01
    name        TEXT NOT NULL UNIQUE,
    monthly_fee REAL NOT NULL CHECK (monthly_fee > 0),
    description TEXT NOT NULL
);

CREATE TABLE customers (
    id              TEXT PRIMARY KEY,             -- C-0001
    first_name      TEXT NOT NULL,
    last_name       TEXT NOT NULL,
    email           TEXT NOT NULL UNIQUE,
    mailing_address TEXT NOT NULL,
    date_of_birth   TEXT NOT NULL,
    pin             TEXT NOT NULL CHECK (length(pin) = 4),  -- the account PIN used to verify callers
    status          TEXT NOT NULL CHECK (status IN ('active', 'closed'))
);

CREATE TABLE accounts (
    id             TEXT PRIMARY KEY,              -- ACC-0001
    customer_id    TEXT NOT NULL REFERENCES customers(id),
    billing_day    INTEGER NOT NULL CHECK (billing_day BETWEEN 1 AND 28),  -- a cycle starts on this day
    payment_method TEXT CHECK (payment_method IN ('card', 'bank_account')),  -- on file, NULL: none
    status         TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'closed')),
    opened_on      TEXT NOT NULL
);

CREATE TABLE lines (
    id             TEXT PRIMARY KEY,              -- LN-0001
    account_id     TEXT NOT NULL REFERENCES accounts(id),
    mobile_number  TEXT NOT NULL CHECK (length(mobile_number) = 10),  -- ten digits
    plan_id        TEXT NOT NULL REFERENCES plans(id),
    status         TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'pending_port', 'ported_out')),
    activated_on   TEXT NOT NULL,
    suspended_on   TEXT,
    suspend_reason TEXT CHECK (suspend_reason IN ('lost', 'stolen', 'nonpayment')),
    CHECK ((status = 'suspended') = (suspended_on IS NOT NULL))
);
-- a number is on at most one live line
CREATE UNIQUE INDEX one_live_line_per_number ON lines(mobile_number) WHERE status != 'ported_out';

CREATE TABLE line_addons (
    id         TEXT PRIMARY KEY,                  -- LA-0001
    line_id    TEXT NOT NULL REFERENCES lines(id),
    addon_id   TEXT NOT NULL REFERENCES addons(id),
    started_on TEXT NOT NULL,
    ended_on   TEXT,                              -- last day included; NULL: still active
    CHECK (ended_on IS NULL OR ended_on >= started_on)
);
CREATE UNIQUE INDEX one_active_addon ON line_addons(line_id, addon_id) WHERE ended_on IS NULL;

CREATE TABLE usage_records (
    id       TEXT PRIMARY KEY,                    -- UR-00001
    line_id  TEXT NOT NULL REFERENCES lines(id),
    day      TEXT NOT NULL,
    kind     TEXT NOT NULL CHECK (kind IN ('data', 'roaming_data', 'intl_call', 'premium_sms')),
    quantity REAL NOT NULL CHECK (quantity > 0),  -- GB, MB roaming, minutes, messages
    charge   REAL NOT NULL CHECK (charge >= 0)
);
CREATE INDEX usage_by_line ON usage_records(line_id, day);

CREATE TABLE bills (
    id             TEXT PRIMARY KEY,              -- B-00001
    account_id     TEXT NOT NULL REFERENCES accounts(id),
    period_start   TEXT NOT NULL,
    period_end     TEXT NOT NULL,
    issued_on      TEXT NOT NULL,
    due_on         TEXT NOT NULL,
    plan_charges   REAL NOT NULL CHECK (plan_charges >= 0),
    addon_charges  REAL NOT NULL CHECK (addon_charges >= 0),
    usage_charges  REAL NOT NULL CHECK (usage_charges >= 0),
    amount         REAL NOT NULL CHECK (amount >= 0),
    CHECK (period_end >= period_start AND due_on >= issued_on),
    CHECK (abs(amount - plan_charges - addon_charges - usage_charges) < 0.005)
);

CREATE TABLE payments (
    id         TEXT PRIMARY KEY,                  -- PAY-00001
    account_id TEXT NOT NULL REFERENCES accounts(id),
    paid_on    TEXT NOT NULL,
    amount     REAL NOT NULL CHECK (amount > 0),
    method     TEXT NOT NULL CHECK (method IN ('card', 'bank_account', 'store_cash')),
    status     TEXT NOT NULL DEFAULT 'posted' CHECK (status IN ('posted', 'returned'))
);

CREATE TABLE escalations (
    id           TEXT PRIMARY KEY,                -- ES-0001: a credit above the agent's limit
    account_id   TEXT NOT NULL REFERENCES accounts(id),
    amount       REAL NOT NULL CHECK (amount > 0),
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    requested_on TEXT NOT NULL,
    decided_by   TEXT REFERENCES supervisors(id),
    decided_on   TEXT
);
CREATE UNIQUE INDEX one_pending_escalation ON escalations(account_id) WHERE status = 'pending';

CREATE TABLE adjustments (
    id            TEXT PRIMARY KEY,               -- ADJ-0001: credits lower the balance, charges raise it
    account_id    TEXT NOT NULL REFERENCES accounts(id),
    line_id       TEXT REFERENCES lines(id),
    kind          TEXT NOT NULL CHECK (kind IN ('credit', 'charge')),
    category      TEXT NOT NULL CHECK (category IN ('plan_change', 'addon', 'billing_error', 'fraud', 'goodwill')),
    amount        REAL NOT NULL CHECK (amount > 0),
    reason        TEXT NOT NULL,
    posted_on     TEXT NOT NULL,
    escalation_id TEXT REFERENCES escalations(id),
    CHECK (escalation_id IS NULL OR kind = 'credit')
);

CREATE TABLE payment_arrangements (
    id                 TEXT PRIMARY KEY,          -- PA-0001
    account_id         TEXT NOT NULL REFERENCES accounts(id),
    total_amount       REAL NOT NULL CHECK (total_amount > 0),
    installments       INTEGER NOT NULL CHECK (installments BETWEEN 1 AND 12),
    installment_amount REAL NOT NULL CHECK (installment_amount > 0),
    first_due_on       TEXT NOT NULL,
    created_on         TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'completed', 'broken'))
);
CREATE UNIQUE INDEX one_active_arrangement ON payment_arrangements(account_id) WHERE status = 'active';

CREATE TABLE port_requests (
    id             TEXT PRIMARY KEY,              -- PR-0001
    line_id        TEXT NOT NULL REFERENCES lines(id),
    direction      TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    other_carrier  TEXT,                          -- donor (in) or recipient (out); NULL when unknown
    other_account  TEXT,                          -- the donor carrier's account number (in)
    transfer_pin   TEXT,                          -- issued for a port out
    status         TEXT NOT NULL CHECK (status IN ('pending', 'authorized', 'completed', 'cancelled')),
    requested_on   TEXT NOT NULL
);
CREATE UNIQUE INDEX one_open_port ON port_requests(line_id) WHERE status IN ('pending', 'authorized');

CREATE TABLE identity_checks (
    id          TEXT PRIMARY KEY,                 -- IC-0001
    customer_id TEXT REFERENCES customers(id),
    result      TEXT NOT NULL CHECK (result IN ('passed', 'failed')),
    checked_at  TEXT NOT NULL
);

CREATE TABLE account_notes (
    id         TEXT PRIMARY KEY,                  -- AN-0001
    account_id TEXT NOT NULL REFERENCES accounts(id),
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
