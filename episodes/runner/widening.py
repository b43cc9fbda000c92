"""How a runner's column widens when a later step's values do not fit its dtype.

One rule for both recorders: the host's blocks look at the values (:func:`widened_dtype`), a
torch device's blocks at the dtypes alone (:func:`promoted_dtype`), so both give a column the
same dtype for the same steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["promoted_dtype", "widened_dtype"]


def widened_dtype(dtype: np.dtype[Any], value: np.ndarray, name: str) -> np.dtype[Any]:
    """The dtype a column of ``dtype`` needs to take ``value`` without changing a value.

    ``dtype`` itself when it holds the values (floats are rounded into a float column within
    its range, ints fit an int column within its range); else :func:`promoted_dtype`.

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
    """
    if _fits(value, dtype):
        return dtype
    return promoted_dtype(dtype, value.dtype, name)


def promoted_dtype(dtype: np.dtype[Any], got: np.dtype[Any], name: str) -> np.dtype[Any]:
    """The dtype a column of ``dtype`` widens to for ``got`` values: the rule of both recorders.

    The type both promote to, among bools, ints and floats only, where every earlier value
    keeps its value: floats after ints, ints beyond a narrower int's range. A torch device's
    blocks decide from the dtypes alone (their values would wait for the device).

    Raises:
        ValueError: Strings, objects or other kinds after numbers (or numbers after
            strings): promoting would rewrite the earlier rows as strings or objects. Or ints
            and uints that only a float holds (int64 and uint64 give float64, which rounds
            ints beyond 2**53). The message names ``name`` and both dtypes.

    Example:
        >>> promoted_dtype(np.dtype(np.int8), np.dtype(np.int64), "vf").name
        'int64'
        >>> promoted_dtype(np.dtype("<U3"), np.dtype("<U5"), "text").str  # a longer string
        '<U5'
        >>> promoted_dtype(np.dtype(np.int64), np.dtype(np.uint64), "id")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: id: got uint64 values for a column of int64, which cannot hold them: ...
    """
    wide = np.result_type(dtype, got)
    kinds = dtype.kind + got.kind
    if kinds in ("UU", "SS", "cc"):  # a longer string (a Text space's), a wider complex
        return wide
    if not set(kinds) <= set("biuf"):
        why = "a column widens only among bools, ints and floats (or to a longer string of "
        why += "its kind), never to strings or objects (its earlier rows would change type)"
    elif wide.kind == "f" and "f" not in kinds:
        why = f"only {wide} holds both, and it would round ints beyond 2**53, earlier rows' too"
    else:
        return wide
    raise ValueError(
        f"{name}: got {got} values for a column of {dtype}, which cannot hold them: {why}; "
        "give every step's values one dtype"
    )


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
        >>> _fits(np.array([1000]), np.dtype(np.int8)), _fits(np.array([100]), np.dtype(np.int8))
        (False, True)
    """
    if np.can_cast(value.dtype, dtype, "safe"):
        return True
    if dtype.kind == "f" and value.dtype.kind in "biuf":
        if not value.size or value.dtype.kind == "b":
            return True
        with np.errstate(invalid="ignore"):
            largest = np.nanmax(np.abs(value)) if value.dtype.kind == "f" else np.abs(value).max()
        return bool(not largest > np.finfo(dtype).max)  # inf stays inf; NaN compares False
    if dtype.kind in "iu" and value.dtype.kind in "iu":
        info = np.iinfo(dtype)
        return not value.size or bool(info.min <= value.min() and value.max() <= info.max)
    return False
