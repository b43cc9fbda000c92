"""A buffer's store taken as a whole: items copied out, a replacement checked, states read.

Example:
    >>> from episodes.buffer.list_store import ListStore
    >>> check_replacement(ListStore([1, 2]), ListStore([1, 2]))
    >>> owned_items(ListStore([1, 2, 3]), lookback=1)
    [2, 3]
"""

from __future__ import annotations

import copy as copying
from typing import Any

import numpy as np

from episodes import indexing
from episodes.buffer.array_copies import remember_untyped, untyped_data
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.buffer.store import Store
from episodes.structs import map_leaves


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


def shallow_store(store: Store) -> Store:
    """A store of the same items that writes into none of ``store``'s (``copy.copy`` of a buffer).

    A list store's list is copied (its items are shared); a numpy store is copied on write
    (:mod:`~episodes.buffer.array_copies`), so the copy costs no copy of the rows.

    Example:
        >>> store = ListStore([1, 2]); clone = shallow_store(store); clone.append(3)
        >>> clone, store
        (ListStore([1, 2, 3]), ListStore([1, 2]))
    """
    if store.is_numpy:
        return copying.copy(store)
    return store.copy_range(0, len(store))


def layout_state(store: Store) -> dict[str, Any]:
    """The state keys telling what a column's items cannot: how its dtypes were decided.

    ``typed`` (whether a numpy column's dtypes are decided, which an empty one cannot show)
    always; ``untyped_data`` (:func:`~episodes.buffer.array_copies.untyped_data`) only for a
    numpy column whose first item chose its dtypes.

    Example:
        >>> store = ArrayStore.untyped(); store.append(1); layout_state(store)
        {'typed': True, 'untyped_data': array([], dtype=float64)}
    """
    state: dict[str, Any] = {"typed": bool(getattr(store, "typed", False))}
    untyped = untyped_data(store)
    if untyped is not None:
        state["untyped_data"] = untyped
    return state


def store_from_state(state: Any, *, copy: bool) -> tuple[Store, int]:
    """The store and lookback a buffer state describes, every key checked first.

    ``typed`` and ``untyped_data`` are optional (older states, and RLlib's, lack them). With
    ``copy`` the store holds copies of the state's list or arrays (not of a list's items).

    Raises:
        TypeError: ``state`` is not a dict.
        KeyError: A key other than ``typed`` and ``untyped_data`` is missing.
        ValueError: A value is malformed, or the values disagree.

    Example:
        >>> state = {"data": [1, 2], "lookback": 1, "finalized": False, "space": None}
        >>> store_from_state(state, copy=True)
        (ListStore([1, 2]), 1)
    """
    if not isinstance(state, dict):
        raise TypeError(f"a buffer state must be a dict, got {type(state).__name__}")
    missing = {"data", "lookback", "finalized", "space"} - set(state)
    if missing:
        raise KeyError(f"buffer state is missing keys {sorted(missing)}")
    data, finalized, lookback = state["data"], state["finalized"], state["lookback"]
    if not isinstance(finalized, (bool, np.bool_)):  # "no" would read as True
        raise ValueError(f"buffer state's finalized must be a bool, got {finalized!r}")
    finalized = bool(finalized)
    # A finalized buffer's data may be a list too: the batch of list-structured items.
    if not finalized and not isinstance(data, list):
        raise ValueError(
            f"buffer state says finalized={finalized} but its data is a {type(data).__name__}"
        )
    lookback = indexing.as_int(lookback, what="lookback")
    if lookback < 0:
        raise ValueError(f"lookback must be >= 0, got {lookback}")
    typed = state.get("typed")
    if typed is not None and not isinstance(typed, (bool, np.bool_)):
        raise ValueError(f"buffer state's typed must be a bool, got {typed!r}")
    untyped = state.get("untyped_data")
    if untyped is not None and not finalized:
        raise ValueError("buffer state's untyped_data needs finalized=True (a numpy column)")
    if not finalized:
        store: Store = ListStore(list(data) if copy else data)
    else:
        if copy:  # a restored buffer must not write into the caller's snapshot
            data = map_leaves(np.array, data)
        array_store = ArrayStore.from_batch(data, typed=None if typed is None else bool(typed))
        if untyped is not None:
            remember_untyped(array_store, untyped)
        store = array_store
    if lookback > len(store):
        raise ValueError(f"buffer state has lookback {lookback} but only {len(store)} items")
    return store, lookback
