"""The copy of ``custom_data`` that ``cut``, ``slice``, ``get_state`` and ``from_state`` take.

A deep copy, except for the values no deep copy can make (a lock, a tensor that needs grad and is
no graph leaf): those are shared, the same object in both dicts, as a shallow copy would share
them. Only those are shared: the dicts, lists, tuples and sets around them are copied, and so is
every other value beside them, so a successor's rows are never its parent's.
"""

from __future__ import annotations

import copy
from typing import Any

# The containers copied piece by piece when a value inside them cannot be deep-copied (their
# exact types: a subclass, defaultdict say, may need more than its items to be rebuilt).
_WALKED = (dict, list, tuple, set, frozenset)


def copied_custom(data: dict[Any, Any]) -> dict[Any, Any]:
    """A deep copy of ``custom_data``, sharing only the values no deep copy can make.

    One ``copy.deepcopy`` of the whole dict first (the common case). Where it fails, whatever it
    raised, the dict is copied piece by piece: dicts, lists, tuples and sets are rebuilt, every
    other value is deep-copied on its own, and a value whose deep copy fails is shared. Values
    met twice are copied once, as ``copy.deepcopy`` does.

    Example:
        >>> import threading
        >>> data = {"state": {"rows": [1, 2], "lock": threading.Lock()}}
        >>> copied = copied_custom(data)
        >>> copied["state"]["lock"] is data["state"]["lock"]
        True
        >>> copied["state"]["rows"] is data["state"]["rows"], copied == data
        (False, True)
    """
    try:
        return copy.deepcopy(data)
    except Exception:  # noqa: BLE001 - any failure of a deep copy: copied piece by piece
        return copied_or_shared(data, {})


def copied_or_shared(value: Any, memo: dict[int, Any]) -> Any:
    """``value`` deep-copied, containers piece by piece; a value no deep copy can make shared.

    ``memo`` is ``copy.deepcopy``'s memo, shared by the pieces of one copy so that a value met
    twice (or a list holding itself) is copied once. A deep copy that fails leaves ``memo`` as
    it found it, so no half-built copy is handed out later.

    Example:
        >>> import threading
        >>> lock = threading.Lock()
        >>> rows = [1]
        >>> copied = copied_or_shared([rows, (lock, rows)], {})
        >>> copied[1][0] is lock, copied[0] is rows, copied[1][1] is copied[0]
        (True, False, True)
    """
    kind = type(value)
    if kind not in _WALKED:
        before = len(memo)
        try:
            return copy.deepcopy(value, memo)
        except Exception:  # noqa: BLE001 - a value no deep copy can make: shared
            for key in list(memo)[before:]:  # what the failed copy memoised, half built
                del memo[key]
            return value
    key = id(value)
    if key in memo:
        return memo[key]
    if kind is dict:
        new_dict: dict[Any, Any] = {}
        memo[key] = new_dict  # before its items: a dict may hold itself
        for k, v in value.items():
            new_dict[copied_or_shared(k, memo)] = copied_or_shared(v, memo)
        return new_dict
    if kind is list:
        new_list: list[Any] = []
        memo[key] = new_list
        new_list.extend(copied_or_shared(v, memo) for v in value)
        return new_list
    items = [copied_or_shared(v, memo) for v in value]
    if key in memo:  # a list inside holds this tuple: it was copied on the way
        return memo[key]
    if kind is tuple and all(new is old for new, old in zip(items, value)):
        copied: Any = value  # as copy.deepcopy keeps a tuple of atoms
    else:
        copied = kind(items)
    memo[key] = copied
    return copied
