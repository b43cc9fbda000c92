"""The connectors' float32 casts: finite values that float32 would make inf are refused.

``FlattenObservations``, ``FrameStack(flatten=True)``, ``PrevActionsPrevRewards`` and
``AddLearnerColumns`` write float32 columns. A float64 value beyond float32's range (about
3.4e38 in magnitude, such as a draw from an unbounded float64 Box) would be cast to inf with
only numpy's overflow ``RuntimeWarning``; the replay buffer and the setters refuse the same
values ("which would be inf"), and the connectors do too, with :class:`Float32RangeError`
naming the column. inf and NaN stay as they are. The test is numpy's own overflow flag during
the one cast (no pass over the values), and only dtypes that can overflow (wider floats,
objects) pay for it.

Example:
    >>> as_float32(np.array([1.5, np.inf, np.nan]), "obs")
    array([1.5, inf, nan], dtype=float32)
    >>> try:
    ...     as_float32(np.array([0.0, -1e300]), "FlattenObservations' 'obs' column")
    ... except Float32RangeError as err:
    ...     print(str(err)[:71])
    FlattenObservations' 'obs' column: holds -1e+300, a finite value beyond
"""

from __future__ import annotations

import reprlib
from typing import Any

import numpy as np

__all__ = ["Float32RangeError", "as_float32"]

_LARGEST = float(np.finfo(np.float32).max)


class Float32RangeError(ValueError):
    """A finite value beyond float32's range, which a connector's float32 column cannot hold.

    A ``ValueError``; ``episodes.testing.check_connector`` counts it as the connector's
    documented answer to such a draw (an unbounded float64 Box draws up to 1.8e308), not as a
    broken contract. A connector of yours may raise it for the same reason.

    Example:
        >>> issubclass(Float32RangeError, ValueError)
        True
    """


def as_float32(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` as float32 (no copy where they are float32), refusing what would become inf.

    Args:
        values: A numpy array of real numbers (bools, ints, floats, or an object array of
            Python numbers).
        name: What the message names first: the connector and its column.

    Raises:
        Float32RangeError: A finite value beyond float32's range (its magnitude rounds above
            3.4028235e38), which the cast would make inf; the message names ``name`` and the
            value. inf and NaN are cast as they are.

    Example:
        >>> as_float32(np.array([1, 2]), "x").dtype, as_float32(np.float32([1]), "x").dtype
        (dtype('float32'), dtype('float32'))
        >>> out = as_float32(np.array([3e38, -np.inf]), "x")  # 3e38: within float32's range
        >>> out.dtype, np.isinf(out).tolist()
        (dtype('float32'), [False, True])
    """
    dtype = values.dtype
    if dtype.kind != "O" and (dtype.kind != "f" or dtype.itemsize <= 4):
        return values.astype(np.float32, copy=False)  # bools, ints, narrower floats: in range
    try:
        with np.errstate(over="raise", under="ignore", invalid="ignore"):
            return values.astype(np.float32, copy=False)
    except (FloatingPointError, OverflowError):  # OverflowError: an int beyond float64's range
        pass
    item = reprlib.repr(_first_beyond(values))
    raise Float32RangeError(
        f"{name}: holds {item}, a finite value beyond float32's range "
        f"(at most {_LARGEST!r} in magnitude), which this float32 column would make inf "
        "(the replay buffer refuses it so too); inf and NaN are taken as they are"
    )


def _first_beyond(values: np.ndarray) -> Any:
    """The first finite item whose magnitude float32 cannot hold (only on a refusal)."""
    for item in values.ravel().tolist():
        try:
            finite = bool(np.isfinite(item))
        except (TypeError, OverflowError):  # a Python int beyond float64's range
            finite = isinstance(item, int)
        if finite and np.isinf(_cast(item)):
            return item
    return "a value"  # not reached: the cast overflowed on one of them


def _cast(item: Any) -> Any:
    with np.errstate(over="ignore"):
        try:
            return np.float32(item)
        except OverflowError:
            return np.float32(np.inf)
