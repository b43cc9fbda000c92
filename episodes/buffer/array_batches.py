"""The numpy store's batch operations: a batch is a struct of arrays with a leading time axis.

The buffer assembles its reads (windows, fillers, one-hot encodings, strided and joined
windows) from these; :class:`~episodes.buffer.array_store.ArrayStore` offers them as its static
methods (from :class:`ArrayBatchOps`), the list store has list versions. The numpy store
also grows its leaves (:func:`grown`) and writes batches into them (:func:`write_leaves`) here.

Example:
    >>> join([stride({"x": np.arange(4)}, 2), {"x": np.array([9])}])["x"].tolist()
    [0, 2, 9]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.value_fit import MISFIT_ERRORS, misfit, write_rows
from episodes.spaces import batch as stack_items
from episodes.spaces import filler_batch, one_hot
from episodes.structs import common_nesting, flatten, map_alike, map_leaves, same_nesting, unflatten

__all__ = [
    "ArrayBatchOps",
    "encode_one_hot",
    "fillers",
    "from_items",
    "from_rows",
    "grown",
    "join",
    "stride",
    "write_leaves",
]


def encode_one_hot(window: Any, space: gym.Space[Any] | None) -> Any:
    """One-hot encodes the Discrete/MultiDiscrete leaves of a batch.

    Example:
        >>> encode_one_hot(np.array([2, 0]), gym.spaces.Discrete(3)).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return one_hot(window, space)


def fillers(space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool) -> Any:
    """``count`` filler items as a batch.

    Example:
        >>> fillers(gym.spaces.Box(0, 1, (2,)), -1.0, 3, False).tolist()
        [[-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0]]
    """
    return filler_batch(space, fill, count, one_hot_discrete=one_hot_discrete)


def join(parts: list[Any]) -> Any:
    """Concatenates batches along time; ValueError if their leaves do not stack.

    The result nests as :func:`common_nesting` of the parts. Leaves of no common dtype (records
    beside numbers, whose promotion numpy refuses with a ``TypeError``) do not stack either.

    Example:
        >>> join([{"x": np.zeros(1)}, {"x": np.ones(2)}])["x"].tolist()
        [0.0, 1.0, 1.0]
        >>> join([np.zeros(1, [("x", "f4")]), np.zeros(1)])
        Traceback (most recent call last):
        ValueError: the batches' leaves have no common dtype: ...
    """
    if len(parts) == 1:
        return parts[0]
    if not all(same_nesting(parts[0], part) for part in parts[1:]):
        # Checked whatever the first part is: a flat one beside nested ones is no join either.
        raise ValueError("the batches do not nest alike")
    try:
        return map_alike(np.concatenate, parts)
    except TypeError as error:  # numpy's DTypePromotionError
        raise ValueError(f"the batches' leaves have no common dtype: {error}") from error


def stride(window: Any, step: int) -> Any:
    """Every ``step``-th item of a batch.

    Example:
        >>> stride({"x": np.arange(6)}, 2)["x"].tolist()
        [0, 2, 4]
    """
    return map_leaves(lambda leaf: leaf[::step], window)


def from_rows(rows: np.ndarray) -> Any:
    """A batch from an array of rows (the one-hot window path builds one).

    Example:
        >>> rows = np.eye(2)
        >>> from_rows(rows) is rows
        True
    """
    return rows


def from_items(items: list[Any]) -> Any:
    """A batch from a list of items (gathers that mix fillers in build one).

    Items that nest alike but for lists and tuples (a Tuple space's items recorded as lists,
    and its fillers) stack as :func:`common_nesting` of them.

    Example:
        >>> batch = from_items([{"x": 1, "y": 0.5}, {"x": 2, "y": 1.5}])
        >>> batch["x"].tolist(), batch["y"].tolist()
        ([1, 2], [0.5, 1.5])
        >>> [leaf.tolist() for leaf in from_items([[1, 0.5], (2, 1.5)])]
        [[1, 2], [0.5, 1.5]]
    """
    first = items[0] if items else None
    if first.__class__ in (list, tuple, dict) and all(same_nesting(first, i) for i in items):
        nesting = common_nesting(items)
        items = [unflatten(nesting, flatten(item)[0]) for item in items]
    return stack_items(items)


def write_leaves(leaves: list[np.ndarray], where: slice, arrays: list[np.ndarray]) -> None:
    """Writes each array's rows at ``where`` of its leaf: a numpy store's batch write.

    The caller checked the arrays against the leaves; each is written by
    :func:`~episodes.buffer.value_fit.write_rows`, and a refusal numpy still raises there (a
    read-only leaf) is the column's :func:`~episodes.buffer.value_fit.misfit` error.

    Example:
        >>> leaves = [np.zeros(3)]; write_leaves(leaves, slice(1, 3), [np.ones(2)])
        >>> leaves[0].tolist()
        [0.0, 1.0, 1.0]
    """
    for column, leaf in zip(leaves, arrays):
        try:
            write_rows(column, where, leaf)
        except MISFIT_ERRORS as error:
            raise misfit(leaf, column, error) from error


def grown(leaves: list[np.ndarray], kept: int, capacity: int) -> list[np.ndarray]:
    """New leaves of ``capacity`` rows holding the first ``kept`` rows of ``leaves``.

    How a numpy store makes room for more items (the rows past ``kept`` are left unset).

    Example:
        >>> [(leaf.shape, leaf[:2].tolist()) for leaf in grown([np.arange(3)], 2, 8)]
        [((8,), [0, 1])]
    """
    bigger = []
    for leaf in leaves:
        new = np.empty((capacity, *leaf.shape[1:]), leaf.dtype)
        new[:kept] = leaf[:kept]
        bigger.append(new)
    return bigger


class ArrayBatchOps:
    """The batch operations of a numpy store, each the function of the same name above.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> ArrayStore.join([ArrayStore.fillers(None, 0, 1, False), np.array([5])])
        array([0, 5])
    """

    __slots__ = ()

    @staticmethod
    def encode_one_hot(window: Any, space: gym.Space[Any] | None) -> Any:
        """:func:`encode_one_hot`."""
        return encode_one_hot(window, space)

    @staticmethod
    def fillers(space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool) -> Any:
        """:func:`fillers`."""
        return fillers(space, fill, count, one_hot_discrete)

    @staticmethod
    def join(parts: list[Any]) -> Any:
        """:func:`join`."""
        return join(parts)

    @staticmethod
    def stride(window: Any, step: int) -> Any:
        """:func:`stride`."""
        return stride(window, step)

    @staticmethod
    def from_rows(rows: np.ndarray) -> Any:
        """:func:`from_rows`."""
        return from_rows(rows)

    @staticmethod
    def from_items(items: list[Any]) -> Any:
        """:func:`from_items`."""
        return from_items(items)
