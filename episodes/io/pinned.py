"""Caches of an open shard bounded by their entries and by the decompressed bytes they pin.

A zstd shard's record batches are decompressed memory, and a leaf view (or a column plan holding
views) keeps its whole batch alive while it is cached. A bound on the number of entries alone
let an open shard keep 1,024 image pieces decompressed (300 pieces of 51 frames of 84x84x4: RSS
+553 MiB for one pass of ``Dataset.steps``). Views into an uncompressed shard's memory map are
the OS page cache, and a Parquet shard holds its whole table while open anyway: neither counts.

A dataset's open shards share one :class:`ByteBudget` for both their caches.

Example:
    >>> budget = ByteBudget(100)
    >>> cache = BoundedCache(2, budget)
    >>> cache.put("a", 1, 60)
    >>> cache.put("b", 2, 60)  # 120 bytes > 100: "a" is forgotten
    >>> cache.get("a"), cache.get("b"), len(cache), budget.nbytes
    (None, 2, 1, 60)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["BoundedCache", "ByteBudget", "pinned_bytes", "plan_views"]


def pinned_bytes(shard: Any, views: Iterable[np.ndarray]) -> int:
    """The bytes of ``views`` outside ``shard``'s memory map (decompressed memory they pin).

    Example:
        >>> class Table: base = None  # a Parquet shard: nothing it holds counts
        >>> class Shard: parts = Table()
        >>> pinned_bytes(Shard(), [np.zeros(8)])
        0
    """
    base = shard.parts.base
    if base is None:
        return 0
    end = base + shard.entry.data_size
    out = 0
    for view in views:
        start = view.__array_interface__["data"][0]
        if not base <= start < end:
            out += view.nbytes
    return out


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

    A dataset's open shards share one: shards that are closed have their entries forgotten as
    later ones come in, without a hook of their own.

    Example:
        >>> budget = ByteBudget(100)
        >>> views, plans = BoundedCache(10, budget), BoundedCache(10, budget)
        >>> views.put("a", 1, 60)
        >>> plans.put("b", 2, 60)  # 120 bytes > 100: the oldest entry of either goes
        >>> views.get("a"), plans.get("b"), budget.nbytes
        (None, 2, 60)
    """

    __slots__ = ("_held", "max_bytes", "nbytes")

    def __init__(self, max_bytes: int):
        self._held: dict[tuple[BoundedCache, Any], int] = {}  # oldest first
        self.max_bytes = max_bytes
        self.nbytes = 0

    def hold(self, cache: BoundedCache, key: Any, nbytes: int) -> None:
        """Counts ``cache``'s entry ``key``; forgets the oldest entries while over budget."""
        self._held[cache, key] = nbytes
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes:
            owner, old = next(iter(self._held))
            self.release(owner, old)
            owner._entries.pop(old, None)

    def release(self, cache: BoundedCache, key: Any) -> None:
        """Stops counting ``cache``'s entry ``key`` (it was forgotten)."""
        self.nbytes -= self._held.pop((cache, key), 0)


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

    def put(self, key: Any, value: Any, nbytes: int = 0) -> None:
        """Keeps ``value`` (pinning ``nbytes``), forgetting the oldest entries past the bounds."""
        self.forget(key)
        if nbytes > self.budget.max_bytes:
            return  # it would push every other entry out, and then itself
        self._entries[key] = value
        if len(self._entries) > self.limit:
            self.forget(next(iter(self._entries)))
        if nbytes:
            self.budget.hold(self, key, nbytes)

    def forget(self, key: Any) -> None:
        """Drops ``key``'s entry, if kept."""
        if self._entries.pop(key, None) is not None:
            self.budget.release(self, key)
