"""The error for a batch that does not nest as the numpy column's items, naming both nestings.

Built only after the check failed: the usual path pays nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.structs import unflatten


def nesting_mismatch(
    structure: Any, columns: list[np.ndarray], structure_given: Any, given: list[np.ndarray]
) -> ValueError:
    """The error for batch leaves ``given`` (nesting ``structure_given``) a column refuses.

    ``columns`` are the column's leaves (nesting ``structure``); both are shown as their row
    shapes, nested as the items (a dict's keys, a tuple's parts).

    Example:
        >>> a, b = np.zeros((1, 2)), np.zeros((3, 2))
        >>> print(nesting_mismatch({"a": 0, "b": 0}, [a, a], {"a": 0, "c": 0}, [b, b]))
        ... # doctest: +NORMALIZE_WHITESPACE
        the batch's items nest as {'a': 'shape (2,)', 'c': 'shape (2,)'}, the column's as
        {'a': 'shape (2,)', 'b': 'shape (2,)'}: structure mismatch
    """
    found, stored = (
        unflatten(nest, [f"shape {leaf.shape[1:]}" for leaf in leaves])
        for nest, leaves in ((structure_given, given), (structure, columns))
    )
    return ValueError(
        f"the batch's items nest as {found}, the column's as {stored}: structure mismatch"
    )
