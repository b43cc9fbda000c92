"""Stacking helpers of ``value_fit.staged_batch``: rows into one leaf, and exact number stacks.

Private to :mod:`episodes.buffer.value_fit` (moved here for its size); the names are
underscored as they were there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_PLAIN_NUMBER_KINDS = "biuf"  # no complex: its casts differ per item and per batch


def _stacked(leaf: np.ndarray, rows: tuple[Any, ...]) -> np.ndarray:
    """Rows for ``leaf`` stacked; a flat object column's values each stay one value."""
    if leaf.ndim == 1 and leaf.dtype.kind == "O":  # np.stack would turn a list into a row
        return np.fromiter(rows, dtype=object, count=len(rows))
    return np.stack(rows)


def _stacked_exactly(batch: np.ndarray, column: np.dtype[Any]) -> bool:
    """Whether stacking items into ``batch`` cast each as the column's own cast would.

    numpy stacks ints mixed with floats (or uint64 with signed ints) as float64, which rounds
    ints beyond 2**53: an int column must get ints, and a column of a narrower float must not
    get such an int rounded twice (to float64, then to its dtype).
    """
    kind = batch.dtype.kind
    if kind not in _PLAIN_NUMBER_KINDS:
        return False
    if column.kind in "iub":
        return kind in "iub"
    if kind == "f" and batch.dtype.itemsize > column.itemsize:  # float64 from mixed items
        with np.errstate(invalid="ignore"):
            return not bool((np.abs(batch) >= 2.0**53).any())
    return True
