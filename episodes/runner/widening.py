"""How a runner's column widens when a later step's values do not fit its dtype.

The host's blocks look at the values (:func:`widened_dtype`), a torch device's blocks at the
dtypes alone (:func:`promoted_dtype`: reading the values would wait for the device). So where a
later step's values fit the column although their dtype is wider (small int64 values into an
int32 column), the host keeps the column and a device widens it as numpy promotes the two
dtypes; where they do not fit, both widen alike. The host also looks at the values its column
already holds, and refuses to widen ints beyond 2**53 to float64 (which would round them); a
device widens them as the dtypes say.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer.plain_arrays import native_dtype

__all__ = ["new_leaf", "promoted_dtype", "widened_dtype"]


def widened_dtype(
    dtype: np.dtype[Any], value: np.ndarray, name: str, recorded: np.ndarray | None = None
) -> np.dtype[Any]:
    """The dtype a column of ``dtype`` needs to take ``value`` without changing a value.

    ``dtype`` itself when it holds the values (floats are rounded into a float column within
    its range, ints fit an int column within its range); else :func:`promoted_dtype`, which
    also checks the column's ``recorded`` values when given (the host's blocks give them).

    Raises:
        ValueError: Values no widening holds (see :func:`promoted_dtype`).

    Example:
        >>> widened_dtype(np.dtype(np.int64), np.array([0.5]), "vf").name
        'float64'
        >>> widened_dtype(np.dtype(np.int64), np.array([7], np.uint64), "id").name  # fits
        'int64'
        >>> widened_dtype(np.dtype(np.float64), np.array(["a"]), "vf")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: vf: got <U1 values for a column of float64, which cannot hold them: ...
        >>> big = np.array([2**60 + 1])  # float64 would round it to 2**60
        >>> widened_dtype(big.dtype, np.array([0.5]), "x", big)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: x: got float64 values for a column of int64, which cannot hold them: ...
    """
    if _fits(value, dtype):
        return dtype
    return promoted_dtype(dtype, value.dtype, name, recorded)


def promoted_dtype(
    dtype: np.dtype[Any], got: np.dtype[Any], name: str, recorded: np.ndarray | None = None
) -> np.dtype[Any]:
    """The dtype a column of ``dtype`` widens to for ``got`` values: the rule of both recorders.

    The type both promote to, among bools, ints and floats only, where every earlier value
    keeps its value: floats after ints, ints beyond a narrower int's range. A torch device's
    blocks decide from the dtypes alone (their values would wait for the device). The host's
    blocks also pass the values the column holds as ``recorded``: an int column widened to a
    float must not hold ints the float would round (beyond 2**53 for float64).

    Raises:
        ValueError: Strings, objects or other kinds after numbers (or numbers after
            strings): promoting would rewrite the earlier rows as strings or objects. Or ints
            and uints that only a float holds (int64 and uint64 give float64, which rounds
            ints beyond 2**53). Or floats after ``recorded`` ints that the float would round.
            The message names ``name`` and both dtypes.

    Example:
        >>> promoted_dtype(np.dtype(np.int8), np.dtype(np.int64), "vf").name
        'int64'
        >>> promoted_dtype(np.dtype("<U3"), np.dtype("<U5"), "text").str  # a longer string
        '<U5'
        >>> promoted_dtype(np.dtype(np.int64), np.dtype(np.uint64), "id")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: id: got uint64 values for a column of int64, which cannot hold them: ...
        >>> promoted_dtype(np.dtype(np.float32), np.dtype("M8[s]"), "t")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: t: got datetime64[s] values for a column of float32, which cannot hold ...
        >>> int64, float64 = np.dtype(np.int64), np.dtype(np.float64)
        >>> promoted_dtype(int64, float64, "x", np.array([2**53, -(2**53)])).name  # exact
        'float64'
        >>> promoted_dtype(int64, float64, "x", np.array([2**53 + 1]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: x: got float64 values ... it would round the column's ints beyond 2**53; ...
    """
    kinds = dtype.kind + got.kind
    if kinds in ("UU", "SS", "cc"):  # a longer string (a Text space's), a wider complex
        return np.result_type(dtype, got)
    # Before numpy promotes: datetimes and voids meet other kinds in its own TypeError.
    wide = np.result_type(dtype, got) if set(kinds) <= set("biuf") else None
    if wide is None:
        why = "a column widens only among bools, ints and floats (or to a longer string of "
        why += "its kind), never to strings, objects or other kinds (its earlier rows would "
        why += "change type)"
    elif wide.kind == "f" and "f" not in kinds:
        why = f"only {wide} holds both, and it would round ints beyond 2**53, earlier rows' too"
    elif wide.kind == "f" and dtype.kind in "iu" and _rounded(recorded, wide):
        bits = np.finfo(wide).nmant + 1
        why = f"only {wide} holds both, and it would round the column's ints beyond 2**{bits}"
    else:
        return wide
    raise ValueError(
        f"{name}: got {got} values for a column of {dtype}, which cannot hold them: {why}; "
        "give every step's values one dtype"
    )


def _rounded(recorded: np.ndarray | None, wide: np.dtype[Any]) -> bool:
    """Whether the float dtype ``wide`` would round one of the ``recorded`` ints.

    Every int within ``2**(mantissa bits + 1)`` is exact; beyond it, counted as rounded (one
    min and one max over the column: it runs only when an int column is about to widen).

    Example:
        >>> f64 = np.dtype(np.float64)
        >>> _rounded(np.array([2**53]), f64), _rounded(np.array([-(2**53) - 1]), f64)
        (False, True)
        >>> _rounded(np.array([2**64 - 1], np.uint64), f64), _rounded(np.zeros(0, int), f64)
        (True, False)
    """
    if recorded is None or not recorded.size:
        return False
    exact = 2 ** (np.finfo(wide).nmant + 1)
    # min and max, not max(abs): abs(-2**63) wraps in int64.
    return bool(int(recorded.max()) > exact or int(recorded.min()) < -exact)


def _fits(value: np.ndarray, dtype: np.dtype[Any]) -> bool:
    """Whether writing ``value`` into a ``dtype`` leaf keeps its values.

    A float leaf takes any real value within its range (rounding only: a float32 observation
    space holds float64 steps that way), an int leaf the ints within its range; floats into an
    int leaf, or values beyond the leaf's range (inf, wrapped ints), would change values.

    Example:
        >>> _fits(np.array([1.5]), np.dtype(np.float32)), _fits(np.array([1.5]), np.dtype(int))
        (True, False)
        >>> _fits(np.array([1e300]), np.dtype(np.float32))
        False
        >>> float16, float32 = np.dtype(np.float16), np.dtype(np.float32)
        >>> _fits(np.array([-(2**63)]), float16), _fits(np.array([np.inf]), float32)
        (False, True)
        >>> _fits(np.array([1000]), np.dtype(np.int8)), _fits(np.array([100]), np.dtype(np.int8))
        (False, True)
        >>> _fits(np.full(2, np.nan), float32)  # all NaN: no warning either
        True
    """
    if np.can_cast(value.dtype, dtype, "safe"):
        return True
    if dtype.kind == "f" and value.dtype.kind in "biuf":
        if not value.size or value.dtype.kind == "b":
            return True
        largest: float
        if value.dtype.kind in "iu":  # as Python ints: abs(-2**63) wraps in int64
            largest = max(int(value.max()), -int(value.min()))
        else:
            # fmax skips NaN (all NaN gives NaN) without nanmax's 'All-NaN slice' warning
            largest = np.fmax.reduce(np.abs(value), axis=None)
            if largest == np.inf:  # inf stays inf in any float leaf: judge the finite values
                finite = value[np.isfinite(value)]
                largest = np.abs(finite).max() if finite.size else 0.0
        return bool(not largest > float(np.finfo(dtype).max))  # NaN compares False
    if dtype.kind in "iu" and value.dtype.kind in "iu":
        info = np.iinfo(dtype)
        return not value.size or bool(info.min <= value.min() and value.max() <= info.max)
    return False


def new_leaf(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An uninitialised block leaf, zeroed if 64-bit int (see ``blocks.Column.widened``).

    Before floats widen an int64 leaf to float64, its values are checked for ints float64
    would round; rows not written yet must not hold garbage then. Other leaves skip the zeroing.
    A leaf is native-endian (``>f4`` batches make a float32 leaf): torch and the converter
    read the blocks, and an episode's chunks keep one dtype (see ``buffer.plain_arrays``).

    Example:
        >>> new_leaf((2, 3), np.dtype(np.int64)).tolist()
        [[0, 0, 0], [0, 0, 0]]
        >>> new_leaf((2,), np.dtype(">f4")).dtype
        dtype('float32')
    """
    dtype = native_dtype(dtype)
    if dtype.kind in "iu" and dtype.itemsize == 8:
        return np.zeros(shape, dtype)
    return np.empty(shape, dtype)
