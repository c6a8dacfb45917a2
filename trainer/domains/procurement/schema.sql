-- Procurement and inventory: employees, cost centres, suppliers and their contract prices,
-- items, warehouses and stock, purchase requisitions, purchase orders, goods receipts,
-- supplier invoices and payments, stock transfers, returns to supplier and write-offs.
-- Invariants SQL can state live here; policy rules (who approves what, when to pay) are the agent's.
-- Dates are YYYY-MM-DD, money is dollars (REAL), quantities are whole units.

CREATE TABLE warehouses (
    id   TEXT PRIMARY KEY,                          -- WH-01
    name TEXT NOT NULL UNIQUE,
    city TEXT NOT NULL
);

CREATE TABLE employees (
    id             TEXT PRIMARY KEY,                -- E-001
    name           TEXT NOT NULL,
    email          TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('staff', 'manager', 'director', 'cfo', 'buyer', 'ap_clerk', 'warehouse')),
    cost_centre_id TEXT,                            -- cost_centres(id); no FOREIGN KEY: the two tables point at each other
    status         TEXT NOT NULL CHECK (status IN ('active', 'on_leave', 'left'))
);

CREATE TABLE cost_centres (
    id           TEXT PRIMARY KEY,                  -- CC-110
    name         TEXT NOT NULL UNIQUE,
    owner_id     TEXT NOT NULL REFERENCES employees(id),   -- the manager who approves up to owner_limit
    owner_limit  REAL NOT NULL CHECK (owner_limit > 0),
    director_id  TEXT NOT NULL REFERENCES employees(id),   -- approves up to 25,000
    warehouse_id TEXT NOT NULL REFERENCES warehouses(id)   -- default ship-to
);

CREATE TABLE suppliers (
    id                 TEXT PRIMARY KEY,            -- S-101
    name               TEXT NOT NULL UNIQUE,
    category           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'on_hold', 'blocked')),
    preferred          INTEGER NOT NULL DEFAULT 0 CHECK (preferred IN (0, 1)),
    email              TEXT NOT NULL,
    phone              TEXT NOT NULL,
    remit_account      TEXT NOT NULL,               -- bank account payments go to (masked)
    discount_pct       REAL NOT NULL DEFAULT 0 CHECK (discount_pct >= 0 AND discount_pct < 10),
    discount_days      INTEGER NOT NULL DEFAULT 0 CHECK (discount_days >= 0),
    return_window_days INTEGER NOT NULL CHECK (return_window_days >= 0)
);

CREATE TABLE items (
    id            TEXT PRIMARY KEY,                 -- I-1001
    name          TEXT NOT NULL,
    category      TEXT NOT NULL,
    unit          TEXT NOT NULL,
    standard_cost REAL NOT NULL CHECK (standard_cost > 0)
);

CREATE TABLE supplier_prices (
    id          TEXT PRIMARY KEY,                   -- SP-0001
    supplier_id TEXT NOT NULL REFERENCES suppliers(id),
    item_id     TEXT NOT NULL REFERENCES items(id),
    unit_price  REAL NOT NULL CHECK (unit_price > 0),
    UNIQUE (supplier_id, item_id)
);

CREATE TABLE inventory (
    id            TEXT PRIMARY KEY,                 -- ST-0001
    warehouse_id  TEXT NOT NULL REFERENCES warehouses(id),
    item_id       TEXT NOT NULL REFERENCES items(id),
    on_hand       INTEGER NOT NULL CHECK (on_hand >= 0),
    reorder_point INTEGER NOT NULL CHECK (reorder_point >= 0),
    UNIQUE (warehouse_id, item_id)
);

CREATE TABLE requisitions (
    id             TEXT PRIMARY KEY,                -- PR-0001
    requester_id   TEXT NOT NULL REFERENCES employees(id),
    cost_centre_id TEXT NOT NULL REFERENCES cost_centres(id),
    supplier_id    TEXT NOT NULL REFERENCES suppliers(id),
    justification  TEXT NOT NULL,
    total          REAL NOT NULL CHECK (total > 0),
    status         TEXT NOT NULL CHECK (status IN ('draft', 'pending_approval', 'approved', 'rejected', 'ordered', 'cancelled')),
    created_on     TEXT NOT NULL,
    approver_id    TEXT REFERENCES employees(id),   -- who it is routed to
    decided_on     TEXT,
    decision_note  TEXT,
    CHECK (status IN ('draft', 'cancelled') OR approver_id IS NOT NULL)
);

CREATE TABLE requisition_lines (
    id             TEXT PRIMARY KEY,                -- RL-00001
    requisition_id TEXT NOT NULL REFERENCES requisitions(id),
    item_id        TEXT NOT NULL REFERENCES items(id),
    quantity       INTEGER NOT NULL CHECK (quantity > 0),
    unit_price     REAL NOT NULL CHECK (unit_price > 0)
);

CREATE TABLE purchase_orders (
    id             TEXT PRIMARY KEY,                -- PO-0001
    requisition_id TEXT NOT NULL UNIQUE REFERENCES requisitions(id),
    supplier_id    TEXT NOT NULL REFERENCES suppliers(id),
    warehouse_id   TEXT NOT NULL REFERENCES warehouses(id),   -- ship-to
    total          REAL NOT NULL CHECK (total > 0),
    status         TEXT NOT NULL CHECK (status IN ('open', 'partially_received', 'received', 'cancelled')),
    issued_on      TEXT NOT NULL
);

CREATE TABLE po_lines (
    id           TEXT PRIMARY KEY,                  -- POL-00001
    po_id        TEXT NOT NULL REFERENCES purchase_orders(id),
    item_id      TEXT NOT NULL REFERENCES items(id),
    quantity     INTEGER NOT NULL CHECK (quantity > 0),
    unit_price   REAL NOT NULL CHECK (unit_price > 0),
    received_qty INTEGER NOT NULL DEFAULT 0 CHECK (received_qty >= 0),
    returned_qty INTEGER NOT NULL DEFAULT 0 CHECK (returned_qty >= 0),
    CHECK (received_qty <= quantity),
    CHECK (returned_qty <= received_qty)
);

CREATE TABLE goods_receipts (
    id          TEXT PRIMARY KEY,                   -- GR-0001
    po_id       TEXT NOT NULL REFERENCES purchase_orders(id),
    received_on TEXT NOT NULL,
    received_by TEXT NOT NULL REFERENCES employees(id)
);

CREATE TABLE receipt_lines (
    id         TEXT PRIMARY KEY,                    -- GRL-00001
    receipt_id TEXT NOT NULL REFERENCES goods_receipts(id),
    po_line_id TEXT NOT NULL REFERENCES po_lines(id),
    quantity   INTEGER NOT NULL CHECK (quantity > 0)
);

CREATE TABLE supplier_invoices (
    id             TEXT PRIMARY KEY,                -- VI-0001
    supplier_id    TEXT NOT NULL REFERENCES suppliers(id),
    po_id          TEXT NOT NULL REFERENCES purchase_orders(id),
    invoice_number TEXT NOT NULL,                   -- the supplier's own number
    invoice_date   TEXT NOT NULL,
    amount         REAL NOT NULL CHECK (amount > 0),
    status         TEXT NOT NULL CHECK (status IN ('received', 'on_hold', 'paid')),
    hold_reason    TEXT
);

CREATE TABLE invoice_lines (
    id         TEXT PRIMARY KEY,                    -- VIL-00001
    invoice_id TEXT NOT NULL REFERENCES supplier_invoices(id),
    po_line_id TEXT NOT NULL REFERENCES po_lines(id),
    quantity   INTEGER NOT NULL CHECK (quantity > 0),
    unit_price REAL NOT NULL CHECK (unit_price > 0)
);

CREATE TABLE payments (
    id         TEXT PRIMARY KEY,                    -- PAY-0001
    invoice_id TEXT NOT NULL UNIQUE REFERENCES supplier_invoices(id),   -- one payment per invoice
    amount     REAL NOT NULL CHECK (amount > 0),
    paid_on    TEXT NOT NULL,
    account    TEXT NOT NULL                        -- the supplier's remit account at the time
);

CREATE TABLE transfers (
    id                TEXT PRIMARY KEY,             -- TR-0001
    item_id           TEXT NOT NULL REFERENCES items(id),
    from_warehouse_id TEXT NOT NULL REFERENCES warehouses(id),
    to_warehouse_id   TEXT NOT NULL REFERENCES warehouses(id),
    quantity          INTEGER NOT NULL CHECK (quantity > 0),
    requested_by      TEXT NOT NULL REFERENCES employees(id),
    created_on        TEXT NOT NULL,
    CHECK (from_warehouse_id != to_warehouse_id)
);

CREATE TABLE supplier_returns (
    id            TEXT PRIMARY KEY,                 -- RTV-0001
    po_line_id    TEXT NOT NULL REFERENCES po_lines(id),
    quantity      INTEGER NOT NULL CHECK (quantity > 0),
    reason        TEXT NOT NULL,
    credit_amount REAL NOT NULL CHECK (credit_amount > 0),
    created_on    TEXT NOT NULL
);

CREATE TABLE write_offs (
    id           TEXT PRIMARY KEY,                  -- WO-0001
    warehouse_id TEXT NOT NULL REFERENCES warehouses(id),
    item_id      TEXT NOT NULL REFERENCES items(id),
    quantity     INTEGER NOT NULL CHECK (quantity > 0),
    reason       TEXT NOT NULL,
    created_on   TEXT NOT NULL
);
