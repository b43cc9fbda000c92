"""Overwriting a numpy column's items with a batch: one check and one assignment per leaf.

``InfiniteLookbackBuffer.set`` given a batched struct of arrays would split it into items and
check, cast and write each one (microseconds of Python per row). For a numpy column,
:func:`write_batch` runs the same checks once over the whole batch: the buffer's space
(:func:`in_space_mask`: vectorized for Box, Discrete, MultiBinary and MultiDiscrete leaves,
item by item for the leaves of other spaces; NaN is taken in the rewards column's unbounded
scalar Box, as :mod:`episodes.buffer.space_checks` says), the column's item shapes and dtypes
(``batch_misfit``, the check appended batches pass), then writes each leaf in one assignment.

It writes only what it can vouch for: a batch that fails a check, or one it does not judge
(object or string leaves, other nesting, repeated positions), is declined with nothing
written, and the buffer takes its item-by-item path, which raises the error it always raised.

A numpy'd column whose Tuple items were recorded as lists reads back as a *list* of leaf
arrays (contract 3.5); :func:`list_batch` tells that batch from a list of items, so that the
setters take the column's own read back.

Example:
    >>> import gymnasium as gym
    >>> store = ArrayStore.from_batch(np.zeros((4, 2), np.float32))
    >>> box = gym.spaces.Box(-1, 1, (2,), np.float32)
    >>> write_batch(store, box, range(1, 3), np.ones((2, 2), np.float32))
    True
    >>> store.data.tolist()
    [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
    >>> write_batch(store, box, range(1, 3), np.full((2, 2), 5.0, np.float32))  # not in the box
    False
"""

from __future__ import annotations

from functools import singledispatch
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.array_store import ArrayStore
from episodes.buffer.space_checks import takes_nan
from episodes.buffer.store import Store
from episodes.buffer.value_fit import batch_misfit
from episodes.spaces.contains import checker_for
from episodes.structs import flatten, leaves_up_to, same_nesting, unflatten

__all__ = ["in_space_mask", "list_batch", "write_batch"]

# Dtype kinds this path casts and checks (the checks of appended batches cover them exactly).
_NUMBERS = "biuf"


def write_batch(store: Store, space: gym.Space[Any] | None, targets: Any, new_data: Any) -> bool:
    """Writes batch ``new_data`` at storage positions ``targets`` of a numpy ``store``.

    ``targets`` is what ``set`` resolved: a ``range`` or a list of positions, all in range.
    Returns True once written; False, with nothing written, where the batch fails a check or
    is not one this path judges (a list of items, a list-mode store).

    Example:
        >>> store = ArrayStore.from_batch({"a": np.zeros(3, np.int64), "b": np.zeros(3)})
        >>> write_batch(store, None, [2, 0], {"b": np.array([0.5, 1.5]), "a": np.array([7, 8])})
        True
        >>> store.data["a"].tolist(), store.data["b"].tolist()
        ([8, 0, 7], [1.5, 0.0, 0.5])
    """
    if type(new_data) is list and isinstance(store, ArrayStore) and store.structure is None:
        new_data = _stacked_items(new_data)  # a list of numbers or of like arrays: as a batch
    if not isinstance(store, ArrayStore) or not isinstance(new_data, (np.ndarray, dict, tuple)):
        return False
    try:
        batch = ArrayStore.from_batch(new_data)
    except (ValueError, TypeError):
        return False
    count = len(targets)
    if len(batch) != count or not count or not store.typed:
        return False
    columns = store.leaves
    given = batch.leaf_views()
    order = _leaf_order(store.structure, batch.structure, len(given))
    if order is None or len(order) != len(columns):
        return False
    rows = [given[j] for j in order]
    for column, leaf in zip(columns, rows):
        if column.dtype.kind not in _NUMBERS or leaf.dtype.kind not in _NUMBERS:
            return False
        if batch_misfit(column, leaf, count) is not None:
            return False
    if space is not None and not in_space_mask(space, batch.data, count).all():
        # NaN, outside the space, is taken where set takes it (the rewards' Box), and only
        # there: any other number is in such a Box (the column's rules judge its range).
        if not takes_nan(space):
            return False
    if isinstance(targets, range):
        positions: range | np.ndarray = targets
    else:
        positions = np.asarray(targets, dtype=np.intp)
        seen = np.zeros(len(store), bool)
        seen[positions] = True
        if np.count_nonzero(seen) != count:  # repeated positions: the last write wins there
            return False
    # Staged as copies where the batch views the column itself (set(buf.get()[::-1])).
    rows = [leaf.copy() if _overlaps(leaf, columns) else leaf for leaf in rows]
    store.set_rows(positions, rows)
    return True


def _stacked_items(items: list[Any]) -> Any:
    """A flat column's items as one array where that array holds them exactly, else ``items``.

    Only items all of one kind qualify: Python floats, Python ints that int64 holds, or arrays
    of one dtype and shape (not 0-d: a space judges those otherwise, item by item). Their
    array judges and writes as the items would one by one, so a list costs what an array
    does; any other list keeps the item-by-item path.
    """
    kinds = set(map(type, items))
    if len(kinds) != 1:
        return items
    kind = kinds.pop()
    if kind is float or kind is int:
        batch = np.asarray(items)  # ints beyond int64 make it uint64 or object: not taken
        return batch if batch.dtype == (np.float64 if kind is float else np.int64) else items
    if kind is np.ndarray and items[0].ndim:  # a 0-d array is judged as the number it holds
        first = items[0]
        if all(item.dtype == first.dtype and item.shape == first.shape for item in items):
            return np.stack(items)
    return items


def list_batch(store: Store, new_data: Any, space: Any = None) -> Any:
    """``new_data`` as a tuple batch if it is a list laid out as a batch of ``store``, else itself.

    Such a list nests exactly like the numpy column's items (tuples and lists stand for each
    other) and holds an array of at least one dimension at every leaf, all of one leading
    length: the read of a column whose Tuple items were recorded as lists. It cannot be a list
    of items, whose members nest like a whole item and so hold a list or tuple wherever the
    item does. Any other list is left as it is: a list of items (Python lists at the leaves
    included, as in list mode), whose count and nesting ``set`` then checks. A square list (as
    many arrays as parts, each of that leading length) whose arrays are also items of
    ``space`` (gymnasium's Tuple takes an array item) could be either and is refused.

    Raises:
        ValueError: A list laid out as a batch whose leaves differ in leading length.

    Example:
        >>> store = ArrayStore.from_batch([np.zeros((3, 2)), np.zeros(3, np.int64)])
        >>> batch = list_batch(store, [np.ones((2, 2)), np.array([1, 2])])
        >>> type(batch).__name__, [leaf.shape for leaf in batch]
        ('tuple', [(2, 2), (2,)])
        >>> list_batch(store, [[np.ones(2), 1], [np.ones(2), 2]])  # two items: as they are
        [[array([1., 1.]), 1], [array([1., 1.]), 2]]
    """
    if type(new_data) is not list or not isinstance(store, ArrayStore):
        return new_data
    structure = store.structure
    if not isinstance(structure, (list, tuple)) or not same_nesting(structure, new_data):
        return new_data
    leaves = flatten(new_data)[0]
    if not leaves or not all(isinstance(leaf, np.ndarray) and leaf.ndim for leaf in leaves):
        return new_data
    if len({len(leaf) for leaf in leaves}) != 1:
        raise ValueError(
            "a batch laid out as a list needs every leaf to share its leading length (the "
            f"number of items), got leaves of shapes {[leaf.shape for leaf in leaves]}"
        )
    if _may_be_items(new_data, store, space):
        # Each array may also be one item (gymnasium's Tuple takes an array item), which list
        # mode would write item by item.
        parts = len(new_data)
        raise ValueError(
            f"a list of {parts} arrays of leading length {parts} is both {parts} items and a "
            f"batch of {parts}: give a tuple of arrays for a batch, or a list of lists (or "
            "tuples) for items"
        )
    return tuple(new_data)


def _may_be_items(new_data: list[Any], store: ArrayStore, space: Any) -> bool:
    # Square (as many arrays as parts, each of that leading length) and each array an item:
    # in the space, or, without one, a row of scalar parts.
    parts = len(new_data)
    if not all(isinstance(part, np.ndarray) and len(part) == parts for part in new_data):
        return False
    if space is None:
        return all(part.ndim == 1 for part in new_data) and all(
            leaf.ndim == 1 for leaf in store.leaves
        )
    try:
        return all(bool(space.contains(part)) for part in new_data)
    except Exception:  # a space that cannot judge an array item takes none
        return False


def _leaf_order(column_structure: Any, batch_structure: Any, count: int) -> list[int] | None:
    """For each column leaf, the batch leaf an item-by-item write pairs it with.

    None if a column leaf would take a nested value, or the nesting differs.
    """
    if column_structure is None or batch_structure is None:
        return [0] if column_structure is None and batch_structure is None else None
    # The pairing staged_rows makes, read off the batch's nesting with leaf numbers as values.
    order = leaves_up_to(column_structure, unflatten(batch_structure, list(range(count))))
    if order is None or any(type(j) is not int for j in order):
        return None
    return order if sorted(order) == list(range(count)) else None


def _overlaps(leaf: np.ndarray, columns: list[np.ndarray]) -> bool:
    return any(np.may_share_memory(leaf, column) for column in columns)


def in_space_mask(space: gym.Space[Any], batch: Any, count: int) -> np.ndarray:
    """Per item of ``batch`` (``count`` items), whether the buffer's checker takes it.

    The checker (:func:`~episodes.spaces.contains.checker_for`) judges each item of a set;
    Box, Discrete, MultiBinary and MultiDiscrete leaves are judged here in one numpy pass,
    exactly as it judges their rows, Dict and Tuple spaces part by part; any other leaf (or a
    batch laid out otherwise) item by item with the checker itself.

    Example:
        >>> box = gym.spaces.Box(0, 1, (2,))
        >>> in_space_mask(box, np.array([[0.5, 1.0], [0.5, 2.0]], np.float32), 2).tolist()
        [True, False]
        >>> in_space_mask(gym.spaces.Text(3), np.array(["ab", "abcd"]), 2).tolist()
        [True, False]
    """
    mask = _vectorized(space, batch, count)
    if mask is None:
        check = checker_for(space)
        items = (
            list(batch) if isinstance(batch, np.ndarray) else ArrayStore.from_batch(batch).items(0)
        )
        mask = np.fromiter(map(check, items), dtype=bool, count=count)
    return mask


@singledispatch
def _vectorized(space: gym.Space[Any], batch: Any, count: int) -> np.ndarray | None:
    return None  # a space judged item by item


@_vectorized.register
def _(space: gym.spaces.Dict, batch: Any, count: int) -> np.ndarray | None:
    if not isinstance(batch, dict) or batch.keys() != space.spaces.keys():
        return None
    parts = [in_space_mask(sub, batch[key], count) for key, sub in space.spaces.items()]
    # An empty Dict holds one item, {}: every row of it is in the space.
    return np.logical_and.reduce(parts) if parts else np.ones(count, bool)


@_vectorized.register
def _(space: gym.spaces.Tuple, batch: Any, count: int) -> np.ndarray | None:
    if not isinstance(batch, (tuple, list)) or len(batch) != len(space.spaces):
        return None
    parts = [in_space_mask(sub, part, count) for sub, part in zip(space.spaces, batch)]
    return np.logical_and.reduce(parts) if parts else np.ones(count, bool)  # () for each row


def _numbers(batch: Any) -> bool:
    return isinstance(batch, np.ndarray) and batch.dtype.kind in _NUMBERS


@_vectorized.register
def _(space: gym.spaces.Discrete, batch: Any, count: int) -> np.ndarray | None:
    # Rows are numpy integers: in range, and of a dtype that casts safely to the space's.
    if not _numbers(batch) or batch.ndim != 1 or batch.dtype.kind not in "iu":
        return None
    if not np.can_cast(batch.dtype, space.dtype):
        return None
    first = int(space.start)
    return (batch >= first) & (batch < first + int(space.n))


# MultiBinary and MultiDiscrete have no checker of their own: gymnasium's contains is
# mirrored for these exact classes only (a subclass may judge otherwise).
@_vectorized.register
def _(space: gym.spaces.MultiBinary, batch: Any, count: int) -> np.ndarray | None:
    if type(space) is not gym.spaces.MultiBinary or not _numbers(batch):
        return None
    if not space.shape or batch.shape[1:] != space.shape:
        return None
    return _rows_all((batch == 0) | (batch == 1))


@_vectorized.register
def _(space: gym.spaces.MultiDiscrete, batch: Any, count: int) -> np.ndarray | None:
    if type(space) is not gym.spaces.MultiDiscrete or not _numbers(batch):
        return None
    if not space.shape or batch.shape[1:] != space.shape or batch.dtype.kind not in "biu":
        return None
    if not np.can_cast(batch.dtype, space.dtype):
        return np.zeros(count, bool)
    start = space.start
    return _rows_all((start <= batch) & (batch <= start + (space.nvec - 1)))


@_vectorized.register
def _(space: gym.spaces.Box, batch: Any, count: int) -> np.ndarray | None:
    return _box_mask(space, batch) if _numbers(batch) else None


def _box_mask(space: gym.spaces.Box, batch: np.ndarray) -> np.ndarray | None:
    dtype, kind = space.dtype, batch.dtype.kind
    if dtype is None or dtype.kind not in "iuf" or kind == "b" or batch.shape[1:] != space.shape:
        return None
    if kind == "f" and batch.dtype.itemsize > 8:
        return None
    if not space.shape:
        # A number for a scalar Box is judged by its value, whatever its dtype: an integer
        # exactly against an integer Box, otherwise as a Python float.
        if dtype.kind in "iu":
            if kind == "f":
                return None  # a float must be whole there: judged item by item
            return (batch >= int(space.low)) & (batch <= int(space.high))
        values = batch.astype(np.float64, copy=False)
        return (values >= float(space.low)) & (values <= float(space.high))
    if batch.dtype != dtype and not np.can_cast(batch.dtype, dtype):
        return np.zeros(len(batch), bool)
    if kind in "iu" and dtype.kind == "f" and batch.dtype.itemsize > 4:
        return None  # int64 against float bounds: numpy rounds, the checker compares exactly
    # Same-kind or exactly promoted comparisons; NaN fails both, as it fails the checker.
    return _rows_all((batch >= space.low) & (batch <= space.high))


def _rows_all(elementwise: np.ndarray) -> np.ndarray:
    return np.asarray(elementwise.all(axis=tuple(range(1, elementwise.ndim))))
