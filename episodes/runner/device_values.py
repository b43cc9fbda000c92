"""What a torch device's blocks take from an env or a policy, refused in words naming the field.

The blocks hold bools, ints and floats as tensors. Anything else a step hands them (a numpy batch
of strings or objects, a list of per-env arrays, None for the rewards) would fail in torch's
words (a ``TypeError`` or ``RuntimeError`` that names no field) or be converted element by
element; it is a ``ValueError`` naming the field instead. The checks run where a conversion
already fails or where a value is not a tensor, so a step of tensors pays nothing for them.

Example:
    >>> import torch
    >>> as_device_batch({"a": np.zeros(2)}, torch.device("cpu"))["a"].dtype
    torch.float64
    >>> tensor_dtype(np.zeros(2, np.float32), "the env's observations")
    torch.float32
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from episodes.buffer.plain_arrays import holds_masked, masked_words, native_array, native_dtype
from episodes.runner.policy import check_no_mapping
from episodes.structs import map_batch

__all__ = ["as_device_batch", "as_host_typed", "check_env_flags", "tensor_dtype"]

# What torch raises for values no tensor holds (strings, objects, None, ragged lists).
_REFUSED = (TypeError, ValueError, RuntimeError)


def as_device_batch(batch: Any, device: torch.device, name: str = "a batch") -> Any:
    """A struct with every leaf a tensor on ``device`` (no copy for tensors already there).

    Raises:
        ValueError: A leaf of values a tensor cannot hold (strings, objects, None), or a numpy
            masked array with masked entries (its mask would be lost and the masked values
            recorded as data; one with none masked is the plain array it holds), naming
            ``name``.
        TypeError: A leaf that is a mapping but no dict (a TensorDict), naming ``name``.

    Example:
        >>> as_device_batch(np.zeros(2), torch.device("cpu")).dtype
        torch.float64
        >>> frozen = np.zeros(2)
        >>> frozen.flags.writeable = False  # np.asarray of a JAX array, np.broadcast_to
        >>> as_device_batch(frozen, torch.device("cpu")).tolist()  # copied: torch says nothing
        [0.0, 0.0]
        >>> as_device_batch(np.array(["a"]), torch.device("cpu"), "vf")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: vf: got <U1 values, which a torch device's blocks cannot hold: ...
        >>> as_device_batch(np.ma.masked_array([1.0], mask=[1]), torch.device("cpu"), "obs")
        Traceback (most recent call last):
        ...
        ValueError: obs: a numpy masked array with masked entries cannot be stored in a numpy ...
    """

    def tensor(leaf: Any) -> Any:
        host = not isinstance(leaf, torch.Tensor)  # the usual leaf (a tensor): no conversion
        if host and leaf.__class__ is not np.ndarray:
            check_no_mapping(leaf, name)  # torch would make a TensorDict a (rows, 0) tensor
            if holds_masked([leaf]):
                raise ValueError(masked_words(name))  # np.asarray would drop its mask
        try:
            if host:
                leaf = as_host_typed(leaf)
            return torch.as_tensor(leaf, device=device)
        except NotImplementedError:  # a meta tensor (a RuntimeError): the caller names it
            raise
        except _REFUSED:  # torch's own words name no field
            raise _refused(name, leaf) from None

    return map_batch(tensor, batch)


def as_host_typed(value: Any) -> Any:
    """``value`` as numpy types it (``np.asarray``), where numpy can; else (a tensor) itself.

    What the numpy path records for a list: Python floats are float64 there, where
    ``torch.as_tensor`` would make them float32 (torch's default dtype) and round them. A
    non-native byte order (``>f4``), which torch refuses, is made native, as the host's
    blocks store it. A read-only array (``np.asarray`` of a JAX array, ``np.broadcast_to``)
    is copied: torch warns of one it would share, and cannot mark a tensor read-only. A value
    numpy cannot convert (a list of tensors on an accelerator, a ragged list) is given back for
    torch's own conversion, or its refusal, to decide.

    Example:
        >>> as_host_typed([0.1, 0.2]).dtype, as_host_typed([1, 2]).dtype
        (dtype('float64'), dtype('int64'))
        >>> as_host_typed(np.zeros(2, ">i8")).dtype
        dtype('int64')
        >>> as_host_typed(np.broadcast_to(1.0, 2)).flags.writeable
        True
    """
    if isinstance(value, torch.Tensor):
        return value
    try:
        array = native_array(np.asarray(value))
    except (TypeError, ValueError, RuntimeError):
        return value
    return array if array.flags.writeable else array.copy()


def tensor_dtype(value: Any, name: str) -> torch.dtype:
    """The torch dtype of a batch a device column is about to take: a tensor, or a numpy array.

    Called only for a value whose dtype is not the column's (a tensor of the column's dtype
    never gets here).

    Raises:
        ValueError: Anything else (a list of per-env arrays, which a row write would refuse in
            torch's words or convert element by element), or a numpy dtype no tensor has
            (strings, objects, datetimes), naming ``name``.

    Example:
        >>> tensor_dtype(torch.zeros(2, dtype=torch.int32), "obs")
        torch.int32
        >>> tensor_dtype([np.zeros(3), np.zeros(3)], "obs")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: obs: got a list, which a torch device's blocks cannot hold: ...
    """
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, np.ndarray):
        try:
            return torch.from_numpy(np.empty(0, native_dtype(value.dtype))).dtype
        except _REFUSED:
            pass
    raise _refused(name, value)


def check_env_flags(rewards: Any, terminateds: Any, truncateds: Any, device: Any) -> None:
    """Raises the ``ValueError`` for the first of a step's rewards and flags no tensor holds.

    The recorder converts all three in one ``try``; this runs only when that failed, to name
    the field (``rewards`` None, a batch of strings or objects).

    Example:
        >>> check_env_flags(np.ones(2), [True, False], None, "cpu")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: the env's truncated: got None, which a torch device's blocks cannot hold: ...
    """
    named = (("rewards", rewards, None), ("terminated", terminateds, torch.bool))
    for name, value, dtype in (*named, ("truncated", truncateds, torch.bool)):
        try:
            torch.as_tensor(value, dtype=dtype, device=device)
        except NotImplementedError:  # a meta tensor: torch's words name it well enough
            raise
        except _REFUSED:
            raise _refused(f"the env's {name}", value) from None


def _refused(name: str, value: Any) -> ValueError:
    dtype = getattr(value, "dtype", None)
    what = "None" if value is None else f"a {type(value).__name__}"
    what = f"{dtype} values" if dtype is not None else what
    return ValueError(
        f"{name}: got {what}, which a torch device's blocks cannot hold: they record bools, "
        "ints and floats, one batched tensor [N, ...] per field (a numpy array is moved to the "
        "device)"
    )
