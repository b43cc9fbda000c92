"""The connector hot path: a window of flat Discrete items, one-hot, with zero-hot padding.

``get_actions(slice(ts - k, ts), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True)``
runs once per time step in a connector. For a flat ``Discrete`` column the generic path (walk
the space, encode, build fillers, concatenate) is replaced by one zero matrix and one scatter.
One-hot fillers are all-zero whatever ``fill`` is, so padding costs nothing extra. Items that
are not single values (an array ``[1]``, outside the space) are left to the generic path, which
encodes each one as a read of that item alone does.

Example:
    >>> out = window_one_hot([1, 0], n=3, start=0, fill_left=1, fill_right=0)
    >>> out.tolist()
    [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.spaces.batching import rounded_ints

_SMALL = 8
# The most bytes one array may hold.
_MAX_BYTES = int(np.iinfo(np.intp).max)
_INT64_MAX = 2**63 - 1


def window_one_hot(
    values: Any, *, n: int, start: int, fill_left: int, fill_right: int
) -> np.ndarray | None:
    """Float32 ``[fill_left + len(values) + fill_right, n]`` one-hot rows, zero rows as padding.

    None where ``values`` are not one value each (they do not make a 1-d array, or do not
    stack at all): the caller encodes them item by item instead.

    Raises:
        ValueError: A value is not an integer in ``[start, start + n)``.
        MemoryError: No array holds that many rows.

    Example:
        >>> window_one_hot(np.array([3]), n=2, start=2, fill_left=0, fill_right=1).tolist()
        [[0.0, 1.0], [0.0, 0.0]]
        >>> window_one_hot(np.array([[1], [0]]), n=2, start=0, fill_left=0, fill_right=0) is None
        True
    """
    stored = len(values)
    rows = fill_left + stored + fill_right
    if max(rows, 1) * n * 4 > _MAX_BYTES:  # numpy: a ValueError ("array is too big"), even empty
        raise MemoryError(f"{rows} one-hot rows of {n} float32 slots do not fit in one array")
    out = np.zeros((rows, n), dtype=np.float32)
    if stored and stored <= _SMALL and type(values) is np.ndarray and values.dtype.kind in "iu":
        values = values.tolist()
    if stored and stored <= _SMALL and type(values) is list:
        # A few Python ints: item assignment beats building index arrays.
        for row, value in enumerate(values, fill_left):
            if type(value) is not int and not isinstance(value, np.integer):
                break
            index = int(value) - start  # a small numpy int would wrap
            if not 0 <= index < n:
                raise ValueError(f"one-hot value out of range [{start}, {start + n}): {value}")
            out[row, index] = 1.0
        else:
            return out
        out[:] = 0.0
    if stored:
        try:
            idx = np.asarray(values)
        except ValueError:  # ragged: an int beside a shaped array
            return None
        if idx.ndim != 1:  # rows would pair with every value of a row: wrong slots set
            return None
        if idx.dtype.kind == "f" and type(values) is list and rounded_ints(values):
            return None  # ints numpy stacked as floats, rounded: each is encoded exactly
        if idx.dtype.kind not in "iu":  # bools are Discrete(2) members: False 0, True 1
            floats = idx.dtype.kind == "f"  # integral and finite (inf is no slot)
            integral = floats and bool(np.isfinite(idx).all()) and np.array_equal(idx, idx // 1)
            if not (integral or idx.dtype.kind == "b"):
                raise ValueError(
                    f"one-hot needs integer values in [{start}, {start + n}), got {idx}"
                )
        if start or idx.dtype == np.uint64 or idx.dtype.kind == "f":  # floats: before a cast
            # Checked before any cast: numpy compares its scalars with Python ints exactly,
            # where in int64 a uint64 above 2**63 wraps round (into range, below a start).
            if idx.min() < start or idx.max() >= start + n:
                raise ValueError(f"one-hot value out of range [{start}, {start + n}): {values}")
            if start > _INT64_MAX:  # uint64 values of a uint64 start: offsets in uint64 first
                offsets = (idx.astype(np.uint64) - np.uint64(start)).astype(np.int64)
            else:  # in int64: int8 99 - (-100) would wrap, uint8 0 - (-2) overflow
                offsets = idx.astype(np.int64, copy=False) - start
        else:  # the usual slots 0..n-1: a negative one would wrap, a large one IndexErrors
            if idx.min() < 0:
                raise ValueError(f"one-hot value out of range [0, {n}): {values}")
            offsets = idx if idx.dtype.kind in "iu" else idx.astype(np.int64)  # bools: no mask
        try:
            out[np.arange(fill_left, fill_left + stored), offsets] = 1.0
        except IndexError:
            raise ValueError(
                f"one-hot value out of range [{start}, {start + n}): {values}"
            ) from None
    return out
