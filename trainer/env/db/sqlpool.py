"""Idle SQLite session connections kept for reuse (the backend's pool; trainer/env/db/backend.py)."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from typing import Protocol


class Snapshot(Protocol):
    """What the pool needs of a snapshot (trainer/env/db/backend.py's `Snapshot`): its database
    bytes and the list of idle connections at its state."""

    data: bytes
    idle_connections: list[sqlite3.Connection]


class ConnectionPool:
    """Idle session connections, each holding its snapshot's exact state, bounded by bytes.

    Opening a deserialized copy is cheap, but its first statement parses the whole schema (tables,
    indexes, the change log's triggers: ~0.3-0.7 ms on a 15-table domain). A session therefore
    runs inside one transaction on its connection (`BEGIN` at open), and closing it rolls the
    transaction back: the connection is again an exact copy of the snapshot, schema already parsed,
    and serves the next session of the same snapshot. A connection still owned by a session is
    never shared; one whose transaction was ended by someone else is closed, not pooled. The
    least recently returned connections are closed when the pool holds more than `budget_bytes`
    of databases (`TBT_POOL_MB`, default 256).
    """

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._idle: OrderedDict[int, tuple[Snapshot, sqlite3.Connection]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.reused = 0
        self.created = 0

    def take(self, snapshot: Snapshot) -> sqlite3.Connection | None:
        with self._lock:
            while snapshot.idle_connections:
                conn = snapshot.idle_connections.pop()
                if self._idle.pop(id(conn), None) is not None:
                    self._bytes -= len(snapshot.data)
                    self.reused += 1
                    return conn
            self.created += 1
            return None

    def give(self, snapshot: Snapshot, conn: sqlite3.Connection) -> None:
        size = len(snapshot.data)
        evicted = []
        with self._lock:
            snapshot.idle_connections.append(conn)
            self._idle[id(conn)] = (snapshot, conn)
            self._bytes += size
            while self._bytes > self.budget_bytes and self._idle:
                _, (snap, old) = self._idle.popitem(last=False)
                snap.idle_connections.remove(old)
                self._bytes -= len(snap.data)
                evicted.append(old)
        for old in evicted:
            old.close()

    def clear(self) -> None:
        with self._lock:
            items, self._idle, self._bytes = list(self._idle.values()), OrderedDict(), 0
            for snap, _ in items:
                snap.idle_connections.clear()
        for _, conn in items:
            conn.close()

    @property
    def idle(self) -> int:
        return len(self._idle)


__all__ = ["ConnectionPool", "Snapshot"]
