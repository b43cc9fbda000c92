"""Leaf-wise comparison of getter results across list and numpy mode."""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.testing import outputs_equal


def _shapes_agree(a: Any, b: Any) -> bool:
    """Where both sides hold an array at the same place, the shapes are the same.

    :func:`outputs_equal` lets an empty array equal any array without rows (list mode cannot
    show an item shape); between two arrays that leniency would hide a wrong shape.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_shapes_agree(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_shapes_agree(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape
    return True


def values_equal(a: Any, b: Any) -> bool:
    """Equal values leaf-wise, exactly: no cast hides a difference (``1.7`` is not ``1``).

    Lists and arrays holding the same values are equal, and so are a Python number and a
    numpy one of the same value (``1 == 1.0``, ``np.uint8(255) != np.int64(-1)``); NaN equals
    NaN. A list of dict/tuple items (list mode) equals the dict/tuple of batched arrays
    (numpy mode) holding them; an empty list equals an empty batched struct. Two arrays must
    have the same shape, even when empty.
    """
    return _shapes_agree(a, b) and outputs_equal(a, b)
