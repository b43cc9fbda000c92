"""The connectors' check of a string fill for a space-less column of numbers.

Without a space a read pads with ``fill`` itself, and numpy stacks a string beside numbers as
strings (``[0, 1]`` padded with ``"x"`` reads ``["x", "0", "1"]``): a connector refuses such a
fill, as it refuses a string fill for a column whose space holds numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer

# Dtype kinds of numbers and bools, and of strings and bytes.
_NUMBERS = "biufc"
_TEXT = "US"


def refuse_text_fill(column: InfiniteLookbackBuffer, fill: Any) -> None:
    """Refuses a string ``fill`` for a space-less ``column`` of numbers (or bools).

    Checked before the read, whether or not a row needs padding: the rows of a read that pads
    would be strings, and those of one that does not would be cast to the filler's dtype.
    Nested items (a dict fill is needed there) and columns of objects or strings are left to
    the read.

    Raises:
        ValueError: ``fill`` is a string (or bytes, or an array of them) and the column's
            items are numbers; the message names the fill and both dtypes.

    Example:
        >>> refuse_text_fill(InfiniteLookbackBuffer(["a", "b"]), "x")  # strings take it
        >>> refuse_text_fill(InfiniteLookbackBuffer([0, 1]), "x")
        Traceback (most recent call last):
        ValueError: fill='x' cannot fill a leaf of dtype int64 (not a number: <U1)
    """
    if isinstance(fill, (str, bytes)):
        text = np.asarray(fill).dtype
    elif isinstance(fill, (np.ndarray, np.generic)) and fill.dtype.kind in _TEXT:
        text = fill.dtype
    else:
        return
    data = column.data
    if isinstance(data, list):  # list mode: the first item stands for the column
        first = data[0] if data else None
        if not isinstance(first, (bool, int, float, complex, np.generic, np.ndarray)):
            return
        data = np.asarray(first)
    if isinstance(data, np.ndarray) and data.dtype.kind in _NUMBERS:
        raise ValueError(
            f"fill={fill!r} cannot fill a leaf of dtype {data.dtype} (not a number: {text})"
        )
