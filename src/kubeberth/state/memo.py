"""A memo keyed by pod shape that forgets everything at its limit.

Pods of a workload share a handful of request shapes, so per-shape work (request vectors,
Filter's checks, kernel plans) is kept in a dict; a workload with unboundedly many shapes must
not grow it without end. Clearing at the limit costs nothing on the hot path, where an LRU's
bookkeeping would cost on every hit; lookups stay plain ``dict.get`` calls.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ShapeMemo(dict[K, V]):
    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` (emptying the memo first when it is full)."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
