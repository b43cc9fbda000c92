"""A finalized column's fillers in its own dtypes, so a padded read keeps the stored values.

A filler is laid out as the buffer's space says (contract 3.5), in the space's dtypes. A
numpy'd column may hold another dtype than its space's: int64 or bool rewards under the
rewards column's float32 Box, int32 actions of a Discrete space. Joined with such a column,
a space filler would promote the whole read (int64 and float32 make float64, which rounds
``2**53 + 1``). So each number leaf of a finalized read's fillers takes the column leaf's
dtype wherever ``fill`` keeps its value in it (0 into int64 or bool); where it does not (0.5
or NaN into ints, 2 into bools), the leaf stays the space's and the read is joined as numpy
promotes, since it holds ``fill``. A float filler of a float column is left as it is: the
join gives the values list mode reads. The space's own
check of ``fill`` comes first and is unchanged. A one-hot read keeps the float32 zero-hot
fillers of the leaves it encodes (the others take their column's dtype as above), and
list-mode fillers stay the space's.

Example:
    >>> import gymnasium as gym
    >>> from episodes.buffer.array_store import ArrayStore
    >>> store = ArrayStore.from_batch(np.array([2**53 + 1]))
    >>> rewards = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
    >>> column_typed(store, rewards, 0, np.zeros(2, np.float32), False)
    array([0, 0])
    >>> column_typed(store, rewards, 0.5, np.full(2, 0.5, np.float32), False)
    array([0.5, 0.5], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.store import Store
from episodes.spaces.filler import filler_leaf
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.structs import flatten, leaves_up_to, unflatten

__all__ = ["column_typed"]

# Dtype kinds of numbers and bools: the leaves whose fillers can take the column's dtype.
_NUMBERS = "biufc"
# The spaces whose leaves a one-hot read encodes (their fillers are float32 zero-hot vectors).
_ENCODED = (gym.spaces.Discrete, gym.spaces.MultiDiscrete)


def column_typed(
    store: Store, space: gym.Space[Any] | None, fill: Any, fillers: Any, one_hot_discrete: bool
) -> Any:
    """``fillers`` (a filler item or batch of ``space``) with ``store``'s leaf dtypes, where fit.

    Anything but a typed numpy column with a space gets ``fillers`` back as they are; so do
    fillers that nest otherwise than the column's items, and a one-hot read's encoded leaves.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch({"a": np.array([True])})
        >>> box = gym.spaces.Dict({"a": gym.spaces.Box(0, 1, ())})
        >>> column_typed(store, box, 1, {"a": np.ones(1, np.float32)}, False)
        {'a': array([ True])}
    """
    if space is None or not store.is_numpy or not getattr(store, "typed", 0):
        return fillers
    columns = store.leaves  # type: ignore[attr-defined]
    structure = store.structure  # type: ignore[attr-defined]
    if structure is None:
        if fillers.__class__ is not np.ndarray or fillers.dtype == columns[0].dtype:
            return fillers  # the common case: the column holds its space's dtype
        if one_hot_discrete and isinstance(space, _ENCODED):
            return fillers  # float32 zero-hot vectors, joining float32 one-hot rows
        return _retyped(fillers, fill, columns[0].dtype)
    found = leaves_up_to(structure, fillers)
    if found is None or len(found) != len(columns):
        return fillers
    # The one-hot leaves keep their float32 zero-hot fillers; the others, their column's.
    encoded = _encoded_leaves(structure, space) if one_hot_discrete else None
    if encoded is None or len(encoded) != len(found):
        encoded = [False] * len(found)
    if all(
        leaf.__class__ is not np.ndarray or leaf.dtype == column.dtype or skip
        for leaf, column, skip in zip(found, columns, encoded)
    ):
        return fillers
    leaves, nesting = flatten(fillers)
    if len(leaves) != len(found):
        return fillers
    # ``found`` is in the column's leaf order, which is flatten's: both sort dict keys.
    retyped = [
        _retyped(leaf, fill, column.dtype) if leaf.__class__ is np.ndarray and not skip else leaf
        for leaf, column, skip in zip(found, columns, encoded)
    ]
    return unflatten(nesting, retyped)


def _encoded_leaves(structure: Any, space: gym.Space[Any]) -> list[Any] | None:
    """Per leaf of the column, in its order: whether a one-hot read encodes it."""
    return leaves_up_to(structure, _ENCODED_FLAGS.get(space))


def _encoded_flags(space: gym.Space[Any]) -> Any:
    """The space's structure with, at each leaf, whether a one-hot read encodes it."""
    if isinstance(space, gym.spaces.Dict):
        return {key: _encoded_flags(part) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_encoded_flags(part) for part in space.spaces)
    return isinstance(space, _ENCODED)


# Worked out once per space: padded one-hot reads of a nested column ask on every call.
_ENCODED_FLAGS = PerSpaceCache(_encoded_flags)


def _retyped(leaf: np.ndarray, fill: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """``leaf`` (all ``fill``) in ``dtype``, or as it is where ``fill`` does not keep there."""
    if leaf.dtype.kind not in _NUMBERS or dtype.kind not in _NUMBERS:
        return leaf
    if leaf.dtype.kind in "fc" and dtype.kind in "fc":
        # A float filler joins a float column as numpy joins them, the space's rounding of
        # ``fill`` included: the values list mode (and RLlib) read; a narrower column would
        # round ``fill`` again.
        return leaf
    try:
        return filler_leaf(leaf.shape, fill, dtype)
    except ValueError:
        return leaf  # it does not keep its value there: the join promotes, as it must
