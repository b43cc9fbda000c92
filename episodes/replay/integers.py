"""Integer indices, times and counts as the replay buffers read them: items judged one by one.

numpy reads ``[True, 2]`` as the int64 array ``[1, 2]``, ``[1.0, 2]`` as floats and ints beyond
int64 as objects, so a list's dtype alone cannot tell its items apart: a bool, a float or a
numeric string is no index, and is refused rather than read as 0, 1 or a truncated number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ITEM_ID_LIMIT", "holds_bool", "int_array"]

#: Item ids stay below this: a state, a save and a load all refuse ids that reach it, so that a
#: load, which numbers its steps after a saved id, stays within int64.
ITEM_ID_LIMIT = 2**62

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BOOLS = frozenset((bool, np.bool_))
_NUMBERS = (int, float, np.generic)  # items whose type alone says whether they are bools
_COMMON = frozenset(  # Python's and numpy's int and float types: no bool among them
    {int, float} | {np.dtype(code).type for code in np.typecodes["AllInteger"] + "efdg"}
)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def holds_bool(values: Any) -> bool:
    """Whether a list or tuple holds a bool (Python's or numpy's) at any depth.

    Anything else (an array, a tensor) has a dtype that says so: False here. A flat list of
    numbers is judged by the set of its items' types, without a Python loop over its items.

    Example:
        >>> holds_bool([True, 2]), holds_bool([1.0, np.False_]), holds_bool([[3, False]])
        (True, True, True)
        >>> holds_bool([1, 2.5]), holds_bool((np.int64(1),)), holds_bool(np.array([True]))
        (False, False, False)
    """
    if not isinstance(values, (list, tuple)):
        return False
    kinds = set(map(type, values))
    if kinds <= _COMMON:  # the usual list of ints or floats
        return False
    if all(issubclass(kind, _NUMBERS) for kind in kinds):
        return not _BOOLS.isdisjoint(kinds)
    return any(  # nested lists, 0-d arrays or tensors among the items
        holds_bool(item) if isinstance(item, (list, tuple)) else np.asarray(item).dtype == bool
        for item in values
    )


def int_array(values: Any, what: str, beyond: type[Exception] = ValueError) -> np.ndarray:
    """``values`` as an int64 array, or ``ValueError`` unless they are integers.

    Floats, bools and numeric strings are refused rather than truncated (``1.7`` is no index),
    bools among ints too (``[True, 2]``, which numpy reads as ``[1, 2]``). Integers beyond int64
    (uint64 ones above ``2**63 - 1``, Python ints numpy keeps as objects) raise ``beyond``
    rather than wrap around: a caller for which such a value is merely one it does not hold (a
    ``KeyError`` for ``locate``) passes that error.

    Example:
        >>> int_array([3, 1], "indices").tolist(), int_array([], "indices").dtype
        ([3, 1], dtype('int64'))
        >>> int_array([1.7], "indices")
        Traceback (most recent call last):
        ...
        ValueError: indices must be integers, got dtype float64
        >>> int_array([True, 2], "indices")
        Traceback (most recent call last):
        ...
        ValueError: indices must be integers, got dtype bool
        >>> int_array([2**64 - 3], "times", KeyError)
        Traceback (most recent call last):
        ...
        KeyError: 'times [18446744073709551613] lie beyond int64'
    """
    array = np.asarray(values)
    big: list[int] = []
    if isinstance(values, (list, tuple)) and array.dtype.kind in "iu" and holds_bool(values):
        raise ValueError(f"{what} must be integers, got dtype bool")
    if array.size and array.dtype.kind not in "iu":  # [] is a float64 array: nothing to refuse
        # Python ints beyond int64 are objects to numpy, or floats beside negative ints
        # ([-1, 2**63]): only the items themselves tell them from floats.
        items = np.asarray(values, dtype=object) if array.dtype.kind in "fO" else array
        if items.dtype != object or not all(map(_is_int, items.flat)):
            raise ValueError(f"{what} must be integers, got dtype {array.dtype}")
        big = [v for v in map(int, items.flat) if not _INT64_MIN <= v <= _INT64_MAX]
        array = items
    elif array.dtype.kind == "u":
        big = array[array > _INT64_MAX].tolist()
    if big:
        raise beyond(f"{what} {big[:5]} lie beyond int64")
    return array.astype(np.int64, copy=False)
