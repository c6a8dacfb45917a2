-- The toy domain: a small lending library. Invariants live here where SQL can state them.
CREATE TABLE members (
    id        TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    email     TEXT NOT NULL UNIQUE,
    status    TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    fines_due REAL NOT NULL DEFAULT 0 CHECK (fines_due >= 0)
);

CREATE TABLE books (
    id     TEXT PRIMARY KEY,
    title  TEXT NOT NULL,
    author TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('available', 'on_loan', 'lost'))
);

CREATE TABLE loans (
    id          TEXT PRIMARY KEY,
    member_id   TEXT NOT NULL REFERENCES members(id),
    book_id     TEXT NOT NULL REFERENCES books(id),
    checked_out TEXT NOT NULL,           -- YYYY-MM-DD
    due         TEXT NOT NULL,           -- YYYY-MM-DD
    returned    TEXT,                    -- YYYY-MM-DD, NULL while open
    fine        REAL NOT NULL DEFAULT 0 CHECK (fine >= 0),
    recorded_at REAL                     -- wall-clock time of the write: unstable, not graded
);

-- a book is on at most one open loan
CREATE UNIQUE INDEX loans_one_open_per_book ON loans(book_id) WHERE returned IS NULL;
