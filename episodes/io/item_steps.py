"""Which episode and env time the torch datasets' items come from, and their index checks.

A ``TransitionDataset`` / ``SequenceDataset`` item is a step (or a window's first step) of a
run of steps (:mod:`episodes.io.piece_windows`: an episode's pieces that continue one another).
``episode_steps(indices)`` names items back as ``(ids, t)``, as the replay buffers'
``episode_steps`` does: the run's first piece's id, decoded as the readers decode it, and its
``t_started`` plus the item's offset in the run. Everything comes from the manifest rows and
the items' cumulative counts (no shard read): :class:`RunHeads` keeps each run's first piece,
:func:`item_indices` checks indices as ``__getitem__`` takes them (:func:`item_index`).

Example:
    >>> from episodes.io.piece_windows import piece_runs
    >>> from episodes.io.shards import EpisodeRow
    >>> rows = [EpisodeRow("a", 4, 6, 0.0, False, False), EpisodeRow("b", 0, 1, 0.0, True, False),
    ...         EpisodeRow("a", 6, 7, 0.0, True, False)]
    >>> runs = piece_runs(rows)  # "a": steps 4 to 7 in two pieces; "b": one step
    >>> ids, t = RunHeads(rows, runs).steps(np.cumsum(runs.lengths), item_indices([3, 2, -4], 4))
    >>> ids.tolist(), t.tolist()
    (['b', 'a', 'a'], [0, 6, 4])
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.io.piece_windows import PieceRuns
from episodes.io.shards import EpisodeRow
from episodes.io.values import decode_value

__all__ = ["RunHeads", "item_index", "item_indices"]


def _as_int(index: Any) -> int:
    """``index`` as a Python int: ints, numpy and torch integer scalars only (no bool)."""
    torch = sys.modules.get("torch")  # a tensor exists only where torch was imported
    # A tensor or array has __index__ when it holds one element, of any shape, even a bool.
    not_scalar = (
        isinstance(index, np.ndarray) or (torch is not None and isinstance(index, torch.Tensor))
    ) and (index.ndim != 0 or str(index.dtype) in ("bool", "torch.bool"))
    try:  # a float tensor or array has __index__ too, which refuses in its own words
        if isinstance(index, (bool, np.bool_)) or not_scalar:
            raise TypeError
        return operator.index(index)
    except TypeError:
        raise TypeError(f"index must be an int, got {type(index).__name__} ({index!r})") from None


def _out_of_range(given: Any, count: int) -> IndexError:
    return IndexError(f"index {given} out of range for {count} items")


def item_index(index: Any, count: int) -> int:
    """``index`` of ``count`` items as ``__getitem__`` takes it: an int, negative from the end.

    Raises:
        TypeError: ``index`` is no int, numpy or torch integer scalar (``True``, ``1.0``, a
            one-element 1-d array).
        IndexError: ``index`` is out of range (named as given).

    Example:
        >>> item_index(-1, 5), item_index(np.int64(2), 5)
        (4, 2)
        >>> item_index(5, 5)
        Traceback (most recent call last):
        ...
        IndexError: index 5 out of range for 5 items
    """
    value = _as_int(index)
    if not -count <= value < count:
        raise _out_of_range(index, count)
    return value + count if value < 0 else value


def _int_array(indices: Any) -> np.ndarray | None:
    """``indices`` as an integer (or exact ints') array, None for one index.

    An array or tensor of other values is a ``TypeError``, and so is a sequence's value that
    is no int (in ``_as_int``'s words).
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(indices, torch.Tensor):
        if indices.ndim == 0:
            return None
        if indices.dtype == torch.bool or indices.is_floating_point() or indices.is_complex():
            raise TypeError(f"indices must be ints, got a tensor of {indices.dtype}")
        return indices.detach().cpu().numpy()
    if isinstance(indices, np.ndarray):
        if indices.ndim == 0:
            return None
        if indices.dtype.kind in "iu" or (indices.dtype.kind == "O" and indices.ndim != 1):
            return indices  # the caller refuses another shape
        if indices.dtype.kind != "O":
            raise TypeError(f"indices must be ints, got an array of {indices.dtype}")
        indices = indices.tolist()
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence):
        return None  # one index, or no index (_as_int's words)
    if not len(indices):
        return np.zeros(0, np.int64)
    kinds = set(map(type, indices))
    if any(issubclass(k, (list, tuple)) for k in kinds):  # more than one dimension?
        try:
            nested = np.asarray(indices)
        except ValueError:  # ragged: the list is judged as a value below
            nested = np.zeros(0)
        if nested.ndim > 1:
            return nested  # the caller refuses the shape
    if all(issubclass(k, (int, np.integer)) and not issubclass(k, bool) for k in kinds):
        try:  # int64 beside uint64 items would be float64, ints beyond uint64 objects
            array = np.asarray(indices)
        except OverflowError:
            array = np.zeros(0)
        if array.dtype.kind in "iu":
            return array
    return np.array([_as_int(value) for value in indices], dtype=object)  # exact ints


def item_indices(indices: Any, count: int) -> np.ndarray:
    """``indices`` of ``count`` items as an int64 array, each taken as :func:`item_index` takes one.

    ``indices`` is one index, or a 1-d list, tuple, range, numpy array or torch tensor of them
    (negative from the end); one index gives an array of one.

    Raises:
        TypeError: An index is no integer (a bool, a float, a bool or float array or tensor).
        IndexError: An index is out of range (the first, named as given).
        ValueError: ``indices`` has more than one dimension.

    Example:
        >>> item_indices([0, -1], 3).tolist(), item_indices(np.uint8(2), 3).tolist()
        ([0, 2], [2])
        >>> item_indices([1, True], 3)
        Traceback (most recent call last):
        ...
        TypeError: index must be an int, got bool (True)
    """
    array = _int_array(indices)
    if array is None:
        return np.array([item_index(indices, count)], dtype=np.int64)
    if array.ndim != 1:
        raise ValueError(f"indices must be one index or a 1-d sequence, got shape {array.shape}")
    if array.dtype.kind == "O":  # exact ints, some beyond int64 or of mixed kinds
        beyond = [value for value in array if not -count <= value < count]
        if beyond:
            raise _out_of_range(beyond[0], count)
        array = array.astype(np.int64)
    if array.dtype.kind == "u":  # compared unsigned: none beyond int64 wraps around
        bad = array >= count
    else:
        bad = (array < -count) | (array >= count)
    if bad.any():
        raise _out_of_range(int(array[int(np.argmax(bad))]), count)
    items = array.astype(np.int64)  # a copy: the caller's array stays as it is
    items[items < 0] += count
    return items


class RunHeads:
    """Each run's first piece (a run: :func:`~episodes.io.piece_windows.piece_runs`).

    The runs' ids are decoded once, at the first :meth:`ids` call, and gathered after that
    (the same id objects at every call, as the replay buffers give theirs).

    Args:
        rows: The dataset's manifest rows (``Dataset.summaries``).
        runs: The runs the torch dataset's items lie in, of ``rows``.

    Example:
        >>> from episodes.io.piece_windows import piece_runs
        >>> rows = [EpisodeRow({"__ep_tuple__": [1, "x"]}, 3, 5, 0.0, False, False)]
        >>> heads = RunHeads(rows, piece_runs(rows))
        >>> heads.t_started.tolist(), heads.ids(np.array([0, 0])).tolist()
        ([3], [(1, 'x'), (1, 'x')])
    """

    def __init__(self, rows: Sequence[EpisodeRow], runs: PieceRuns):
        self._rows = rows
        self._first = runs.pieces[runs.bounds[:-1]]
        self.t_started = np.fromiter(
            (rows[k].t_started for k in self._first.tolist()), np.int64, len(self._first)
        )
        self._ids: np.ndarray | None = None  # every run's id, decoded at the first ids() call

    def ids(self, runs: np.ndarray) -> np.ndarray:
        """An object array of the ids of ``runs``, decoded as the readers decode them.

        Example:
            >>> from episodes.io.piece_windows import piece_runs
            >>> rows = [EpisodeRow("a", 0, 1, 0.0, True, False)]
            >>> RunHeads(rows, piece_runs(rows)).ids(np.array([0])).tolist()
            ['a']
        """
        if self._ids is None:  # once per process (not pickled: see TransitionDataset)
            ids = np.empty(len(self._first), dtype=object)
            for j, k in enumerate(self._first.tolist()):  # one by one: a tuple id is one item
                raw = self._rows[k].id_  # a str is stored as itself
                if raw.__class__ is not str:
                    raw = decode_value(raw, blob=None, where="manifest id")
                ids[j] = raw
            self._ids = ids
        return self._ids[np.asarray(runs, dtype=np.intp).reshape(-1)]

    def steps(self, ends: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, t)`` of item indices ``items`` (checked), ``ends`` the runs' cumulative items.

        ``t`` is the env time of the item's step: its run's first ``t_started`` plus the
        item's offset in the run (a window's offset is its first step's).

        Example:
            >>> from episodes.io.piece_windows import piece_runs
            >>> rows = [EpisodeRow("a", 2, 4, 0.0, True, False)]
            >>> ids, t = RunHeads(rows, piece_runs(rows)).steps(np.array([2]), np.array([1]))
            >>> ids.tolist(), t.tolist()
            (['a'], [3])
        """
        runs = np.searchsorted(ends, items, side="right")
        before = np.where(runs > 0, ends[runs - 1], 0)  # the items of the runs before
        return self.ids(runs), self.t_started[runs] + (items - before)
