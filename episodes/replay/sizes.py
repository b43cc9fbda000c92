"""The sizes ``sample`` takes: counts as every count argument reads them, and batches that fit.

A batch may be as large as one whose columns some numpy array can hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.indexing import whole_number

__all__ = ["MAX_BATCH_CELLS", "as_count", "check_batch_room", "out_of_memory"]

#: The most cells (items, or sequence steps) a batch may have: each takes at least 16 bytes
#: across its arrays (its int64 index and the int64 slot it was gathered from), and no numpy
#: array, nor a process's memory, holds more than ``intp``'s maximum bytes (numpy's own
#: error for larger ones, "array is too big", would name no argument).
MAX_BATCH_CELLS = int(np.iinfo(np.intp).max) // 16


def check_batch_room(size: int, length: int | None, lookback: int, sequences: bool) -> None:
    """Refuses a batch no array can hold, naming the arguments, before anything is drawn.

    A transition batch or a draw of episodes holds ``size`` cells; a sequence batch ``size``
    rows of ``lookback + length`` (its lookback is padded to the asked length, so all of it
    counts). Episode chunks hold only what their episodes store, so their lookback does not.

    Args:
        size: ``num_items`` (or ``batch_size_B``).
        length: ``batch_length_T`` (None for transitions and whole episodes).
        lookback: The asked lookback.
        sequences: Whether the batch is ``[size, lookback + length]`` sequences.

    Raises:
        ValueError: Cells beyond :data:`MAX_BATCH_CELLS`; the message names the arguments.

    Example:
        >>> check_batch_room(2, 10, 3, sequences=True)
        >>> check_batch_room(2, 2**62, 0, sequences=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: a batch of num_items=2 sequences of lookback=0 + batch_length_T=4611686...
    """
    cells = size * (lookback + length if sequences and length is not None else 1)
    if cells <= MAX_BATCH_CELLS:
        return
    if size > MAX_BATCH_CELLS or not sequences:
        raise ValueError(
            f"num_items (batch_size_B) must be at most {MAX_BATCH_CELLS}, the most items a "
            f"batch's arrays can hold, got {size}"
        )
    raise ValueError(
        f"a batch of num_items={size} sequences of lookback={lookback} + batch_length_T="
        f"{length} steps has {cells} cells, more than a batch's arrays can hold "
        f"({MAX_BATCH_CELLS}): ask for fewer or shorter sequences"
    )


def out_of_memory(error: MemoryError, size: int, length: int | None, lookback: int) -> MemoryError:
    """A ``MemoryError`` naming the sample's sizes, for one numpy raised allocating the batch.

    Example:
        >>> print(out_of_memory(MemoryError("no room"), 1, 4, 0))  # doctest: +ELLIPSIS
        sample(num_items=1, batch_length_T=4, lookback=0) needs more memory than ...: no room
    """
    return MemoryError(
        f"sample(num_items={size}, batch_length_T={length}, lookback={lookback}) needs more "
        f"memory than is available: {error}"
    )


def as_count(value: Any) -> int | None:
    """``value`` as an int the way every count argument takes it, else None.

    Python and numpy ints and 0-d int arrays or tensors are counts (``whole_number``'s rule);
    floats, bools and other arrays are not. For checks with their own message (``n_step``'s
    range bounds).

    Example:
        >>> as_count(np.array(3)), as_count(np.int8(-2)), as_count(2.0), as_count(np.array([3]))
        (3, -2, None, None)
    """
    try:
        return whole_number(value, "a count", -(2**63))
    except ValueError:
        return None
