"""Errors several packages raise alike, defined once so that one ``except`` clause fits all."""

from __future__ import annotations

__all__ = ["DeviceError", "IntegerTypeError"]


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
