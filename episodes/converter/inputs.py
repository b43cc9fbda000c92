"""Checks of what callers hand the converter: flags, keys, and the values that bootstrap.

A bootstrap value comes from ``value_fn`` or from a chunk's ``custom_data``; every path (the
general one, the runner's blocks on the host or on a device) takes it through
:func:`real_values` or :func:`real_value_tensor`, so ``None`` (a NaN), a complex number (its
real part), a string (parsed) or a bool (1.0) is refused alike instead of being bootstrapped.

Example:
    >>> real_values([[1.0], [2]], 2, "value_fn returned").tolist()
    [1.0, 2.0]
    >>> real_values(None, 1, "value_fn returned")
    Traceback (most recent call last):
    ...
    ValueError: value_fn returned None, not 1 real number (ints or floats; bools, complex ...
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

from episodes.converter.columns import ColumnKeys
from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag

#: numpy dtype kinds of a value: signed and unsigned ints, floats (not bool or complex).
_VALUE_KINDS = "iuf"


def column_keys(keys: Any) -> ColumnKeys:
    """``keys``, or ``ColumnKeys()`` for None; anything else (a dict of keys) is refused.

    Example:
        >>> column_keys(None) == ColumnKeys()
        True
        >>> column_keys({"values": "v"})
        Traceback (most recent call last):
        ...
        TypeError: keys must be a ColumnKeys (or None), got dict ({'values': 'v'})
    """
    if keys is None:
        return ColumnKeys()
    if isinstance(keys, ColumnKeys):
        return keys
    raise TypeError(
        f"keys must be a ColumnKeys (or None), got {type(keys).__name__} ({reprlib.repr(keys)})"
    )


def refuse_one_episode(episodes: Any, takes: str) -> None:
    """Refuses one episode given where a sequence of chunks is taken, saying to wrap it.

    An episode is no ``Sequence``: iterating it would read ``ep[0]``, which episodes refuse
    with words about slices. ``takes`` says what the caller takes.

    Raises:
        TypeError: ``episodes`` is one ``SingleAgentEpisode``.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> refuse_one_episode([], "f takes chunks")
        >>> refuse_one_episode(SingleAgentEpisode("a"), "f takes chunks")
        Traceback (most recent call last):
        TypeError: f takes chunks, got one episode ('a'); wrap it in a list: [episode]
    """
    if isinstance(episodes, SingleAgentEpisode):
        one = f"one episode ({episodes.id_!r})"
        raise TypeError(f"{takes}, got {one}; wrap it in a list: [episode]")


def chunk_sequence(episodes: Any, who: str, *, flat: bool = False) -> Sequence[Any]:
    """``episodes`` as a sequence that can be read more than once (an iterator is listed).

    One episode, None, a string or a mapping is refused, naming ``who``; with ``flat``, per-env
    lists too.

    Raises:
        TypeError: Not an iterable of chunks (or of per-env lists of them).

    Example:
        >>> chunk_sequence(iter([]), "f")
        []
        >>> chunk_sequence({"a": 1}, "f")
        Traceback (most recent call last):
        TypeError: f takes chunks (a flat list or per-env lists), got dict
    """
    takes = f"{who} takes chunks ({'a flat list' if flat else 'a flat list or per-env lists'})"
    refuse_one_episode(episodes, takes)
    if isinstance(episodes, (str, bytes, Mapping)) or not isinstance(episodes, Iterable):
        raise TypeError(f"{takes}, got {type(episodes).__name__}")
    listed = episodes if isinstance(episodes, Sequence) else list(episodes)
    if flat and listed and isinstance(listed[0], (list, tuple)):
        raise TypeError(f"{takes}, got a list of {type(listed[0]).__name__}s: flatten them")
    return listed


def callable_or_none(fn: Any, name: str) -> None:
    """Refuses a ``value_fn`` or ``obs_fn`` that cannot be called (an array, say).

    Example:
        >>> callable_or_none(None, "value_fn")
        >>> callable_or_none(np.zeros(2), "value_fn")
        Traceback (most recent call last):
        ...
        TypeError: value_fn must be a function (or None), got ndarray
    """
    if fn is not None and not callable(fn):
        raise TypeError(f"{name} must be a function (or None), got {type(fn).__name__}")


def rollout_arguments(
    keys: Any, storage: Any, copy: Any, value_fn: Any, obs_fn: Any
) -> tuple[ColumnKeys, bool]:
    """``episodes_to_rollout``'s keys (None: the defaults) and ``copy``, checked with the rest.

    Refused up front, before a chunk is read: ``keys`` that are not a :class:`ColumnKeys`, a
    ``storage`` that is not a ``RolloutStorage``, a ``copy`` that is not a bool, a
    ``value_fn`` or ``obs_fn`` that cannot be called.

    Example:
        >>> rollout_arguments(None, None, False, None, None)[1]
        False
        >>> rollout_arguments(None, {"rewards": 0}, False, None, None)
        Traceback (most recent call last):
        ...
        TypeError: storage must be a RolloutStorage (or None), got dict
    """
    from episodes.rollout import RolloutStorage

    if storage is not None and not isinstance(storage, RolloutStorage):
        raise TypeError(f"storage must be a RolloutStorage (or None), got {type(storage).__name__}")
    callable_or_none(value_fn, "value_fn")
    callable_or_none(obs_fn, "obs_fn")
    return column_keys(keys), as_flag(copy, "copy")


def _got(values: Any) -> str:
    """How a refusal names what it was given."""
    if hasattr(values, "numel") and hasattr(values, "dtype"):
        where = " (on the meta device: no data)" if getattr(values, "is_meta", False) else ""
        layout = str(getattr(values, "layout", "torch.strided")).replace("torch.", "")
        kind = "" if layout == "strided" else f"{layout} "
        return f"a {values.dtype} {kind}tensor of shape {tuple(values.shape)}{where}"
    if isinstance(values, np.ndarray):
        return f"a {values.dtype} array of shape {values.shape}"
    if values is None:
        return "None"
    return f"{reprlib.repr(values)} ({type(values).__name__})"


def _refusal(values: Any, count: int, what: str) -> ValueError:
    numbers = "real number" if count == 1 else "real numbers"
    return ValueError(
        f"{what} {_got(values)}, not {count} {numbers} (ints or floats; bools, complex numbers "
        "and strings are not values)"
    )


def _tensor_ok(values: Any, count: int) -> bool:
    """Whether a tensor holds ``count`` ints or floats: its dtype and size, never its values.

    A tensor without dense data (on the meta device, sparse, nested, quantized) holds none:
    the rollout storage's own test of that decides (a qint8 would pass the int test here).
    """
    import torch

    from episodes.rollout.leaves import data_tensor

    try:
        data_tensor(values, "value_fn")  # dense data: not meta, sparse, nested or quantized
    except (TypeError, ValueError):
        return False
    dtype = values.dtype
    integer = not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
    return (dtype.is_floating_point or integer) and values.numel() == count


def _host_array(values: Any, count: int, what: str) -> np.ndarray:
    """A numpy array of ``count`` ints or floats, from anything but a tensor; else refused."""
    if isinstance(values, Real) and not isinstance(values, (bool, np.bool_)):
        values = float(values)  # a Fraction is a real number too; numpy would keep an object
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, RuntimeError):  # ragged lists, device tensors in a list
        raise _refusal(values, count, what) from None
    if array.dtype.kind not in _VALUE_KINDS or array.size != count:
        raise _refusal(values, count, what)
    return array


def real_values(values: Any, count: int, what: str) -> np.ndarray:
    """``values`` (numpy, torch, a list or a number) as float64 ``[count]``, checked.

    Any shape of ``count`` elements is taken (``[count, 1]`` from a critic head). ``what``
    starts the refusal: ``"value_fn returned"``, or which chunk's ``custom_data`` held it.

    Raises:
        ValueError: Not ``count`` ints or floats: None, bools, complex numbers, strings,
            objects, another number of values; naming ``what`` and what it got.

    Example:
        >>> real_values(np.array([True]), 1, "value_fn returned")
        Traceback (most recent call last):
        ...
        ValueError: value_fn returned a bool array of shape (1,), not 1 real number (ints ...
    """
    if hasattr(values, "detach"):  # a torch tensor (torch is imported only when one comes)
        if not _tensor_ok(values, count):
            raise _refusal(values, count, what)
        values = values.detach().to("cpu").double().numpy()
    else:
        values = _host_array(values, count, what)
    return np.asarray(values, dtype=np.float64).reshape(count)


def real_value_tensor(values: Any, count: int, what: str, device: Any) -> Any:
    """:func:`real_values` for the device path: a float64 ``[count]`` tensor on ``device``.

    A tensor is checked by its dtype and size only, so nothing waits for the device.

    Example:
        >>> import torch
        >>> real_value_tensor(torch.ones(2, 1), 2, "value_fn returned", "cpu").tolist()
        [1.0, 1.0]
    """
    import torch

    if isinstance(values, torch.Tensor):
        if not _tensor_ok(values, count):
            raise _refusal(values, count, what)
    else:
        # A reversed numpy view (negative strides) is one torch cannot wrap, and a read-only
        # array (np.asarray of a JAX array) one it warns of: both copied.
        host = np.ascontiguousarray(_host_array(values, count, what))
        values = torch.as_tensor(host if host.flags.writeable else host.copy(), device="cpu")
    return values.detach().to(device=device, dtype=torch.float64).reshape(count)
