"""List-mode items batched into rows for training columns (connectors and converter).

A numpy masked array with masked entries among the items is refused, as ``to_numpy``, the
setters and the replay buffer refuse it: batched, its mask would be lost and its masked values
read as data (one with none masked is the plain array it holds). The usual items, all of one
class that is no container and no masked array (arrays, floats, ints), cost one scan of their
classes, which also tells the stacking their class (``batch_one_class``), as ``to_numpy``'s
does: the check costs no second scan.

Example:
    >>> import numpy as np
    >>> batched_items([np.zeros(2), np.ones(2)], None, None, "obs").shape
    (2, 2)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer.plain_arrays import check_items_unmasked
from episodes.buffer.reading import filler_mismatch
from episodes.spaces import batch_with_layout
from episodes.spaces.batching import batch_one_class

__all__ = ["batched_items", "layout_rows"]

# Classes that may be or hold a masked array; and the spaces whose layout batches items of
# another class as ``batch`` does (a first list or tuple alone is read otherwise).
_SUSPECT = (np.ma.MaskedArray, dict, list, tuple)
_PLAIN_SPACES = frozenset(
    (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
)
# Python bools and numpy's number classes (not timedelta64, an int whose items may differ in
# unit): items all of one of them batch into its dtype, as np.asarray types them.
_DTYPE_OF: dict[type, np.dtype[Any]] = {np.dtype(c).type: np.dtype(c) for c in "?bhilqBHILQefdgFDG"}
_DTYPE_OF[bool] = np.dtype(bool)


def layout_rows(items: Any, space: Any, what: str) -> Any:
    """``batch_with_layout(items, space)``, refusing masked arrays with masked entries.

    Items all of one class that can hold no mask (arrays, numbers) in a plain space, or none,
    are stacked by ``batch_one_class`` (bools and numpy numbers by ``np.fromiter`` into their
    dtype), which gives what ``batch_with_layout`` gives them.

    Raises:
        ValueError: An item holds a masked array with masked entries (the message starts
            with ``what``), or as ``batch_with_layout`` raises.

    Example:
        >>> import numpy as np
        >>> layout_rows([1.5, 2.0], None, "rewards")
        array([1.5, 2. ])
        >>> layout_rows([np.ma.masked_array([1.0, 2.0], mask=[0, 1])], None, "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: item 0 of 1: a numpy masked array with masked entries cannot be ...
    """
    return _stacked(items, space, _plain_class(items, what))


def batched_items(value: list[Any], space: Any, fill: Any, name: str) -> Any:
    """The items of a list-mode read batched with ``space``'s layout (``layout_rows``).

    Raises:
        ValueError: An item holds a masked array with masked entries, or the items do not
            stack (the error says whether ``fill``, the read's padding, is to blame); the
            message names ``name`` (the connector and column).

    Example:
        >>> import numpy as np
        >>> batched_items([np.ma.masked_array([1.0], mask=[1])], None, None, "FrameStack 'obs'")
        Traceback (most recent call last):
        ...
        ValueError: FrameStack 'obs': item 0 of 1: a numpy masked array with masked entries ...
    """
    what = name or "a column"
    one = _plain_class(value, what)
    try:
        return _stacked(value, space, one)
    except ValueError as err:
        # Without a space a read pads with ``fill`` itself: only then can the filler be to blame.
        padded = fill is not None and any(item is fill for item in value)
        why = (
            filler_mismatch(fill) if padded else "the episode's items differ in shape or structure"
        )
        raise ValueError(f"{what}: the rows read do not stack ({err}); {why}") from err


def _plain_class(items: Any, what: str) -> type | None:
    """The one class of ``items`` where it can hold no mask; else None, once none holds one.

    Raises:
        ValueError: An item holds a masked array with masked entries, naming ``what``.
    """
    kinds = list(map(type, items))
    first = kinds[0] if kinds else None
    if first is not None and not issubclass(first, _SUSPECT) and kinds.count(first) == len(kinds):
        return first
    try:
        check_items_unmasked(items)  # batched, their masks would be lost
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None
    return None


def _stacked(items: Any, space: Any, one: type | None) -> Any:
    """``batch_with_layout(items, space)``, by ``batch_one_class`` for items of class ``one``.

    The caller's scan of the items' classes stands in for batch's own, as in ``to_numpy``.
    """
    if one is not None and (space is None or space.__class__ in _PLAIN_SPACES):
        dtype = _DTYPE_OF.get(one)
        if dtype is not None:  # np.fromiter reads them in about half asarray's time
            return np.fromiter(items, dtype, len(items))
        return batch_one_class(items, one)
    return batch_with_layout(items, space)
