"""Per-step storage: contiguous columns, appended at the end, compacted when full.

Every stored transition ``(o_t, a_t, r_{t+1}, extras_t)`` is one row ("slot"). The rows of one
episode are in increasing slot order but need not be adjacent: chunks of several episodes
arrive interleaved. ``nxt``/``prv`` link each slot to its episode's next and previous slot (-1
at the ends), so a walk along an episode is one vectorized gather per step, and a walk over
adjacent slots (the usual case) is checked in one go. Evicted rows are only marked dead; once
dead rows outnumber live ones, or the end is reached with at least an eighth of the rows dead,
the live rows move to the front in order (at the end with fewer dead, the columns grow by
half instead, but with the owner's ``capacity`` known not past ``grown_size``'s bound, about
8/7 of it plus one add for adds small against it: there, compaction comes first). That keeps
slot order equal to add order and costs O(1) per added step amortized: a compaction moves at
most seven rows for each row it frees, and the freed rows are added ones.

Interrupted work (``KeyboardInterrupt``, ``MemoryError``, any exception) leaves the store as it
was or as it would be after the work, never in between: a compaction first builds the new
links, times and ids aside, then moves the data rows column by column, counting what it moved,
undoes the moves (:func:`~episodes.replay.columns.move_back`) if anything raises before they
are done, and only then swaps the new arrays in; a growth replaces each array by a longer copy
and sets ``size`` last, so arrays longer than ``size`` hold nothing that is read. An interrupt
during an undo itself is not guarded.
"""

from __future__ import annotations

import copy
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from episodes.replay.columns import Column, move_back, move_to_front
from episodes.replay.nested import put_rows, raw_rows

__all__ = ["StepStore", "all_empty_infos", "fresh_info_list", "fresh_infos"]

_MIN_SIZE = 64
# At the end of the columns, a compaction needs at least 1/_FREED of the rows dead.
_FREED = 8
_EMPTY_KINDS = frozenset({dict, type(None)})


class StepStore:
    """Columns of steps plus the links that thread them into episodes.

    Example:
        >>> store = StepStore()
        >>> rows = {"obs": np.zeros((3, 2)), "actions": np.arange(3), "rewards": np.ones(3)}
        >>> store.reserve(3)
        >>> store.append(rows, {}, [{}] * 3, ep_row=0, t0=5, prev_slot=-1).tolist()
        [0, 1, 2]
        >>> store.nxt[:3].tolist(), store.t[:3].tolist()
        ([1, 2, -1], [5, 6, 7])
    """

    def __init__(self) -> None:
        self.size = 0
        self.end = 0
        self.num_live = 0
        self.next_uid = 0
        self.moves = 0  # compactions so far: slots remembered across one are stale
        # The owner's capacity in steps, if it has one (it bounds growth); None: grows by half.
        self.capacity: int | None = None
        self.obs: Column | None = None
        self.actions: Column | None = None
        self.rewards = np.zeros(0, np.float32)
        self.extras: dict[str, Column] = {}
        self.infos = np.empty(0, object)
        self.live = np.zeros(0, bool)
        self.ep = np.zeros(0, np.int64)
        self.t = np.zeros(0, np.int64)
        self.nxt = np.zeros(0, np.int64)
        self.prv = np.zeros(0, np.int64)
        self.uid = np.zeros(0, np.int64)

    # ------------------------------------------------------------------------------ checks
    def fit_rows(
        self, obs: np.ndarray, actions: np.ndarray, extras: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """A chunk's observations (all ``n + 1``), actions and extras in the columns' dtypes.

        Raises:
            ValueError: Rows that do not fit the columns fixed by earlier writes (another
                shape or kind, or values their dtype cannot hold), or other extra keys.

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((2, 3)), "actions": np.arange(2), "rewards": np.ones(2)}
            >>> store.reserve(2)
            >>> _ = store.append(rows, {}, [{}] * 2, ep_row=0, t0=0, prev_slot=-1)
            >>> obs, _, _ = store.fit_rows(np.zeros((3, 3), np.float32), np.arange(2), {})
            >>> obs.dtype  # float32 rows into the float64 column
            dtype('float64')
            >>> store.fit_rows(np.zeros((3, 3)), np.arange(2), {"logp": np.zeros(2)})
            Traceback (most recent call last):
            ...
            ValueError: extra_model_outputs keys ['logp'] differ from the buffer's []
        """
        if self.obs is None or self.actions is None:
            return obs, actions, extras
        obs = self.obs.fit(obs, "observations")
        actions = self.actions.fit(actions, "actions")
        if set(extras) != set(self.extras):
            raise ValueError(
                f"extra_model_outputs keys {sorted(extras)} differ from the buffer's "
                f"{sorted(self.extras)}"
            )
        fitted = {
            key: self.extras[key].fit(values, f"extra_model_outputs[{key!r}]")
            for key, values in extras.items()
        }
        return obs, actions, fitted

    # ------------------------------------------------------------------------------ writes
    def append(
        self,
        rows: dict[str, np.ndarray],
        extras: dict[str, np.ndarray],
        infos: list[Any] | None,
        *,
        ep_row: int,
        t0: int,
        prev_slot: int,
    ) -> np.ndarray:
        """Writes ``n`` steps of one episode at the end; returns their slots.

        ``prev_slot`` is the episode's last slot so far (-1 for a new episode); it is linked to
        the first new slot. Call :meth:`fit_rows` and :meth:`reserve` first: this method
        does not validate. ``infos`` holds one info per step (None or ``{}`` for an empty
        one), or is None when every one is empty.

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((2, 1)), "actions": np.arange(2), "rewards": np.ones(2)}
            >>> store.reserve(4)
            >>> first = store.append(rows, {}, [{}] * 2, ep_row=0, t0=0, prev_slot=-1)
            >>> store.append(rows, {}, [{}] * 2, ep_row=0, t0=2, prev_slot=int(first[-1])).tolist()
            [2, 3]
            >>> store.prv[:4].tolist(), store.t[:4].tolist()
            ([-1, 0, 1, 2], [0, 1, 2, 3])
        """
        return self.append_many(
            [(rows, extras, infos)], np.array([ep_row]), np.array([t0]), np.array([prev_slot])
        )

    def append_many(
        self,
        parts: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[Any] | None]],
        ep_rows: np.ndarray,
        t0s: np.ndarray,
        prev_slots: np.ndarray,
    ) -> np.ndarray:
        """Writes several chunks back to back at the end; returns all their slots.

        Data columns take one slice copy per chunk; the links, times and ids are written for
        all chunks at once. ``prev_slots[i]`` is the slot chunk ``i`` continues (-1: none); it
        may be the last slot of an earlier chunk of the same call.

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((2, 1)), "actions": np.arange(2), "rewards": np.ones(2)}
            >>> store.reserve(6)
            >>> ep_rows, t0s, prev = np.array([0, 1, 0]), np.array([0, 0, 2]), np.array([-1, -1, 1])
            >>> store.append_many([(rows, {}, [{}] * 2)] * 3, ep_rows, t0s, prev).tolist()
            [0, 1, 2, 3, 4, 5]
            >>> store.nxt[:6].tolist(), store.t[:6].tolist()  # episode 0: slots 0, 1, 4, 5
            ([1, 4, 3, -1, 5, -1], [0, 1, 0, 1, 2, 3])
        """
        lengths = np.array([len(p[0]["rewards"]) for p in parts], np.int64)
        total = int(lengths.sum())
        if self.end + total > self.size:
            raise AssertionError("call reserve() before append()")
        self.init_columns(parts[0][0]["obs"], parts[0][0]["actions"], parts[0][1])
        assert self.obs is not None and self.actions is not None
        starts = self.end + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        column, acts = self.obs.data, self.actions.data
        window = slice(self.end, self.end + total)
        if len(parts) > 1 and _put_joined(self, parts, window):
            pass  # many chunks of plain rows (tiny rollouts): one copy a column
        else:
            for (rows, extras, _), a, n in zip(parts, starts.tolist(), lengths.tolist()):
                # Records (nested values) are written as bytes: numpy moves them field by field.
                put_rows(column, slice(a, a + n), rows["obs"])
                put_rows(acts, slice(a, a + n), rows["actions"])
                self.rewards[a : a + n] = rows["rewards"]
                for key, values in extras.items():
                    put_rows(self.extras[key].data, slice(a, a + n), values)
        for (_, _, infos), a, n in zip(parts, starts.tolist(), lengths.tolist()):
            # Empty infos (the common case; None: known empty) stay None: no per-step work.
            if infos is not None and not all_empty_infos(infos):
                self.infos[a : a + n] = _object_rows(infos)
        slots = np.arange(self.end, self.end + total)
        self.live[window] = True
        self.ep[window] = np.repeat(ep_rows, lengths)
        self.t[window] = np.repeat(np.asarray(t0s) - starts, lengths) + slots
        nxt, prv = slots + 1, slots - 1
        nxt[starts + lengths - 1 - self.end] = -1
        prv[starts - self.end] = prev_slots
        self.nxt[window], self.prv[window] = nxt, prv
        linked = prev_slots >= 0
        self.nxt[prev_slots[linked]] = starts[linked]
        self.uid[window] = np.arange(self.next_uid, self.next_uid + total)
        self.next_uid += total
        self.end += total
        self.num_live += total
        return slots

    def read_infos(self, slots: np.ndarray) -> np.ndarray:
        """The infos of slots as an object array (None for an empty one).

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((2, 1)), "actions": np.arange(2), "rewards": np.ones(2)}
            >>> store.reserve(4)
            >>> _ = store.append(rows, {}, [{}, {}], ep_row=0, t0=0, prev_slot=-1)
            >>> _ = store.append(rows, {}, [{"k": 1}, {}], ep_row=1, t0=0, prev_slot=-1)
            >>> store.read_infos(np.arange(4)).tolist()
            [None, None, {'k': 1}, {}]
        """
        return self.infos[slots]

    def kill(self, slots: np.ndarray) -> None:
        """Marks slots dead (eviction); their rows stay until the next compaction.

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((3, 1)), "actions": np.arange(3), "rewards": np.ones(3)}
            >>> store.reserve(3)
            >>> _ = store.append(rows, {}, [{}] * 3, ep_row=0, t0=0, prev_slot=-1)
            >>> store.kill(np.array([0, 1]))
            >>> store.num_live, store.end, store.live[:3].tolist()
            (1, 3, [False, False, True])
        """
        self.live[slots] = False
        self.num_live -= len(slots)

    def needs_compaction(self) -> bool:
        """Whether dead rows outnumber live ones and 64 (rejection sampling stays cheap below).

        Example:
            >>> store = StepStore()
            >>> zeros = np.zeros(100)
            >>> rows = {"obs": zeros[:, None], "actions": zeros, "rewards": zeros}
            >>> store.reserve(100)
            >>> _ = store.append(rows, {}, [{}] * 100, ep_row=0, t0=0, prev_slot=-1)
            >>> store.kill(np.arange(50))
            >>> store.needs_compaction()  # 50 dead, 50 live
            False
            >>> store.kill(np.arange(50, 90))
            >>> store.needs_compaction()  # 90 dead, 10 live
            True
        """
        return self.end - self.num_live > max(self.num_live, _MIN_SIZE)

    def compaction_map(self) -> np.ndarray:
        """What :meth:`compact` would return, moving nothing: old slot -> new slot (-1 dead).

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((3, 1)), "actions": np.arange(3), "rewards": np.ones(3)}
            >>> store.reserve(3)
            >>> _ = store.append(rows, {}, [{}] * 3, ep_row=0, t0=0, prev_slot=-1)
            >>> store.kill(np.array([0]))
            >>> store.compaction_map().tolist()  # the last entry maps -1 (no slot) to -1
            [-1, 0, 1, -1]
        """
        remap = np.full(self.end + 1, -1, np.int64)  # index -1 maps -1 to -1
        keep = np.flatnonzero(self.live[: self.end])
        remap[keep] = np.arange(len(keep))
        return remap

    def compact(self) -> np.ndarray:
        """Moves live rows to the front in order; returns old slot -> new slot (-1 dead).

        All or nothing: if anything raises before it is done, the rows move back.

        Example:
            >>> store = StepStore()
            >>> rows = {"obs": np.zeros((2, 1)), "actions": np.arange(2), "rewards": np.ones(2)}
            >>> store.reserve(4)
            >>> for ep_row in (0, 1):
            ...     _ = store.append(rows, {}, [{}] * 2, ep_row=ep_row, t0=0, prev_slot=-1)
            >>> store.kill(np.array([0, 1]))  # evict episode 0
            >>> store.compact()[:4].tolist(), store.end, store.ep[:2].tolist()
            ([-1, -1, 0, 1], 2, [1, 1])
        """
        remap = self.compaction_map()
        keep = np.flatnonzero(remap[:-1] >= 0)
        count = len(keep)
        # The links, flags, times and ids are built aside, then swapped in; the data columns
        # move in place. Rows past the new end are never read: the new arrays leave them
        # unwritten (untouched memory costs nothing).
        aside = []
        for name in ("nxt", "prv", "ep", "t", "uid"):
            array = getattr(self, name)
            aside.append(np.empty_like(array))
            np.take(array, keep, out=aside[-1][:count])  # one pass, no temporary
        for links in aside[:2]:
            np.take(remap, links[:count], out=links[:count])
        live = np.zeros(len(self.live), bool)
        live[:count] = True
        columns = (self.obs, self.actions, *self.extras.values())
        # Records (nested observations, actions) move as raw bytes, not field by field.
        arrays = [raw_rows(column.data) for column in columns if column is not None]
        arrays += [self.rewards, self.infos]
        done = [[0] for _ in arrays]
        try:
            for array, moved in zip(arrays, done):
                move_to_front(array, keep, moved)
            self.infos[count : self.end] = None  # rows past the end hold no infos
        except BaseException:
            for array, moved in zip(arrays, done):
                move_back(array, keep[: moved[0]])
            raise
        # Plain stores, no call between them: a signal cannot fall among them (CPython).
        self.nxt, self.prv, self.ep, self.t, self.uid = aside
        self.live, self.end, self.moves = live, count, self.moves + 1
        return remap

    def compacts_for(self, n: int) -> bool:
        """Whether :meth:`reserve` of ``n`` rows would compact (rather than grow or nothing).

        Example:
            >>> store = StepStore()
            >>> store.reserve(64)
            >>> rows = {"obs": np.zeros((64, 1)), "actions": np.zeros(64), "rewards": np.ones(64)}
            >>> _ = store.append(rows, {}, [{}] * 64, ep_row=0, t0=0, prev_slot=-1)
            >>> store.kill(np.arange(8))
            >>> store.compacts_for(8), store.compacts_for(9)
            (True, False)
        """
        if self.end + n <= self.size:
            return False
        dead = self.end - self.num_live
        # A compaction moves every live row: it must free an eighth of the store, else a store
        # whose spare rows are few (a capacity just below its size) would move them all for
        # each handful of rows added.
        return dead >= n and _FREED * dead >= self.size

    def reserve(self, n: int) -> np.ndarray | None:
        """Makes room for ``n`` more rows at the end: compacts or grows.

        It compacts only where the dead rows hold the ``n`` rows and are at least an eighth of
        the store, so each compaction frees a share of the store that later adds fill before
        the next one (O(1) moved rows per added step); with fewer dead rows the columns grow
        (:meth:`grown_size`), keeping the dead rows for a later compaction.

        Returns:
            The compaction's old slot -> new slot map (callers remap what holds slots), or
            None when no row moved.

        Example:
            >>> store = StepStore()
            >>> store.reserve(3) is None, store.size  # grows to at least 64 rows
            (True, 64)
            >>> rows = {"obs": np.zeros((64, 1)), "actions": np.zeros(64), "rewards": np.ones(64)}
            >>> _ = store.append(rows, {}, [{}] * 64, ep_row=0, t0=0, prev_slot=-1)
            >>> store.kill(np.arange(64))
            >>> store.reserve(10)[:3].tolist(), store.end, store.size  # compacts instead
            ([-1, -1, -1], 0, 64)
            >>> _ = store.append(rows, {}, [{}] * 64, ep_row=1, t0=0, prev_slot=-1)
            >>> store.kill(np.arange(4))  # 4 dead rows: under an eighth of 64
            >>> store.reserve(2) is None, store.end, store.size  # grows by half
            (True, 64, 96)
        """
        remap = self.compact() if self.compacts_for(n) else None
        if self.end + n > self.size:
            self._resize(self.grown_size(n))
        return remap

    def grown_size(self, n: int) -> int:
        """The size :meth:`reserve` grows to for ``n`` more rows past the end.

        By half (at least to ``end + n`` and 64 rows), but with a known ``capacity`` at most
        to the bound past which compaction always comes first while the live rows are at most
        the capacity: ``max(ceil(8 * (c + n) / 7), c + 2 * n, 64)`` with ``c`` the capacity, or the
        live rows where more (one episode longer than the capacity stays; the bound still grows
        by a seventh at least). At that size, a reserve of at most ``n`` rows at the end finds
        at least an eighth of the rows dead, and at least ``n``.

        Example:
            >>> store = StepStore()
            >>> store.size, store.end = 700, 500
            >>> store.grown_size(4)  # by half
            1050
            >>> store.capacity = 600
            >>> store.grown_size(4)  # at most ceil(8 * 604 / 7)
            691
            >>> store.grown_size(200)  # at least 600 + 2 * 200
            1000
        """
        grown = max(self.size + self.size // 2, _MIN_SIZE)
        if self.capacity is not None:
            held = max(self.capacity, self.num_live)
            bound = max(-(-_FREED * (held + n) // (_FREED - 1)), held + 2 * n, _MIN_SIZE)
            grown = min(grown, bound)
        return max(grown, self.end + n)

    # ---------------------------------------------------------------------------- internals

    def _resize(self, size: int) -> None:
        # Each array is replaced by a longer copy as soon as it is made (one column's copy at a
        # time in memory); ``size`` is set last, so an interrupted growth leaves longer arrays
        # whose extra rows nothing reads.
        for column in (self.obs, self.actions, *self.extras.values()):
            if column is not None:
                column.resize(size)
        self.rewards = _resized(self.rewards, size, 0)
        self.infos = _resized(self.infos, size, None)
        self.live = _resized(self.live, size, False)
        for name in ("ep", "t", "nxt", "prv", "uid"):
            setattr(self, name, _resized(getattr(self, name), size, -1))
        self.size = size

    def init_columns(
        self, obs: np.ndarray, actions: np.ndarray, extras: dict[str, np.ndarray]
    ) -> None:
        """Makes the data columns (``size`` rows) after example rows, unless they exist.

        Example:
            >>> store = StepStore()
            >>> store.reserve(3)
            >>> store.init_columns(np.zeros((2, 4), np.float32), np.zeros(2, np.int8), {})
            >>> store.obs.data.shape, store.actions.data.dtype
            ((64, 4), dtype('int8'))
        """
        if self.obs is not None and self.actions is not None:
            return
        made = Column(self.size, obs), Column(self.size, actions)
        made_extras = {key: Column(self.size, values) for key, values in extras.items()}
        self.obs, self.actions, self.extras = *made, made_extras  # together, once all are made


def _resized(array: np.ndarray, size: int, fill: Any) -> np.ndarray:
    new = np.full(size, fill, array.dtype)
    kept = min(size, len(array))  # an interrupted growth may have left it longer
    new[:kept] = array[:kept]
    return new


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Holds a Ctrl-C (SIGINT) back until the block is done, then raises its KeyboardInterrupt.

    For a block that changes several arrays in turn, which no exception may cut in the middle:
    only in the main thread (where the signal lands) and only while SIGINT has Python's
    default handler; another handler (a framework's) is left as it is, never replaced even for
    a moment. A handler installed below Python by C code, which Python reports as its default,
    is Python's own again after the block.

    Example:
        >>> try:
        ...     with deferred_interrupts():
        ...         signal.raise_signal(signal.SIGINT)
        ...         done = True  # reached: the interrupt waits for the block's end
        ... except KeyboardInterrupt:
        ...     print("interrupted after the block:", done)
        interrupted after the block: True
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # a signal's handler runs in the main thread only: nothing here to hold back
        return
    previous = _get_handler(_SIGINT)
    if previous is not signal.default_int_handler:  # someone else's: theirs to run, untouched
        yield
        return
    caught: list[int] = []
    _set_handler(_SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        _set_handler(_SIGINT, previous)
        if caught:
            raise KeyboardInterrupt


# signal.signal's own wrapper turns handlers into enums through a caught ValueError (about
# 2.5 us a call, twice per add); the C function it wraps takes and gives them as they are.
_set_handler: Any = getattr(sys.modules.get("_signal"), "signal", signal.signal)
_get_handler: Any = getattr(sys.modules.get("_signal"), "getsignal", signal.getsignal)
_SIGINT = int(signal.SIGINT)


def all_empty_infos(infos: list[Any]) -> bool:
    """Whether every info is empty: None or ``{}``; any other value (``0``, ``[]``) is data.

    Example:
        >>> all_empty_infos([None, {}]), all_empty_infos([{}, 0]), all_empty_infos([np.ones(2)])
        (True, False, False)
    """
    # Two C-level scans: with only dicts and Nones, truthiness is exactly non-emptiness (an
    # array's would be ambiguous, a 0's would say "empty").
    return set(map(type, infos)) <= _EMPTY_KINDS and not any(infos)


def fresh_infos(infos: np.ndarray) -> np.ndarray:
    """Deep copies of stored infos (``{}`` for None), so callers cannot change the buffer.

    Example:
        >>> stored = np.array([None, {"k": [1]}], object)
        >>> out = fresh_infos(stored)
        >>> out.tolist(), out[1]["k"] is stored[1]["k"]
        ([{}, {'k': [1]}], False)
    """
    items = fresh_info_list(infos)
    return np.fromiter(items, object, len(items)).reshape(infos.shape)


def fresh_info_list(infos: np.ndarray) -> list[Any]:
    """:func:`fresh_infos` as a flat list (what an episode's infos column holds).

    A new ``{}`` for each None (empty infos are stored as None), a deep copy of any other
    info: nothing the caller changes reaches the buffer.

    Example:
        >>> stored = np.array([None, {"k": [1]}, None], object)
        >>> out = fresh_info_list(stored)
        >>> out, out[0] is out[2], out[1]["k"] is stored[1]["k"]
        ([{}, {'k': [1]}, {}], False, False)
    """
    # One comprehension: the new dicts cost most of it, so a mask of the non-empty infos
    # found first would save nothing; deepcopy runs only for those.
    deepcopy = copy.deepcopy
    return [{} if info is None else deepcopy(info) for info in infos.ravel().tolist()]


def _put_joined(store: StepStore, parts: list[Any], window: slice) -> bool:
    """Writes the rows of ``parts`` with one concatenation per column, straight into it.

    Only where every part's rows have their column's dtype and row shape, and no column holds
    records (those move as raw bytes: ``put_rows``); else nothing is written and it says False.
    A copy of rows of the column's own dtype is the bytes a slice assignment writes.
    """
    assert store.obs is not None and store.actions is not None
    columns = [
        (store.obs.data, [rows["obs"] for rows, _, _ in parts]),
        (store.actions.data, [rows["actions"] for rows, _, _ in parts]),
        (store.rewards, [rows["rewards"] for rows, _, _ in parts]),
    ]
    for key, column in store.extras.items():
        columns.append((column.data, [extras.get(key) for _, extras, _ in parts]))
    for out, pieces in columns:
        dtype, shape = out.dtype, out.shape[1:]
        if dtype.names is not None:
            return False
        for piece in pieces:
            if piece is None or piece.dtype != dtype or piece.shape[1:] != shape:
                return False
    for out, pieces in columns:
        np.concatenate(pieces, out=out[window])
    return True


def _object_rows(items: list[Any]) -> np.ndarray:
    rows = np.empty(len(items), object)
    try:
        rows[:] = items  # one C loop for dicts; items numpy would unpack take the slow path
    except (ValueError, TypeError):
        for i, item in enumerate(items):
            rows[i] = item
    return rows
