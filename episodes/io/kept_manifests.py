"""The per-process cache of parsed manifest prefixes both formats' readers keep.

A bounded map, most recently used last, behind a :class:`~episodes.io.fork_lock.ForkLock`
(a forked child gets a fresh lock): :mod:`episodes.io.manifest_prefix` (v2) and
:mod:`episodes.io.v1_manifest` keep what they parsed of a manifest in one, keyed by its path.

Example:
    >>> kept = KeptManifests[str](2)
    >>> kept.put("a", "A"); kept.put("b", "B"); _ = kept.get("a"); kept.put("c", "C")
    >>> kept.get("b") is None, kept.get("a"), kept.get("c")  # "b" was the least recent
    (True, 'A', 'C')
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from episodes.io.fork_lock import ForkLock

__all__ = ["KeptManifests"]

T = TypeVar("T")


class KeptManifests(Generic[T]):
    """At most ``max_kept`` values by key; a read or a write makes a key the most recent."""

    def __init__(self, max_kept: int) -> None:
        self.max_kept = max_kept
        self._kept: OrderedDict[str, T] = OrderedDict()
        self._lock = ForkLock()

    def get(self, key: str) -> T | None:
        """The value kept for ``key`` (now the most recent), or None."""
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def peek(self, key: str) -> T | None:
        """The value kept for ``key``, or None, leaving the order as it is."""
        with self._lock:
            return self._kept.get(key)

    def put(self, key: str, value: T) -> None:
        """Keeps ``value`` for ``key``, dropping the least recent keys beyond ``max_kept``."""
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_kept:
                self._kept.popitem(last=False)

    def drop(self, key: str | None = None) -> None:
        """Drops ``key``'s value (every value when None)."""
        with self._lock:
            if key is None:
                self._kept.clear()
            else:
                self._kept.pop(key, None)
