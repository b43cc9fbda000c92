"""Errors several packages raise alike, defined once so that one ``except`` clause fits all."""

from __future__ import annotations

__all__ = ["DeviceError"]


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
