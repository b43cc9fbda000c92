"""Per-episode records: ids, flags, time range, slot range, latest observation and metadata."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from episodes.replay.columns import Column
from episodes.replay.metadata import EpisodeMeta

__all__ = ["EpisodeTable"]


class EpisodeTable:
    """One row per stored episode, in numpy arrays so sampled slots look their episode up in bulk.

    ``final_obs[row]`` is the episode's latest observation ``o_{t_end}``: the next observation
    of its last stored step (the true final observation once the episode is done). Rows of
    evicted episodes are reused. ``order`` keeps episode ids in first-add order (the eviction
    order), and :meth:`rows_by_age` their rows in that order as an array, so that a draw among
    the stored episodes depends on their order only, not on which rows they happen to hold
    (a restored buffer holds them in other rows). ``meta[row]`` is the episode's
    :class:`~episodes.replay.metadata.EpisodeMeta` (``custom_data``, ids, clocks), or None.

    Example:
        >>> table = EpisodeTable()
        >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 2)), final_info={})
        >>> int(table.t_end[row]), table.order["a"] == row
        (0, True)
    """

    def __init__(self) -> None:
        self.order: OrderedDict[str, int] = OrderedDict()
        self.size = 0
        self.free: list[int] = []
        self.final_obs: Column | None = None
        self.final_info = np.empty(0, object)
        self.terminated = np.zeros(0, bool)
        self.truncated = np.zeros(0, bool)
        self.t_begin = np.zeros(0, np.int64)
        self.t_end = np.zeros(0, np.int64)
        self.first_slot = np.zeros(0, np.int64)
        self.last_slot = np.zeros(0, np.int64)
        self.ids = np.empty(0, object)
        self.meta = np.empty(0, object)
        # The rows of ``order`` in its order sit at ``_by_age[_head : _head + len(order)]``.
        self._by_age = np.zeros(0, np.int64)
        self._head = 0

    def __len__(self) -> int:
        return len(self.order)

    def rows_by_age(self) -> np.ndarray:
        """The rows of the stored episodes, oldest first (as ``order``); a read-only view.

        Example:
            >>> table = EpisodeTable()
            >>> for id_ in "abc":
            ...     _ = table.open(id_, t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> _ = table.close("a"); table.open("d", t_begin=0, final_obs=np.zeros((1, 1)),
            ...                                  final_info={})  # "a"'s row is reused
            0
            >>> table.rows_by_age().tolist(), list(table.order.values())
            ([1, 2, 0], [1, 2, 0])
        """
        view = self._by_age[self._head : self._head + len(self.order)]
        view.flags.writeable = False
        return view

    def lengths(self, rows: np.ndarray) -> np.ndarray:
        """Stored steps of the given rows.

        Example:
            >>> table = EpisodeTable()
            >>> row = table.open("a", t_begin=3, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.t_end[row] = 7
            >>> table.lengths(np.array([row])).tolist()
            [4]
        """
        return self.t_end[rows] - self.t_begin[rows]

    def open(
        self,
        id_: str,
        *,
        t_begin: int,
        final_obs: np.ndarray,
        final_info: Any,
        meta: EpisodeMeta | None = None,
    ) -> int:
        """Registers a new episode with no steps yet; returns its row.

        Example:
            >>> table = EpisodeTable()
            >>> [table.open(i, t_begin=0, final_obs=np.zeros((1, 2)), final_info={}) for i in "ab"]
            [0, 1]
            >>> len(table), table.size, int(table.first_slot[0])  # 16 rows allocated, no slots
            (2, 16, -1)
        """
        if not self.free:
            self._grow(max(2 * self.size, 16), final_obs)
        row = self.free.pop()
        count = len(self.order)
        if self._head + count == len(self._by_age):  # full at the back: shift or grow
            kept = self._by_age[self._head : self._head + count]
            if 2 * count >= len(self._by_age):  # over half full: O(1) amortized per open
                self._by_age = np.zeros(max(2 * len(self._by_age), 16), np.int64)
            self._by_age[:count] = kept.copy()
            self._head = 0
        self._by_age[self._head + count] = row
        self.order[id_] = row
        self.ids[row] = id_
        self.meta[row] = meta
        self.t_begin[row] = self.t_end[row] = t_begin
        self.first_slot[row] = self.last_slot[row] = -1
        self.terminated[row] = self.truncated[row] = False
        self.set_final(row, final_obs, final_info)
        return row

    def set_final(self, row: int, final_obs: np.ndarray, final_info: Any) -> None:
        """Stores the latest observation (``final_obs`` has one row) and its info.

        Example:
            >>> table = EpisodeTable()
            >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 2)), final_info={})
            >>> table.set_final(row, np.array([[1.0, 2.0]]), {"done": True})
            >>> table.final_obs.data[row].tolist(), table.final_info[row]
            ([1.0, 2.0], {'done': True})
        """
        assert self.final_obs is not None
        self.final_obs.data[row] = final_obs[0]
        self.final_info[row] = final_info

    def close(self, id_: str) -> int:
        """Forgets an episode (eviction); returns the freed row.

        Example:
            >>> table = EpisodeTable()
            >>> for id_ in "ab":
            ...     _ = table.open(id_, t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.close("a"), list(table.order)
            (0, ['b'])
            >>> table.open("c", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})  # reused
            0
        """
        row = self.order.pop(id_)
        count = len(self.order)  # after the pop
        if self._by_age[self._head] == row:  # the oldest: how the buffers evict
            self._head += 1
        else:  # any other row: the younger ones move up by one
            ages = self._by_age[self._head : self._head + count + 1]
            at = int(np.flatnonzero(ages == row)[0])
            ages[at:-1] = ages[at + 1 :].copy()
        self.ids[row] = None
        self.meta[row] = None  # an evicted episode's metadata goes with it
        self.final_info[row] = None
        self.free.append(row)
        return row

    def remap_slots(self, remap: np.ndarray) -> None:
        """Applies a store compaction's old -> new slot map to every live row.

        Example:
            >>> table = EpisodeTable()
            >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.first_slot[row], table.last_slot[row] = 2, 5
            >>> table.remap_slots(np.array([-1, -1, 0, 1, 2, 3, -1]))
            >>> int(table.first_slot[row]), int(table.last_slot[row])
            (0, 3)
        """
        rows = np.fromiter(self.order.values(), np.int64, len(self.order))
        self.first_slot[rows] = remap[self.first_slot[rows]]
        self.last_slot[rows] = remap[self.last_slot[rows]]

    def _grow(self, size: int, example: np.ndarray) -> None:
        if self.final_obs is None:
            self.final_obs = Column(size, example)
        else:
            self.final_obs.resize(size)
        for name in ("final_info", "ids", "meta"):
            new = np.empty(size, object)
            new[: self.size] = getattr(self, name)
            setattr(self, name, new)
        for name in (
            "terminated",
            "truncated",
            "t_begin",
            "t_end",
            "first_slot",
            "last_slot",
        ):
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: self.size] = old
            setattr(self, name, new)
        self.free.extend(range(size - 1, self.size - 1, -1))
        self.size = size
