"""The ``lookback`` attribute of a buffer: set through the constructor's checks.

RLlib's buffers take ``buf.lookback = n`` as a plain assignment; ours check it as the
constructor does, so a negative, fractional or too large lookback cannot leave a buffer whose
length is negative or whose reads fail.
"""

from __future__ import annotations

from typing import Any, SupportsIndex, overload

from episodes import indexing

__all__ = ["LookbackField", "checked_lookback"]


def checked_lookback(value: Any, items: int) -> int:
    """``value`` as a lookback over ``items`` stored items: an int >= 0, cut down to ``items``.

    Raises:
        TypeError: ``value`` is no integer (a float, a bool).
        ValueError: ``value`` is negative.

    Example:
        >>> checked_lookback(2, items=5), checked_lookback(9, items=5)
        (2, 5)
        >>> checked_lookback(-1, items=5)
        Traceback (most recent call last):
        ValueError: lookback must be >= 0, got -1
    """
    lookback = indexing.as_int(value, what="lookback")
    if lookback < 0:
        raise ValueError(f"lookback must be >= 0, got {lookback}")
    return min(lookback, items)


class LookbackField:
    """A descriptor over the ``_lookback`` slot whose assignments go through the checks.

    Example:
        >>> from episodes import InfiniteLookbackBuffer
        >>> buf = InfiniteLookbackBuffer([1, 2, 3])
        >>> buf.lookback = 10  # cut down to the 3 stored items, as the constructor does
        >>> buf.lookback, len(buf)
        (3, 0)
        >>> buf.lookback = 1.5
        Traceback (most recent call last):
        ...
        TypeError: lookback must be an int, got float (1.5)
    """

    @overload
    def __get__(self, obj: None, owner: Any = None) -> LookbackField: ...
    @overload
    def __get__(self, obj: object, owner: Any = None) -> int: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else obj._lookback

    def __set__(self, obj: Any, value: SupportsIndex) -> None:
        obj._lookback = checked_lookback(value, len(obj.store))
