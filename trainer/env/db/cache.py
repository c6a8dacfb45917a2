"""Values computed once per key: golden end states, patched snapshots, search indexes.

`golden_key(*parts)` is a SHA-256 over the canonical JSON of its parts (domain, seed fingerprint,
data_patch, golden actions); `ComputeCache` holds values by such keys (LRU-bounded, thread-safe).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Callable

from trainer.env.db.backend import canonical_json


def golden_key(*parts: Any) -> str:
    """Cache key over JSON-able parts (domain, seed fingerprint, data_patch, golden actions)."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


class ComputeCache:
    """Values by key, computed once (LRU-bounded, thread-safe): golden states, patched snapshots.

    `compute` runs outside the lock: two threads may compute the same key once each, and the
    results are equal by construction (a replay is deterministic), so the first stored wins.
    """

    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
        value = compute()
        with self._lock:
            value = self._items.setdefault(key, value)
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


__all__ = ["ComputeCache", "golden_key"]
