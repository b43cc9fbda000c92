"""Caches of an open shard bounded by their entries and by the decompressed bytes they pin.

A zstd shard's record batches are decompressed memory, and a leaf view (or a column plan holding
views) keeps its whole batch alive while it is cached. A bound on the number of entries alone
let an open shard keep 1,024 image pieces decompressed (300 pieces of 51 frames of 84x84x4: RSS
+553 MiB for one pass of ``Dataset.steps``). Views into an uncompressed shard's memory map are
the OS page cache, and a Parquet shard holds its whole table while open anyway: neither counts.

A dataset's open shards share one :class:`ByteBudget` for both their caches; an array held by
entries of both (a plan holds the views the view cache holds) counts once.

Example:
    >>> budget = ByteBudget(100)
    >>> cache = BoundedCache(2, budget)
    >>> a, b = np.zeros(60, np.uint8), np.zeros(60, np.uint8)
    >>> cache.put("a", 1, [a])
    >>> cache.put("b", 2, [b])  # 120 bytes > 100: "a" is forgotten
    >>> cache.get("a"), cache.get("b"), len(cache), budget.nbytes
    (None, 2, 1, 60)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["BoundedCache", "ByteBudget", "pinned_arrays", "pinned_bytes", "plan_views"]


def pinned_arrays(shard: Any, views: Iterable[np.ndarray]) -> list[np.ndarray]:
    """The ``views`` outside ``shard``'s memory map (decompressed memory they pin).

    Example:
        >>> class Table: base = None  # a Parquet shard: nothing it holds counts
        >>> class Shard: parts = Table()
        >>> pinned_arrays(Shard(), [np.zeros(8)])
        []
    """
    base = shard.parts.base
    if base is None:
        return []
    end = base + shard.entry.data_size
    return [v for v in views if not base <= v.__array_interface__["data"][0] < end]


def pinned_bytes(shard: Any, views: Iterable[np.ndarray]) -> int:
    """The bytes of :func:`pinned_arrays`.

    Example:
        >>> class Table: base = 1 << 40  # a mapped shard far from this array
        >>> class Entry: data_size = 16
        >>> class Shard: parts, entry = Table(), Entry()
        >>> pinned_bytes(Shard(), [np.zeros(8)])
        64
    """
    return sum(view.nbytes for view in pinned_arrays(shard, views))


def plan_views(plans: dict[str, Any]) -> list[np.ndarray]:
    """Every leaf view held by a piece's column plans (extras included).

    Example:
        >>> class Column: views = [np.zeros(2)]
        >>> len(plan_views({"observations": Column(), "extra_model_outputs": {"vf": Column()}}))
        2
    """
    out: list[np.ndarray] = []
    for plan in plans.values():
        for column in plan.values() if isinstance(plan, dict) else (plan,):
            out.extend(column.views or ())
    return out


class ByteBudget:
    """Decompressed bytes that caches sharing this budget may keep alive, oldest out first.

    An array held by several entries counts once, until the last of them is forgotten.

    Example:
        >>> budget = ByteBudget(100)
        >>> views, plans = BoundedCache(10, budget), BoundedCache(10, budget)
        >>> a, b = np.zeros(60, np.uint8), np.zeros(60, np.uint8)
        >>> views.put("a", 1, [a]); plans.put("p", 0, [a])  # one array: 60 bytes
        >>> budget.nbytes
        60
        >>> plans.put("b", 2, [b])  # 120 bytes > 100: the oldest entries go till a is free
        >>> views.get("a"), plans.get("p"), plans.get("b"), budget.nbytes
        (None, None, 2, 60)
    """

    __slots__ = ("_arrays", "_held", "max_bytes", "nbytes")

    def __init__(self, max_bytes: int):
        self._held: dict[tuple[BoundedCache, Any], list[np.ndarray]] = {}  # oldest first
        self._arrays: dict[int, list[int]] = {}  # id of a held array: [its bytes, its holders]
        self.max_bytes = max_bytes
        self.nbytes = 0

    def hold(self, cache: BoundedCache, key: Any, arrays: list[np.ndarray]) -> None:
        """Counts ``cache``'s entry ``key``; forgets the oldest entries while over budget."""
        self._held[cache, key] = arrays  # held here too: an id stays this array's while counted
        for array in arrays:
            count = self._arrays.get(id(array))
            if count is None:
                self._arrays[id(array)] = [array.nbytes, 1]
                self.nbytes += array.nbytes
            else:
                count[1] += 1
        while self.nbytes > self.max_bytes and self._held:
            owner, old = next(iter(self._held))
            self.release(owner, old)
            owner._entries.pop(old, None)

    def release(self, cache: BoundedCache, key: Any) -> None:
        """Stops counting ``cache``'s entry ``key`` (it was forgotten)."""
        for array in self._held.pop((cache, key), ()):
            count = self._arrays[id(array)]
            count[1] -= 1
            if not count[1]:
                del self._arrays[id(array)]
                self.nbytes -= count[0]


class BoundedCache:
    """A cache forgetting its oldest entry past ``limit``, and those its ``budget`` asks for.

    Example:
        >>> cache = BoundedCache(1, ByteBudget(10))
        >>> cache.put(1, "x")
        >>> cache.put(2, "y")
        >>> cache.get(1), cache.get(2), len(cache)
        (None, 'y', 1)
    """

    __slots__ = ("_entries", "budget", "limit")

    def __init__(self, limit: int, budget: ByteBudget):
        self._entries: dict[Any, Any] = {}  # dicts keep order: oldest first
        self.limit = limit
        self.budget = budget

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any) -> Any:
        """The value kept under ``key``, or None."""
        return self._entries.get(key)

    def put(self, key: Any, value: Any, pinned: list[np.ndarray] | None = None) -> None:
        """Keeps ``value`` (pinning ``pinned``), forgetting the oldest entries past the bounds."""
        self.forget(key)
        if pinned and sum(a.nbytes for a in pinned) > self.budget.max_bytes:
            return  # it would push every other entry out, and then itself
        self._entries[key] = value
        if len(self._entries) > self.limit:
            self.forget(next(iter(self._entries)))
        if pinned:
            self.budget.hold(self, key, pinned)

    def forget(self, key: Any) -> None:
        """Drops ``key``'s entry, if kept."""
        if self._entries.pop(key, None) is not None:
            self.budget.release(self, key)

    def clear(self) -> None:
        """Drops every entry (a closed shard's: they pin memory no read can reach again)."""
        for key in list(self._entries):
            self.forget(key)
