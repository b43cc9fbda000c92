"""One-hot encoding of the discrete leaves of (possibly batched) values."""

from __future__ import annotations

from functools import singledispatch
from typing import Any

import numpy as np
from gymnasium import spaces as gs

from episodes.spaces.batching import map_leaves_with_space

# The most bytes one array may hold.
_MAX_BYTES = int(np.iinfo(np.intp).max)

__all__ = ["one_hot", "one_hot_size"]


def one_hot(value: Any, space: gs.Space[Any] | None) -> Any:
    """One-hot encode every ``Discrete``/``MultiDiscrete`` leaf of ``value``.

    The value is walked together with its space (``Dict`` by key, ``Tuple`` by position). A
    ``Discrete(n, start)`` leaf ``v`` becomes a float32 vector of length ``n`` with a 1 at
    ``v - start``; a ``MultiDiscrete`` leaf becomes the concatenation of its components'
    one-hots (length ``sum(nvec)``, per-component ``start``). Other leaves are returned as
    given. Leaves may carry any number of leading batch dimensions: a ``Discrete`` leaf of
    shape ``[B]`` gives ``[B, n]``, a ``MultiDiscrete`` leaf ``[B, *nvec.shape]`` gives
    ``[B, sum(nvec)]``. A list of ints at a ``Discrete`` leaf is a batch.

    Args:
        value: A value of ``space`` (or a leaf-wise batch of them).
        space: The space describing one item.

    Returns:
        The value with its discrete leaves one-hot encoded.

    Raises:
        ValueError: If ``space`` is ``None``, a discrete leaf is out of range or not
            integral, or the value does not match the space's structure.

    Example:
        >>> import gymnasium as gym
        >>> one_hot(2, gym.spaces.Discrete(3, start=1))
        array([0., 1., 0.], dtype=float32)
        >>> one_hot([0, 1], gym.spaces.MultiDiscrete([2, 2]))
        array([1., 0., 0., 1.], dtype=float32)
        >>> one_hot(np.array([0, 2]), gym.spaces.Discrete(3)).shape
        (2, 3)
    """
    if space is None:
        raise ValueError("one_hot needs a space to know which leaves are discrete; got None")
    try:
        return map_leaves_with_space(_encode_leaf_fn, value, space)
    except KeyError as err:  # a key the Dict space lacks: the value does not match it
        raise ValueError(f"the value does not match the space's structure: {err}") from err


def one_hot_size(space: gs.Space[Any]) -> int:
    """Length of the one-hot vector of a ``Discrete`` or ``MultiDiscrete`` space.

    Args:
        space: A ``Discrete`` or ``MultiDiscrete`` space.

    Returns:
        ``n`` for ``Discrete``, ``sum(nvec)`` for ``MultiDiscrete``.

    Raises:
        TypeError: For any other space.

    Example:
        >>> import gymnasium as gym
        >>> one_hot_size(gym.spaces.Discrete(5)), one_hot_size(gym.spaces.MultiDiscrete([2, 3]))
        (5, 5)
    """
    return _size(space)


@singledispatch
def _size(space: gs.Space[Any]) -> int:
    raise TypeError(f"one_hot_size needs a Discrete or MultiDiscrete space, got {space}")


@_size.register
def _(space: gs.Discrete) -> int:
    return int(space.n)


@_size.register
def _(space: gs.MultiDiscrete) -> int:
    return int(space.nvec.sum())


@singledispatch
def _encode_leaf(space: gs.Space[Any], value: Any) -> Any:
    return value


# ``map_leaves_with_space`` calls ``fn(leaf, space)``; dispatch needs the space first.
def _encode_leaf_fn(value: Any, space: gs.Space[Any]) -> Any:
    return _encode_leaf(space, value)


def _as_indices(value: Any, start: Any, stop: Any, space: gs.Space[Any]) -> np.ndarray:
    """``value - start`` as int64, rejecting non-integral values.

    Values outside ``[min(start), max(stop))`` are refused before the cast: a uint64 above
    2**63 or a float beyond the int64 range would wrap and could land back in range.
    """
    arr = np.asarray(value)
    if arr.dtype.kind == "O" and arr.size and all(type(v) is int for v in arr.flat):
        # Ints no int64 or uint64 holds: beyond every space's range, not "no integers".
        raise ValueError(f"one_hot: value out of range for {space}: {arr!r}")
    if arr.dtype.kind not in "iub":
        with np.errstate(invalid="ignore"):  # inf % 1 is NaN: refused below, not warned of
            whole = arr.dtype.kind == "f" and bool(np.all(np.mod(arr, 1) == 0))
        if not whole:
            raise ValueError(f"one_hot: {space} needs integer values, got {arr!r}")
    if arr.size:
        # Python ints compare uint64, int64 and integral floats exactly.
        lowest, highest = int(arr.min()), int(arr.max())
        if lowest < int(np.min(start)) or highest >= int(np.max(stop)):
            raise ValueError(f"one_hot: value out of range for {space}: {arr!r}")
    return arr.astype(np.int64) - np.asarray(start, dtype=np.int64)


def _scatter_ones(rows_cols: np.ndarray, width: int) -> np.ndarray:
    """Float32 ``[m, width]`` zeros with a 1 at each row's listed column(s)."""
    m = rows_cols.shape[0]
    if max(m, 1) * width * 4 > _MAX_BYTES:  # numpy: "array is too big", a ValueError, even empty
        raise MemoryError(f"{m} one-hot rows of {width} float32 slots do not fit in one array")
    out = np.zeros((m, width), dtype=np.float32)
    # A 1 per (row, column) pair; no identity matrix, so huge ``n`` costs only the output.
    out[np.arange(m)[:, None], rows_cols] = 1.0
    return out


@_encode_leaf.register
def _(space: gs.Discrete, value: Any) -> Any:
    if value.__class__ is int or isinstance(value, np.integer):
        return _one_int(space, value)  # one item, the common read: no arrays to scan
    idx = _as_indices(value, space.start, int(space.start) + int(space.n), space)
    n = int(space.n)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"one_hot: value out of range for {space}: {np.asarray(value)!r}")
    return _scatter_ones(idx.reshape(-1, 1), n).reshape(idx.shape + (n,))


def _one_int(space: gs.Discrete, value: Any) -> np.ndarray:
    """The one-hot of one integer, as the array path makes it (its errors included)."""
    start, n = int(space.start), int(space.n)
    index = int(value) - start  # Python ints: exact for uint64 and beyond 64 bits alike
    if index < 0 or index >= n:
        raise ValueError(f"one_hot: value out of range for {space}: {np.asarray(value)!r}")
    if n * 4 > _MAX_BYTES:
        raise MemoryError(f"1 one-hot rows of {n} float32 slots do not fit in one array")
    out = np.zeros(n, dtype=np.float32)
    out[index] = 1.0
    return out


@_encode_leaf.register
def _(space: gs.MultiDiscrete, value: Any) -> Any:
    comp_shape = space.nvec.shape
    shape = np.shape(value)
    n_batch = len(shape) - len(comp_shape)
    # Checked before subtracting ``start``, which would silently broadcast a bad shape.
    if n_batch < 0 or shape[n_batch:] != comp_shape:
        raise ValueError(
            f"one_hot: {space} expects values ending in shape {comp_shape}, got {shape}"
        )
    stop = space.start.astype(object) + space.nvec.astype(object) if space.nvec.size else 0
    idx = _as_indices(value, space.start, stop, space)
    if idx.size and (np.any(idx < 0) or np.any(idx >= space.nvec)):
        raise ValueError(f"one_hot: value out of range for {space}: {np.asarray(value)!r}")
    batch_shape = idx.shape[:n_batch]
    nvec = space.nvec.ravel().astype(np.int64)
    # Component j's one-hot block starts where the blocks of components < j end.
    offsets = np.concatenate(([0], np.cumsum(nvec)[:-1]))
    width = int(nvec.sum())
    if nvec.size == 0:  # MultiDiscrete([]): every item is an empty one-hot
        return np.zeros(batch_shape + (0,), np.float32)
    cols = idx.reshape(-1, nvec.size) + offsets
    return _scatter_ones(cols, width).reshape(batch_shape + (width,))
