"""Device tensors inside a vector env's infos, copied to the host as numpy arrays.

A torch env's infos are kept as it returned them and read at the end of a call; this copies
their tensors to the host with one copy per dtype and device, so the host waits for the
device once per dtype rather than once per tensor.

Example:
    >>> import torch
    >>> to_host({"x": torch.tensor([1, 2]), "n": 3})
    {'x': array([1, 2]), 'n': 3}
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["to_host", "to_host_all"]


def to_host(item: Any, name: str = "a struct") -> Any:
    """A struct (dicts, tuples, lists) with every torch tensor leaf copied to a numpy array.

    Example:
        >>> to_host({"x": torch.tensor([1, 2]), "y": 3})
        {'x': array([1, 2]), 'y': 3}
    """
    return to_host_all([item], name)[0]


def to_host_all(items: list[Any], name: str = "a struct") -> list[Any]:
    """:func:`to_host` of many structs, with one device-to-host copy per dtype and device.

    Each copy makes the host wait for the device: a call's infos, one struct per recorded
    row, would otherwise wait once per tensor. A dtype numpy lacks comes as one holding each
    of its values: bfloat16 and float8 as float32, complex32 as complex64.

    Raises:
        ValueError: A tensor no numpy dtype holds (bit-packed or sub-byte dtypes) or without
            data (the meta device); the message names ``name`` and the tensor's place in it.

    Example:
        >>> to_host_all([{"x": torch.tensor([1, 2])}, {"x": torch.tensor(3), "s": "a"}])
        [{'x': array([1, 2])}, {'x': array(3), 's': 'a'}]
        >>> to_host({"e": torch.tensor([0.5], dtype=torch.bfloat16)})
        {'e': array([0.5], dtype=float32)}
        >>> to_host({"e": torch.zeros(2, device="meta")}, "infos")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: infos['e']: a torch.float32 tensor on meta, which ...
    """
    tensors: list[torch.Tensor] = []

    def collect(item: Any) -> None:
        if isinstance(item, torch.Tensor):
            if item.layout is torch.strided:  # sparse ones stay as given, as on the host path
                tensors.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                collect(value)
        elif _rebuilt(item) is not None:
            for value in item:
                collect(value)

    for item in items:
        collect(item)
    groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
    for i, tensor in enumerate(tensors):
        groups.setdefault((tensor.dtype, tensor.device), []).append(i)
    host: list[Any] = [None] * len(tensors)
    for (dtype, _), members in groups.items():
        joined = torch.cat([tensors[i].detach().reshape(-1) for i in members])
        try:  # converted on the device: still one copy
            joined_host = joined.to(_host_dtype(dtype) or dtype).cpu().numpy()
        except (TypeError, NotImplementedError) as err:  # torch's words name no field
            first = tensors[members[0]]
            where = next(p for p in (_path_to(first, item) for item in items) if p is not None)
            raise ValueError(
                f"{name}{where}: a {dtype} tensor on {first.device}, which cannot be copied to "
                f"the host as a numpy array ({err}); report bools, ints or floats"
            ) from None
        start = 0
        for i in members:
            stop = start + tensors[i].numel()
            host[i] = joined_host[start:stop].reshape(tuple(tensors[i].shape))
            start = stop
    leaves = iter(host)

    def rebuild(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return next(leaves) if item.layout is torch.strided else item
        if isinstance(item, dict):
            return {key: rebuild(value) for key, value in item.items()}
        make = _rebuilt(item)
        return item if make is None else make([rebuild(value) for value in item])

    return [rebuild(item) for item in items]


def _rebuilt(item: Any) -> Callable[[list[Any]], Any] | None:
    """How a list or tuple is rebuilt from its items: a namedtuple by its ``_make``.

    None for other subclasses, whose constructors may take other arguments: kept as given.
    """
    kind = type(item)
    if kind is list or kind is tuple:
        return kind
    if isinstance(item, tuple) and hasattr(kind, "_make") and hasattr(kind, "_fields"):
        return kind._make
    return None


@functools.cache
def _host_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """The dtype a ``dtype`` tensor is copied to the host in; None where no numpy dtype fits.

    Its own when numpy has it; else float32 for a float (bfloat16, float8: float32 holds each
    of their values) and complex64 for complex32.

    Example:
        >>> _host_dtype(torch.int32), _host_dtype(torch.bfloat16), _host_dtype(torch.uint4)
        (torch.int32, torch.float32, None)
    """
    wide = torch.complex64 if dtype.is_complex else torch.float32
    for host in (dtype, wide) if dtype.is_complex or dtype.is_floating_point else (dtype,):
        try:
            torch.zeros(1, dtype=dtype, device="cpu").to(host).numpy()
            return host
        except (TypeError, RuntimeError, NotImplementedError):
            pass
    return None


def _path_to(target: torch.Tensor, item: Any, path: str = "") -> str | None:
    """Where ``target`` sits in ``item`` (``"['key'][0]"``), or None."""
    if item is target:
        return path
    pairs = enumerate(item) if isinstance(item, (tuple, list)) else ()
    for key, value in item.items() if isinstance(item, dict) else pairs:
        found = _path_to(target, value, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None
