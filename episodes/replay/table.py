"""Per-episode records: ids, flags, time range, slot range, latest observation and metadata."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
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

    def open_reserved(self, ids: list[Any]) -> np.ndarray:
        """Registers new episodes, the youngest last, in rows :meth:`reserve` made room for.

        Returns their rows, the ones ``len(ids)`` calls of :meth:`open` would take. Only the
        ids, their order and the rows are set (``meta`` and ``final_info`` None): the time and
        slot ranges, flags and latest observations are the caller's to fill, in bulk.

        Example:
            >>> table = EpisodeTable()
            >>> table.reserve(2, np.zeros((1, 1)))
            >>> table.open_reserved(["a", "b"]).tolist(), list(table.order.values())
            ([0, 1], [0, 1])
        """
        k, held = len(ids), len(self.order)
        if k > len(self.free) or self._head + held + k > len(self._by_age):
            raise ValueError(f"no room reserved for {k} more episodes: call reserve({k}) first")
        rows = np.array(self.free[len(self.free) - k :][::-1], np.int64)  # as k pops take them
        del self.free[len(self.free) - k :]
        self._by_age[self._head + held : self._head + held + k] = rows
        self.order.update(zip(ids, rows.tolist()))
        self.ids[rows] = np.fromiter(ids, object, k)
        self.meta[rows] = None
        self.final_info[rows] = None
        return rows

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

    def join_meta(self, row: int, meta: EpisodeMeta | None) -> None:
        """Joins a continuing chunk's metadata into the episode's (``EpisodeMeta.join``).

        Example:
            >>> table = EpisodeTable()
            >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.join_meta(row, None)
            >>> table.meta[row] is None  # nothing to join: nothing made
            True
        """
        if meta is None:
            return
        if self.meta[row] is None:
            self.meta[row] = EpisodeMeta(None, None, None, None, None, None)
        self.meta[row].join(meta)

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

    def close_oldest(self, count: int) -> np.ndarray:
        """Forgets the ``count`` oldest episodes at once; returns their rows, oldest first.

        The same as :meth:`close` of each, oldest first (the rows are freed in that order),
        without a search per episode: how ``add_rollouts`` evicts many.

        Example:
            >>> table = EpisodeTable()
            >>> for id_ in "abc":
            ...     _ = table.open(id_, t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.close_oldest(2).tolist(), list(table.order), table.free[-2:]
            ([0, 1], ['c'], [0, 1])
        """
        if not 0 <= count <= len(self.order):
            raise ValueError(f"count must be from 0 to {len(self.order)} (stored), got {count}")
        rows = self._by_age[self._head : self._head + count].copy()
        for _ in range(count):
            self.order.popitem(last=False)
        self._head += count
        self.ids[rows] = self.meta[rows] = self.final_info[rows] = None
        self.free.extend(rows.tolist())
        return rows

    def remapped_slots(self, remap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New ``first_slot`` and ``last_slot`` arrays after a compaction's old -> new slot map.

        Made aside (the table is unchanged), so that a compaction can swap them in at once.

        Example:
            >>> table = EpisodeTable()
            >>> row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
            >>> table.first_slot[row], table.last_slot[row] = 2, 5
            >>> first, last = table.remapped_slots(np.array([-1, -1, 0, 1, 2, 3, -1]))
            >>> int(first[row]), int(last[row]), int(table.first_slot[row])
            (0, 3, 2)
        """
        rows = np.fromiter(self.order.values(), np.int64, len(self.order))
        first, last = self.first_slot.copy(), self.last_slot.copy()
        first[rows], last[rows] = remap[first[rows]], remap[last[rows]]
        return first, last

    def reserve(self, count: int, example: np.ndarray) -> None:
        """Makes room for ``count`` more episodes, so that opening them allocates nothing.

        ``example`` is an observation row (``final_obs``'s layout, should none exist yet).

        Example:
            >>> table = EpisodeTable()
            >>> table.reserve(20, np.zeros((1, 2)))
            >>> table.size, len(table.free)
            (32, 32)
        """
        size = self.size
        while len(self.free) + size - self.size < count:  # doubling, as open() one at a time
            size = max(2 * size, 16)
        if size > self.size:
            self._grow(size, example)
        held = len(self.order)
        if self._head + held + count > len(self._by_age):  # as open() would shift or grow
            size = len(self._by_age)  # kept while at most half full: the window shifts down
            if 2 * (held + count) > size:
                size = max(2 * size, 16, held + count)
            by_age = np.zeros(size, np.int64)
            by_age[:held] = self._by_age[self._head : self._head + held]
            self._by_age, self._head = by_age, 0

    def _grow(self, size: int, example: np.ndarray) -> None:
        # Every array is made before any is replaced: an interrupted growth changes nothing.
        if self.final_obs is None:
            final_obs = Column(size, example)
        else:
            final_obs = Column(size, self.final_obs.data[:1])
            final_obs.data[: self.size] = self.final_obs.data[: self.size]
        made: dict[str, np.ndarray] = {}
        for name in ("final_info", "ids", "meta"):
            made[name] = np.empty(size, object)
            made[name][: self.size] = getattr(self, name)
        for name in ("terminated", "truncated", "t_begin", "t_end", "first_slot", "last_slot"):
            old = getattr(self, name)
            made[name] = np.zeros(size, old.dtype)
            made[name][: self.size] = old
        free = self.free + list(range(size - 1, self.size - 1, -1))
        # One statement of plain stores: no signal falls between them (CPython checks at calls).
        (
            self.final_info,
            self.ids,
            self.meta,
            self.terminated,
            self.truncated,
            self.t_begin,
            self.t_end,
            self.first_slot,
            self.last_slot,
            self.final_obs,
            self.free,
            self.size,
        ) = (*made.values(), final_obs, free, size)


class StoredEpisodes(Mapping[str, tuple[int, bool, int, np.ndarray]]):
    """Stored episode id -> (t_end, done, length, latest observation), read on demand.

    Example:
        >>> table = EpisodeTable()
        >>> row = table.open("a", t_begin=2, final_obs=np.ones((1, 1)), final_info={})
        >>> t_end, done, length, obs = StoredEpisodes(table)["a"]
        >>> t_end, done, length, obs.tolist(), "b" in StoredEpisodes(table)
        (2, False, 0, [1.0], False)
    """

    def __init__(self, table: EpisodeTable):
        self._table = table

    def __getitem__(self, id_: str) -> tuple[int, bool, int, np.ndarray]:
        row = self._table.order[id_]
        t = self._table
        assert t.final_obs is not None  # an episode is stored, so its observation is
        done = bool(t.terminated[row] or t.truncated[row])
        return int(t.t_end[row]), done, int(t.t_end[row] - t.t_begin[row]), t.final_obs.data[row]

    def __contains__(self, id_: object) -> bool:
        # Mapping's own test reads the entry, and raises and catches a KeyError for every new id.
        return id_ in self._table.order

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.order)

    def __len__(self) -> int:
        return len(self._table.order)
