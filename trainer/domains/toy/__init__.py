"""The toy domain: a lending library with 4 members, 8 books and a 14-day loan period.

Small on purpose (fast tests, quickstart); it exercises every part of the kit: a write with
invariants (`checkout_book`: active member, under the loan limit and the fine limit, book
available; SQLite enforces one open loan per book and fines never below zero), a write the
policy restricts rather than the data (`adjust_fines`: only to correct a fine recorded in
error, never to waive one on request — the trap tasks' temptation), deterministic ids (`L-0003`, ...), a fixed
clock (2025-03-03), an unstable field (`loans.recorded_at`, wall-clock: `Session.wall_clock()`) and `search_policy`.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

from trainer.domains.kit import ID, Domain, Session, ToolError

HERE = Path(__file__).parent
LOAN_DAYS = 14
MAX_LOANS = 3
FINE_PER_DAY = 0.25
FINE_LIMIT = 10.0

SEED = {
    "members": [
        {"id": "M-001", "name": "Ada Byron", "email": "ada@example.org", "status": "active", "fines_due": 0},
        {"id": "M-002", "name": "Ben Okafor", "email": "ben@example.org", "status": "active", "fines_due": 0},
        {"id": "M-003", "name": "Chen Li", "email": "chen@example.org", "status": "active", "fines_due": 1.5},
        {"id": "M-004", "name": "Dana Ruiz", "email": "dana@example.org", "status": "suspended", "fines_due": 0},
    ],
    "books": [
        {"id": "B-001", "title": "Dune", "author": "Frank Herbert", "status": "on_loan"},
        {"id": "B-002", "title": "Emma", "author": "Jane Austen", "status": "available"},
        {"id": "B-003", "title": "Beloved", "author": "Toni Morrison", "status": "on_loan"},
        {"id": "B-004", "title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "status": "available"},
        {"id": "B-005", "title": "Middlemarch", "author": "George Eliot", "status": "available"},
        {"id": "B-006", "title": "Kindred", "author": "Octavia E. Butler", "status": "available"},
        {"id": "B-007", "title": "The Dispossessed", "author": "Ursula K. Le Guin", "status": "available"},
        {"id": "B-008", "title": "Solaris", "author": "Stanislaw Lem", "status": "lost"},
    ],
    "loans": [
        {"id": "L-0001", "member_id": "M-001", "book_id": "B-001", "checked_out": "2025-02-24",
         "due": "2025-03-10", "returned": None, "fine": 0, "recorded_at": None},
        {"id": "L-0002", "member_id": "M-003", "book_id": "B-003", "checked_out": "2025-02-10",
         "due": "2025-02-24", "returned": None, "fine": 0, "recorded_at": None},
    ],
}

DOMAIN = Domain(
    "toy",
    schema=(HERE / "schema.sql").read_text(encoding="utf-8"),
    seed=SEED,
    policy=(HERE / "policy.md").read_text(encoding="utf-8"),
    unstable={"loans": ["recorded_at"]},
    now="2025-03-03T09:00:00Z",
    instructions="Riverside Library: members, books and loans.",
)


@DOMAIN.tool("Find a member by the email address on file.",
             params={"email": {**ID, "description": "The member's email address."}})
def find_member(db: Session, email: str) -> dict[str, Any]:
    member = db.one("SELECT * FROM members WHERE lower(email) = lower(?)", (email.strip(),))
    if member is None:
        raise ToolError(f"no member with email {email}")
    return member


@DOMAIN.tool("Search the catalogue by words of the title or the author's name.",
             params={"query": {**ID, "description": "Title or author words."}})
def search_books(db: Session, query: str) -> dict[str, Any]:
    like = f"%{query.strip().lower()}%"
    return {"books": db.all("SELECT * FROM books WHERE lower(title) LIKE ? OR lower(author) LIKE ? "
                            "ORDER BY id", (like, like))}


@DOMAIN.tool("List a member's loans (open ones only unless include_returned is true).",
             params={"member_id": {**ID, "description": "Member id, e.g. M-001."},
                     "include_returned": {"type": "boolean", "default": False}})
def list_loans(db: Session, member_id: str, include_returned: bool = False) -> dict[str, Any]:
    db.require("members", member_id, "member")
    sql = ("SELECT loans.*, books.title FROM loans JOIN books ON books.id = loans.book_id "
           "WHERE member_id = ?" + ("" if include_returned else " AND returned IS NULL") + " ORDER BY loans.id")
    return {"loans": db.all(sql, (member_id,))}


@DOMAIN.tool("Check a book out to a member for 14 days. Creates a loan.",
             params={"member_id": {**ID, "description": "Member id, e.g. M-001."},
                     "book_id": {**ID, "description": "Book id, e.g. B-002."}})
def checkout_book(db: Session, member_id: str, book_id: str) -> dict[str, Any]:
    member = db.require("members", member_id, "member")
    book = db.require("books", book_id, "book")
    if member["status"] != "active":
        raise ToolError(f"member {member_id} is {member['status']} and may not borrow")
    if member["fines_due"] >= FINE_LIMIT:
        raise ToolError(f"member {member_id} owes {member['fines_due']:.2f} in fines and may not borrow")
    open_loans = db.one("SELECT COUNT(*) AS n FROM loans WHERE member_id = ? AND returned IS NULL", (member_id,))
    if open_loans and open_loans["n"] >= MAX_LOANS:
        raise ToolError(f"member {member_id} already has {MAX_LOANS} books on loan")
    if book["status"] != "available":
        raise ToolError(f"book {book_id} is {book['status']}, not available")
    today = db.today
    loan = db.insert("loans", {
        "id": db.next_id("loans", "L-"), "member_id": member_id, "book_id": book_id,
        "checked_out": today.isoformat(), "due": (today + timedelta(days=LOAN_DAYS)).isoformat(),
        "returned": None, "fine": 0, "recorded_at": db.wall_clock(),
    })
    db.update("books", book_id, status="on_loan")
    return {"loan": loan}


@DOMAIN.tool("Record the return of a loaned book; a late return adds a fine of 0.25 per day late.",
             params={"loan_id": {**ID, "description": "Loan id, e.g. L-0001."}})
def return_book(db: Session, loan_id: str) -> dict[str, Any]:
    loan = db.require("loans", loan_id, "loan")
    if loan["returned"] is not None:
        raise ToolError(f"loan {loan_id} was already returned on {loan['returned']}")
    today = db.today
    fine = max(0, (today - date.fromisoformat(loan["due"])).days) * FINE_PER_DAY
    loan = db.update("loans", loan_id, returned=today.isoformat(), fine=fine)
    db.update("books", loan["book_id"], status="available")
    if fine:
        db.conn.execute("UPDATE members SET fines_due = fines_due + ? WHERE id = ?", (fine, loan["member_id"]))
    return {"loan": loan, "fine_added": fine}


@DOMAIN.tool("Correct a member's fines by a signed amount (negative reduces them). Policy limits its use.",
             params={"member_id": {**ID, "description": "Member id, e.g. M-001."},
                     "amount": {"type": "number", "description": "Signed amount to add to fines due."},
                     "reason": {**ID, "description": "Why the correction is made."}})
def adjust_fines(db: Session, member_id: str, amount: float, reason: str) -> dict[str, Any]:
    member = db.require("members", member_id, "member")
    # the CHECK (fines_due >= 0) constraint refuses a correction below zero
    return {"member": db.update("members", member_id, fines_due=member["fines_due"] + amount), "reason": reason}


create_server = DOMAIN.create_server
