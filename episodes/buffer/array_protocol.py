"""numpy's array protocol for buffers: ``__array__`` honouring ``dtype`` and ``copy``.

numpy 2 passes ``copy`` to ``__array__`` and trusts the result: ``np.array(buf)`` (``copy=True``)
must get a new array, ``np.asarray(buf)`` (``copy=None``, which numpy 1.x callers mean by not
passing it) may get a view of a numpy'd column, and ``copy=False`` must get a view or a
``ValueError``.

Example:
    >>> data = np.arange(3.0)
    >>> view, copy = as_array(data, None, None), as_array(data, None, True)
    >>> np.shares_memory(view, data), np.shares_memory(copy, data)
    (True, False)
    >>> as_array([1.0, 2.0], None, False)  # a list needs a copy
    Traceback (most recent call last):
    ...
    ValueError: the buffer's items cannot be read as an array of dtype float64 without a copy ...
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_array(data: Any, dtype: Any, copy: bool | None) -> np.ndarray:
    """``data`` (what a buffer's ``get()`` read) as an array, by numpy's rules for ``copy``.

    Example:
        >>> as_array([1, 2], np.float32, None)
        array([1., 2.], dtype=float32)
    """
    if copy:
        return np.array(data, dtype=dtype, copy=True)
    array = np.asarray(data, dtype=dtype)
    if copy is False and not _same_memory(array, data):
        raise ValueError(
            f"the buffer's items cannot be read as an array of dtype {array.dtype} without a "
            "copy (copy=False); use np.asarray(buf) or np.array(buf)"
        )
    return array


def _same_memory(array: np.ndarray, data: Any) -> bool:
    """Whether ``array`` is ``data`` or a view of all of it: no copy was made.

    numpy gives a new view object for an equivalent dtype (``"<U3"``, or ``"q"`` for int64).
    """
    if array is data:
        return True
    if not isinstance(data, np.ndarray):
        return False
    address = array.__array_interface__["data"][0]
    return (
        address == data.__array_interface__["data"][0]
        and array.dtype == data.dtype
        and array.shape == data.shape
        and array.strides == data.strides
    )
