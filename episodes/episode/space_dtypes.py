"""A list-mode column's stack in its space's dtypes, as ``to_numpy`` keeps observations."""

from __future__ import annotations

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.value_fit import in_space_batch_dtypes

__all__ = ["space_typed"]


def space_typed(column: InfiniteLookbackBuffer, store: ArrayStore) -> ArrayStore:
    """``store``, the stack of list-mode ``column``, with each part in its space's dtype.

    Where every item's part is in the part's space (see
    :func:`episodes.buffer.value_fit.in_space_batch_dtypes`), as a column numpy'd while
    empty opens in those dtypes; ``store`` itself where nothing changes or there is no space.

    Example:
        >>> import gymnasium as gym
        >>> column = InfiniteLookbackBuffer([True, False], space=gym.spaces.Discrete(3))
        >>> space_typed(column, column.stacked()).data.dtype
        dtype('int64')
    """
    if column.space is None:
        return store
    data = store.data
    typed = in_space_batch_dtypes(column.space, data, column.store.items(0))
    return store if typed is data else ArrayStore.from_batch(typed)
