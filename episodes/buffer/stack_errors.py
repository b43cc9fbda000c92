"""Errors for items numpy could not stack, naming the items (not numpy's inhomogeneous shape).

Built only after numpy failed (in an ``except`` branch): the fast path pays nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["layout", "unstackable"]

_ARRAY_LIKE = (np.ndarray, np.generic, int, float, complex, list)


def layout(item: Any) -> Any:
    """How ``item`` lays out: dicts and tuples walked, a leaf's shape (or type, or "ragged").

    Example:
        >>> layout({"a": np.zeros(2), "b": (None, [1, [2]])})
        {'a': 'shape (2,)', 'b': ('type NoneType', 'a ragged nested list')}
    """
    if isinstance(item, dict):
        return {key: layout(value) for key, value in item.items()}
    if isinstance(item, tuple):
        return tuple(layout(value) for value in item)
    if not isinstance(item, _ARRAY_LIKE):
        return f"type {type(item).__name__}"
    try:
        return f"shape {np.shape(item)}"
    except ValueError:
        return "a ragged nested list"


def unstackable(items: list[Any]) -> ValueError | None:
    """The error naming the first item that lays out unlike item 0 (None if none does).

    Example:
        >>> str(unstackable([np.zeros(2), np.zeros(2), np.zeros(3)]))
        'the items do not stack: item 0 has shape (2,), item 2 has shape (3,)'
        >>> str(unstackable([{"a": 1}, {"b": 1}]))
        "the items do not stack: item 0 has {'a': 'shape ()'}, item 1 has {'b': 'shape ()'}"
        >>> unstackable([1, 2]) is None
        True
    """
    if not items:
        return None
    try:
        first = layout(items[0])
        for position, item in enumerate(items):
            found = layout(item)
            if found != first or (position == 0 and found == "a ragged nested list"):
                return ValueError(
                    f"the items do not stack: item 0 has {_words(first)}, "
                    f"item {position} has {_words(found)}"
                )
    except RecursionError:  # an item holding itself: the stacking's own error names it
        return None
    return None


def _words(found: Any) -> str:
    return found if isinstance(found, str) else repr(found)
