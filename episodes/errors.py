"""Errors several packages raise alike, defined once so that one ``except`` clause fits all."""

from __future__ import annotations

__all__ = ["DeviceError", "IntegerTypeError", "too_big_to_allocate"]


class DeviceError(ValueError, RuntimeError):
    """A ``device=`` torch does not know, or this process cannot use.

    A ``RuntimeError`` too, as torch's own errors for such devices are, and a ``ValueError``:
    the replay buffers' ``sample(device=...)`` and the rollout storage, circular buffer and
    converter raise this one class (``episodes.replay.errors.DeviceError`` and
    ``episodes.rollout.devices.DeviceError`` are names of it).

    Example:
        >>> issubclass(DeviceError, ValueError), issubclass(DeviceError, RuntimeError)
        (True, True)
    """


class IntegerTypeError(TypeError, ValueError):
    """An argument that must be an integer got something else.

    Such as a float (a whole one too), a bool, a string, None or an array. A ``TypeError``, as
    Python's own integer arguments raise, and a ``ValueError``, as some of the library's count
    checks raised before: ``except`` of either kind catches it, whichever function raised it
    (counts, sizes, lookbacks, times). A count of the right type but out of range (0, -1) is a
    plain ``ValueError``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> try:
        ...     SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0]).cut(2.0)
        ... except ValueError as error:
        ...     print(type(error).__name__, isinstance(error, TypeError))
        IntegerTypeError True
    """


# numpy's and torch's words for a size beyond what they can describe or the memory holds.
_TOO_BIG = (
    "maximum allowed dimension",
    "array is too big",
    "overflow",
    "allocate",
    "out of memory",
)


def too_big_to_allocate(error: BaseException) -> bool:
    """Whether ``error`` is numpy's or torch's way of saying an array is too large to make.

    A ``MemoryError`` or ``OverflowError``; or a ``ValueError``, ``RuntimeError`` or
    ``TypeError`` in the words they use for it (torch: a size beyond int64 is a
    ``TypeError``, an overflowing total or memory that cannot be had a ``RuntimeError``).
    Other errors of those types are not: the runner and the rollout storage name the sizes
    for these and let the others pass.

    Example:
        >>> too_big_to_allocate(MemoryError()), too_big_to_allocate(TypeError("bad shape"))
        (True, False)
        >>> too_big_to_allocate(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
        True
    """
    if isinstance(error, (MemoryError, OverflowError)):
        return True
    if not isinstance(error, (ValueError, RuntimeError, TypeError)):
        return False
    text = str(error).lower()
    return any(words in text for words in _TOO_BIG)
