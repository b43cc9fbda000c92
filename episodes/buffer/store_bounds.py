"""The positions and sizes a store's ``pop``, ``delete`` and ``truncate`` accept.

A store works in storage positions (lookback included, ``0 <= position < len``); the buffer
above it resolves Python indexing and lookback before it calls one. A store used directly (the
protocol is public: ``episodes.buffer.store``) checks them itself, so that a negative position
or a size beyond its items is refused before anything changes, the same way by every store:
without the check, a numpy store took ``truncate(len + 1)`` as a longer store whose last row
was left-over memory, and a list store took ``truncate(-1)`` as "drop the last item".

Example:
    >>> checked_position(2, 3), checked_size(3, 3)
    (2, 3)
    >>> checked_position(-1, 3)
    Traceback (most recent call last):
    IndexError: storage position -1 out of range for 3 stored items (0 <= position < 3)
"""

from __future__ import annotations

import operator

__all__ = ["checked_position", "checked_size"]


def checked_position(position: int, stored: int) -> int:
    """``position`` as an int, if it names one of ``stored`` items.

    Raises:
        TypeError: ``position`` is not an integer (a bool is not one here).
        IndexError: ``position`` is not in ``0 <= position < stored``.

    Example:
        >>> checked_position(0, 1)
        0
    """
    position = _as_int(position, "position")
    if not 0 <= position < stored:
        raise IndexError(
            f"storage position {position} out of range for {stored} stored items "
            f"(0 <= position < {stored})"
        )
    return position


def checked_size(size: int, stored: int) -> int:
    """``size`` as an int, if a store of ``stored`` items can be cut to it.

    Raises:
        TypeError: ``size`` is not an integer (a bool is not one here).
        IndexError: ``size`` is not in ``0 <= size <= stored``.

    Example:
        >>> checked_size(0, 2)
        0
    """
    size = _as_int(size, "size")
    if not 0 <= size <= stored:
        raise IndexError(
            f"truncate size {size} out of range for {stored} stored items (0 <= size <= {stored})"
        )
    return size


def _as_int(value: int, what: str) -> int:
    # A bool is an int to Python, but as a position it is a mistake (and numpy would read it
    # as a mask).
    if isinstance(value, bool):
        raise TypeError(f"a store's {what} must be an integer, got the bool {value}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"a store's {what} must be an integer, got {type(value).__name__} {value!r}"
        ) from None
