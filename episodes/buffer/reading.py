"""Assembling reads: a resolved index plan turned into a batch of the buffer's store.

The buffer resolves user indices with :mod:`episodes.indexing`; these functions fetch the
stored part from the store, encode it, and pad it with fillers, using only the store protocol
(:mod:`episodes.buffer.store`), so list and numpy stores answer every read the same way.

Example:
    >>> from episodes.buffer.list_store import ListStore
    >>> from episodes.indexing import SlicePlan
    >>> read_plan(ListStore([1, 2]), None, SlicePlan(1, 0, 2, 0, 1), 0, False)
    [0, 1, 2]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes import indexing
from episodes.buffer.discrete_window import window_one_hot
from episodes.buffer.store import Store
from episodes.spaces import filler_item, one_hot


def read_plan(
    store: Store,
    space: gym.Space[Any] | None,
    plan: indexing.SlicePlan,
    fill: Any,
    one_hot_discrete: bool,
) -> Any:
    """The batch a slice plan describes: fillers, the stored window, fillers, then the step.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> plan = indexing.SlicePlan(fill_left=0, start=1, stop=5, fill_right=2, step=2)
        >>> read_plan(ArrayStore.from_batch(np.arange(5)), None, plan, -1, False).tolist()
        [1, 3, -1]
    """
    if one_hot_discrete and type(space) is gym.spaces.Discrete:
        # The connector hot path: one zero matrix and one scatter.
        rows = window_one_hot(
            store.window(plan.start, plan.stop),
            n=int(space.n),
            start=int(space.start),
            fill_left=plan.fill_left,
            fill_right=plan.fill_right,
        )
        return store.from_rows(rows if plan.step == 1 else rows[:: plan.step])
    window = store.window(plan.start, plan.stop)
    if one_hot_discrete:
        window = store.encode_one_hot(window, space)
    if plan.fill_left or plan.fill_right:
        parts = [window] if plan.stored else []
        if plan.fill_left:
            parts.insert(0, store.fillers(space, fill, plan.fill_left, one_hot_discrete))
        if plan.fill_right:
            parts.append(store.fillers(space, fill, plan.fill_right, one_hot_discrete))
        try:
            window = store.join(parts)
        except ValueError as error:
            raise filler_mismatch(fill) from error
    return window if plan.step == 1 else store.stride(window, plan.step)


def read_positions(
    store: Store,
    space: gym.Space[Any] | None,
    positions: np.ndarray,
    fill: Any,
    one_hot_discrete: bool,
    lookback: int,
    indices: Any = None,
) -> Any:
    """The batch of the items at storage ``positions``; out-of-range ones are fillers or raise.

    Raises:
        IndexError: A position is out of range and ``fill`` is None (``indices``, the user's
            indices, name the bad ones).

    Example:
        >>> from episodes.buffer.list_store import ListStore
        >>> read_positions(ListStore([5, 6, 7]), None, np.array([2, 3, 0]), -1, False, 0)
        [7, -1, 5]
        >>> read_positions(ListStore([5, 6]), None, np.array([3]), None, False, 1, indices=[2])
        Traceback (most recent call last):
        IndexError: indices [2] are out of range for a buffer with 1 items and a lookback of 1
    """
    total = len(store)
    valid = (positions >= 0) & (positions < total)
    all_valid = bool(valid.all())
    if not all_valid and fill is None:
        named = list(positions if indices is None else indices)
        bad = [i for i, ok in zip(named, valid.tolist()) if not ok]
        raise IndexError(
            f"indices {bad} are out of range for a buffer with {total - lookback} items "
            f"and a lookback of {lookback}"
        )
    if all_valid:
        if not len(positions):
            empty = indexing.SlicePlan(0, 0, 0, 0, 1)
            return read_plan(store, space, empty, fill, one_hot_discrete)
        gathered = store.gather(positions)
        return store.encode_one_hot(gathered, space) if one_hot_discrete else gathered
    filler = filler_item(space, fill, one_hot_discrete=one_hot_discrete)
    items = [
        (one_hot(store.get(p), space) if one_hot_discrete else store.get(p)) if ok else filler
        for p, ok in zip(positions.tolist(), valid.tolist())
    ]
    try:
        return store.from_items(items)
    except ValueError as error:
        raise filler_mismatch(fill) from error


def filler_mismatch(fill: Any) -> ValueError:
    """The error for fillers that do not stack with the stored items.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> rows = ArrayStore.from_batch(np.zeros((2, 3)))  # a scalar fill cannot pad rows
        >>> read_plan(rows, None, indexing.SlicePlan(1, 0, 2, 0, 1), 0, False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: fill=0 cannot pad this buffer's items: ... or a fill shaped like one item
    """
    return ValueError(
        f"fill={fill!r} cannot pad this buffer's items: without a space the filler is "
        "fill itself, which does not stack with them; give the buffer a space (fillers "
        "then take the items' shape and dtype) or a fill shaped like one item"
    )
