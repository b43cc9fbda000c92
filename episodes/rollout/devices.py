"""The ``device=`` argument of the rollout storage, the circular buffer and the converter.

Checked once, where the object is made or the call starts: never on a write or a batch.
"""

from __future__ import annotations

from typing import Any

import torch

from episodes.errors import DeviceError  # the replay buffers' too: one except fits both

__all__ = ["DeviceError", "checked_device"]


def checked_device(device: Any, name: str = "device", *, meta: bool = False) -> torch.device:
    """``device`` as a ``torch.device`` this process can put tensors on; None is the CPU.

    Accepts a ``torch.device``, a name (``"cpu"``, ``"cuda:0"``) or a device index. Each
    device is tried once per process (a tensor of no elements put there): later calls ask
    nothing of the device. ``meta=True`` takes the meta device too, for objects of shapes
    alone (the converter's layout checks build such storages).

    Raises:
        TypeError: ``device`` is no device, name or index (``3.5``).
        DeviceError: torch does not know it (``"abc"``), it is not available here
            (``"cuda"`` on a build or machine without one, where torch raised a bare
            ``AssertionError``), or it is the ``meta`` device, whose tensors hold no data:
            writes there would be lost (unless ``meta``). The message names ``name``.

    Example:
        >>> checked_device(None), checked_device("cpu"), checked_device(torch.device("cpu"))
        (device(type='cpu'), device(type='cpu'), device(type='cpu'))
        >>> checked_device("meta")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.errors.DeviceError: device='meta': a meta device holds no data, so ...
    """
    if device is None:
        return torch.device("cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:  # torch's words name no argument
        if isinstance(error, RuntimeError) and isinstance(device, int):  # an index: no accelerator
            raise DeviceError(f"{name}={device!r} is not available here: {error}") from error
        kind = TypeError if isinstance(error, TypeError) else DeviceError
        raise kind(f"{name} must be a torch device, its name or index, got {device!r}") from error
    if parsed.type == "meta" and not meta:  # tensors there hold shapes only: writes are lost
        raise DeviceError(
            f"{name}={device!r}: a meta device holds no data, so what is written there is lost"
        )
    if parsed in _WORKING:  # tried once already
        return parsed
    try:
        torch.empty(0, device=parsed)  # nothing to copy: only whether the device works here
    except (AssertionError, RuntimeError, NotImplementedError) as error:  # "cuda", "mps"
        why = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]  # not mps'
        raise DeviceError(f"{name}={device!r} is not available here: {why}") from error
    _WORKING.add(parsed)
    return parsed


_WORKING: set[torch.device] = set()  # devices a tensor was put on in this process
