"""A buffer's store taken as a whole: its visible items copied out, a replacement checked.

Example:
    >>> from episodes.buffer.list_store import ListStore
    >>> check_replacement(ListStore([1, 2]), ListStore([1, 2]))
    >>> owned_items(ListStore([1, 2, 3]), lookback=1)
    [2, 3]
"""

from __future__ import annotations

from typing import Any

from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.buffer.store import Store


def owned_items(store: Store, lookback: int) -> list[Any]:
    """The items after ``lookback``, sharing no memory with ``store`` (a numpy store's are views).

    Example:
        >>> import numpy as np
        >>> items = owned_items(ArrayStore.from_batch(np.arange(3)), lookback=1)
        >>> [int(item) for item in items]
        [1, 2]
    """
    if store.is_numpy:
        return store.copy_range(lookback, len(store)).items(0)
    return store.items(lookback)


def check_replacement(current: Store, store: Any) -> None:
    """Refuses a store that cannot stand in for ``current`` (which ``adopt_store`` would drop).

    A store of another length would leave the buffer's lookback pointing past its items.

    Raises:
        TypeError: ``store`` is not a list or array store.
        ValueError: ``store`` holds another number of items (lookback included).

    Example:
        >>> check_replacement(ListStore([1, 2, 3]), ListStore([1]))
        Traceback (most recent call last):
        ...
        ValueError: adopt_store: the store holds 1 items, the buffer 3 (lookback included)
    """
    if not isinstance(store, (ListStore, ArrayStore)):
        raise TypeError(f"adopt_store needs a ListStore or ArrayStore, got {type(store).__name__}")
    if len(store) != len(current):
        raise ValueError(
            f"adopt_store: the store holds {len(store)} items, the buffer {len(current)} "
            "(lookback included)"
        )
