"""What ``InfiniteLookbackBuffer.set`` writes for a slice or list of indices: a list of items.

``new_data`` for several positions is a list of items, or any other sequence of items (a
deque, a ``UserList``, a range: taken as the list of its items, the values as they are, as the
constructor takes one), another buffer (its visible items) or a batched struct of arrays (an
array, a tensor, a dict or tuple of them), split into items along its leading axis. Strings
are no list of items, and neither are tuples: a tuple is structure
(contract 3.7), never a list of items: a batch holding a tuple where the column's items hold
one value is refused (a list there is a numpy'd column's layout of a leaf recorded as lists,
one array per position, and is written back as such). A tuple would otherwise be split across
the items: a tuple of two Box rows given to a Box column would write ``[a0, b0]`` and
``[a1, b1]`` (each row spread over both items), and a tuple of Tuple items would be scrambled
the same way. Other differences
(a dict batch missing a key) give items that the checks of ``set`` judge as they always did.

The column's item nesting is taken from the numpy column's layout, else from its space
(Dict and Tuple nest, the spaces with a fixed layout are leaves), else from its first stored
item. Without any (an empty list column, a space of items without a fixed layout and no items)
a batch is taken as it is.

Example:
    >>> import numpy as np
    >>> from episodes.buffer.list_store import ListStore
    >>> box = gym.spaces.Box(-5, 5, (2,), np.float32)
    >>> rows = (np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> item_list(ListStore([np.zeros(2)] * 3), box, rows)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: new_data for a slice or list of indices is a tuple ... give a list of items...
    >>> item_list(ListStore([{"x": 0.0}] * 3), None, {"x": np.array([1.0, 2.0])})
    [{'x': np.float64(1.0)}, {'x': np.float64(2.0)}]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym

from episodes.buffer.array_store import ArrayStore
from episodes.buffer.store import Store
from episodes.buffer.value_fit import batch_leaves
from episodes.structs import same_nesting

__all__ = ["extend_items", "item_list", "one_pass_items"]

# Spaces whose items are one leaf of a numpy column (their parts never nest).
_LEAF_SPACES = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiBinary,
    gym.spaces.MultiDiscrete,
    gym.spaces.Text,
)
_UNKNOWN = object()


def item_list(store: Store, space: gym.Space[Any] | None, new_data: Any) -> list[Any]:
    """``new_data`` (not a buffer) for a slice or list write as a list of items, checked.

    A sequence that is no list, tuple, string or array (a deque, a range) is the list of its
    items, never run through numpy, which would make its items one dtype (``1`` beside
    ``"a"`` the string ``"1"``).

    Raises:
        TypeError: ``new_data`` is neither a sequence of items nor a batched struct, or it is
            a batch (a tuple or dict) holding a tuple where the column's items hold one value.

    Example:
        >>> from collections import deque
        >>> from episodes.buffer.list_store import ListStore
        >>> item_list(ListStore([0.0, 0.0]), None, [1.0, 2.0])
        [1.0, 2.0]
        >>> item_list(ListStore([0, 0]), None, deque([1, "a"]))
        [1, 'a']
    """
    if isinstance(new_data, list):
        return new_data
    if _item_sequence(new_data):
        return list(new_data)
    try:
        batch = ArrayStore.from_batch(new_data)
    except (ValueError, TypeError) as err:
        raise TypeError(
            "new_data for a slice or list of indices must be a list of items (or another "
            f"sequence of them) or a batched struct of arrays, got {type(new_data).__name__}"
        ) from err
    if isinstance(new_data, (tuple, dict)):
        nesting = _item_nesting(store, space)
        if nesting is not _UNKNOWN and _splits_values(nesting, new_data):
            raise TypeError(
                f"new_data for a slice or list of indices is a {type(new_data).__name__} laid "
                "out as a batch, but it holds a tuple where the column's items hold "
                "one value (a tuple is an item's structure, not a list of items): give a list "
                "of items, or a batch nested like one item"
            )
    return batch.items(0)


def _item_sequence(new_data: Any) -> bool:
    """Whether ``new_data`` is a sequence of items: no tuple (structure), string or array.

    Example:
        >>> import numpy as np
        >>> _item_sequence(range(2)), _item_sequence((1, 2)), _item_sequence(np.arange(2))
        (True, False, False)
    """
    return (
        isinstance(new_data, Sequence)
        and not isinstance(new_data, (tuple, str, bytes, bytearray, memoryview))
        and not hasattr(new_data, "__array__")  # an array-like: a batch (a tensor's rows)
    )


def _item_nesting(store: Store, space: gym.Space[Any] | None) -> Any:
    """The nesting of one item of the column (its leaves any values), or ``_UNKNOWN``.

    Example:
        >>> import numpy as np
        >>> from episodes.buffer.list_store import ListStore
        >>> pair = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (2,))))
        >>> _item_nesting(ListStore([None]), gym.spaces.Dict({"p": pair}))
        {'p': (None, None)}
        >>> _item_nesting(ArrayStore.from_batch(np.zeros((2, 3))), pair) is None
        True
    """
    if len(store) == 0:
        return _UNKNOWN
    if isinstance(store, ArrayStore):
        return store.structure
    if space is not None:
        nesting = _space_nesting(space)
        if nesting is not _UNKNOWN:
            return nesting
    return store.get(0)


def _splits_values(nesting: Any, batch: Any) -> bool:
    """Whether ``batch`` holds a tuple where ``nesting`` (an item's) holds a value.

    A list there is kept: it is how a numpy'd column lays out a leaf whose items were recorded
    as lists (one array per position, what its getters give), which the batch writes back.
    """
    if isinstance(batch, (tuple, list)):
        if not isinstance(nesting, (tuple, list)):
            return isinstance(batch, tuple)
        parts = len(nesting)
        return any(
            _splits_values(nesting[i] if i < parts else None, part) for i, part in enumerate(batch)
        )
    if isinstance(batch, dict):
        keyed = nesting if isinstance(nesting, dict) else {}
        return any(_splits_values(keyed.get(key), part) for key, part in batch.items())
    return False


def _space_nesting(space: gym.Space[Any]) -> Any:
    if isinstance(space, _LEAF_SPACES):
        return None
    if isinstance(space, gym.spaces.Dict):
        parts = {key: _space_nesting(sub) for key, sub in space.spaces.items()}
        return _UNKNOWN if any(p is _UNKNOWN for p in parts.values()) else parts
    if isinstance(space, gym.spaces.Tuple):
        subs = tuple(_space_nesting(sub) for sub in space.spaces)
        return _UNKNOWN if any(p is _UNKNOWN for p in subs) else subs
    return _UNKNOWN  # Sequence, Graph, OneOf, custom spaces: items of no fixed nesting


def one_pass_items(items: Any) -> bool:
    """Whether ``extend`` reads ``items`` into a list first: an iterable, no list or batch.

    A generator, a set or a range is read whole before anything changes, in both modes: list
    mode kept the items appended before one failed, and a numpy'd column took the iterable for
    a batch. Tuples, dicts and arrays (``__array__``: tensors too) are batched structs there.

    Example:
        >>> one_pass_items(x for x in [1]), one_pass_items([1]), one_pass_items((1, 2))
        (True, False, False)
    """
    if isinstance(items, (list, tuple, dict, str, bytes)) or hasattr(items, "__array__"):
        return False
    return isinstance(items, Iterable)


def extend_items(store: Store, space: gym.Space[Any] | None, items: Any) -> Any:
    """What ``InfiniteLookbackBuffer.extend`` appends for ``items``, read before any change.

    A list is taken as it is, and a one-pass iterable (:func:`one_pass_items`) read into one.
    A numpy'd ``store`` takes anything else as a batch (``extend_batch`` checks it), except a
    tuple where its items hold no tuple, which is the tuple of its items. In list
    mode the items are read as a numpy'd column reads them and as the setters do (contract
    3.7): a dict is a batched struct, split into its items along the leading axis (the items a
    numpy'd read gives, never the dict's keys); so is a tuple where the column's items are
    tuples and it nests like one (a Tuple column's read), while any other tuple is the tuple of
    its items; a string or bytes is no list of items. An array or tensor is iterated (its
    rows), as any other sequence.

    Raises:
        ValueError: ``items`` is a string or bytes, or a batch (in list mode) whose leaves do
            not share a leading axis or that holds a tuple where the column's items hold one
            value, as a numpy'd buffer's ``extend`` refuses them.
        TypeError: A numpy'd ``store`` and ``items`` that are no list of items (``0``, ``None``,
            a 0-d array), as a list store's ``extend`` refuses them.

    Example:
        >>> import numpy as np
        >>> from episodes.buffer.list_store import ListStore
        >>> extend_items(ListStore([{"x": 0}]), None, {"x": np.array([1, 2])})
        [{'x': np.int64(1)}, {'x': np.int64(2)}]
        >>> extend_items(ListStore(["a"]), None, "bc")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: extend takes a list of items or a batch ..., got str...
    """
    if isinstance(items, list):
        return items
    if one_pass_items(items):
        return list(items)
    if store.is_numpy:
        iterable = hasattr(items, "__iter__") or hasattr(items, "__getitem__")  # as list mode
        if not iterable or getattr(items, "ndim", None) == 0:  # 0, None, np.int64(0)
            kind = type(items).__name__  # list mode's TypeError, not a batch's ValueError
            raise TypeError(f"extend: items must be a list (or iterable) of items, got {kind}")
        if isinstance(items, tuple):
            nesting = _item_nesting(store, space)
            if nesting is _UNKNOWN and space is not None:
                nesting = _space_nesting(space)
            if nesting is not _UNKNOWN and not isinstance(nesting, tuple):
                return list(items)  # the items of a column that holds no tuples, as list mode
        return items
    if isinstance(items, (str, bytes)):
        raise ValueError(
            "extend takes a list of items or a batch whose leaves share a leading axis, got "
            f"{type(items).__name__} (one item, not a list of items: give [value])"
        )
    if isinstance(items, tuple):
        nesting = _item_nesting(store, space)
        if not isinstance(nesting, tuple) or not same_nesting(nesting, items):
            return items  # a tuple of items
    elif not isinstance(items, dict):
        return items
    arrays, _ = batch_leaves(items)  # the numpy'd extend's refusals
    if not arrays:
        return []  # items without values: none, as a numpy'd buffer takes them
    if isinstance(items, dict):
        nesting = _item_nesting(store, space)
        if nesting is not _UNKNOWN and _splits_values(nesting, items):
            raise ValueError(
                "extend of a dict batch holding a tuple where the column's items hold one "
                "value (a tuple is an item's structure, not a list of items): structure mismatch"
            )
    return ArrayStore.from_batch(items).items(0)
