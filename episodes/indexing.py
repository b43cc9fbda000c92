"""Pure index arithmetic shared by every getter and setter.

A lookback buffer stores ``total`` items; the first ``lookback`` of them belong to the previous
chunk, so the user's ``ts=0`` is the storage position ``lookback``. This module turns a user's
index (int, slice or list of ints, read with or without ``neg_index_as_lookback``) into storage
positions, and splits a slice into "filler on the left / stored window / filler on the right".
Nothing here touches data, which keeps the rules in one place and property-testable on their own.

Example:
    >>> resolve_int(-1, lookback=3, total=6, neg_index_as_lookback=True)
    2
    >>> plan_slice(slice(-7, -2), lookback=2, total=5, neg_index_as_lookback=False, fill=True)
    SlicePlan(fill_left=2, start=0, stop=3, fill_right=0, step=1)
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Union

import numpy as np
import numpy.typing as npt

# Argument checks every package uses, kept importable from here where they began.
from episodes.arguments import as_flag as as_flag
from episodes.arguments import discount_factor as discount_factor
from episodes.arguments import whole_number as whole_number
from episodes.errors import IntegerTypeError
from episodes.structs import short_repr

# An int, a slice, or several ints (a list or tuple of them, or a 1-D integer array); numpy
# integers count as ints.
Index = Union[  # noqa: UP007 - a runtime alias on 3.10
    int,
    np.integer[Any],
    slice,
    Sequence[Union[int, np.integer[Any]]],  # noqa: UP007
    npt.NDArray[np.integer[Any]],
    None,
]
# Positions must fit the int64 arrays a list of indices resolves into.
_INT64_BOUND = 2**63
# Classes of list members that convert to int64 exactly (no bools, floats or uint64s).
_EXACT_INT_TYPES = frozenset(
    (int, np.int8, np.int16, np.int32, np.int64, np.intc, np.intp, np.longlong)
    + (np.uint8, np.uint16, np.uint32, np.uintc)
)


def as_int(index: object, *, what: str = "index") -> int:
    """Returns ``index`` as a Python int, accepting numpy integers but not bools or floats.

    Example:
        >>> as_int(np.int64(3))
        3
    """
    if type(index) is int:
        return index
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise IntegerTypeError(
            f"{what} must be an int, got {index.__class__.__name__} ({short_repr(index)})"
        )
    return operator.index(index)


def _zero_d_int(value: Any) -> bool:  # operator.index takes any one-element torch tensor
    dtype = str(getattr(value, "dtype", "bool"))
    return getattr(value, "shape", None) == () and "int" in dtype and "bool" not in dtype


def sequence_position(index: Any, length: int, what: str = "chunk") -> int:
    """``index`` into a sequence of ``length`` items as ``0 <= k < length``, as a list reads it.

    Negative indices count back from the end; numpy ints are taken.

    Raises:
        TypeError: A bool (a numpy one too) or anything ``operator.index`` refuses (a float).
        IndexError: Out of range, naming ``what`` and the index as given.

    Example:
        >>> sequence_position(-1, 4), sequence_position(np.int64(2), 4)
        (3, 2)
        >>> sequence_position(4, 4)
        Traceback (most recent call last):
        IndexError: chunk index 4 out of range for 4 chunks
    """
    if isinstance(index, (bool, np.bool_)) or (hasattr(index, "shape") and not _zero_d_int(index)):
        raise TypeError(f"{what} indices must be integers or slices, not {type(index).__name__}")
    k = operator.index(index)
    k += length if k < 0 else 0
    if not 0 <= k < length:
        raise IndexError(f"{what} index {index} out of range for {length} {what}s")
    return k


def index_list(indices: list[Any] | tuple[Any, ...] | np.ndarray) -> list[Any]:
    """A list, tuple or 1-d array of indices as a list; a ``TypeError`` for other arrays.

    Example:
        >>> index_list(np.array([2, -1]))
        [np.int64(2), np.int64(-1)]
        >>> index_list(np.array(1))
        Traceback (most recent call last):
        ...
        TypeError: an index array must be 1-d (a list of indices), got shape (); pass an int
    """
    if isinstance(indices, np.ndarray) and indices.ndim != 1:
        hint, shape = "; pass an int" if indices.ndim == 0 else "", indices.shape
        raise TypeError(f"an index array must be 1-d (a list of indices), got shape {shape}{hint}")
    return list(indices)


def resolve_int(index: int, *, lookback: int, total: int, neg_index_as_lookback: bool) -> int:
    """Maps a user's int index to a storage position (may fall outside ``[0, total)``).

    Non-negative indices count from ``ts=0`` (position ``lookback``); negative ones from the end
    of the stored data, or with ``neg_index_as_lookback`` leftwards from ``ts=0`` into the lookback.

    Example:
        >>> resolve_int(0, lookback=3, total=6, neg_index_as_lookback=False)
        3
        >>> resolve_int(-1, lookback=3, total=6, neg_index_as_lookback=False)
        5
    """
    if index >= 0 or neg_index_as_lookback:
        return lookback + index
    return total + index


def in_range(position: int, total: int) -> bool:
    """True if ``position`` addresses a stored item.

    Example:
        >>> in_range(6, 6)
        False
    """
    return 0 <= position < total


class SlicePlan(NamedTuple):
    """How a slice read is assembled: ``fill_left`` fillers, ``data[start:stop]``, ``fill_right``.

    ``step`` is applied to the assembled result afterwards (``result[::step]``); built per read.

    Example:
        >>> plan = plan_slice(slice(-1, 2), lookback=0, total=3, neg_index_as_lookback=True,
        ...                   fill=True)
        >>> plan.fill_left, (plan.start, plan.stop), plan.fill_right
        (1, (0, 2), 0)
    """

    fill_left: int
    start: int
    stop: int
    fill_right: int
    step: int

    @property
    def stored(self) -> int:
        """Number of stored items the plan reads.

        Example:
            >>> SlicePlan(fill_left=2, start=1, stop=4, fill_right=0, step=1).stored
            3
        """
        return self.stop - self.start

    @property
    def length(self) -> int:
        """Number of items in the result, fillers included, before ``step`` is applied.

        Example:
            >>> SlicePlan(fill_left=2, start=1, stop=4, fill_right=1, step=2).length
            6
        """
        return self.fill_left + self.stored + self.fill_right

    def step_first(self) -> SlicePlan:
        """The same read with the step taken before the padding, as a step-1 plan's parts.

        Its fillers and its stored items are those ``[::step]`` keeps: ``fill_left`` fillers,
        ``data[start:stop:step]``, ``fill_right`` fillers is this plan's result. So a read
        touches (and one-hot encodes) only the items it returns.

        Example:
            >>> SlicePlan(fill_left=3, start=0, stop=5, fill_right=1, step=2).step_first()
            SlicePlan(fill_left=2, start=1, stop=5, fill_right=1, step=2)
        """
        step = self.step
        if step == 1 or not (self.fill_left or self.fill_right):
            return self  # nothing to pad: the stored window strided is the result
        fill_left = -(-self.fill_left // step)
        start = min(self.start + (-self.fill_left) % step, self.stop)
        kept = -(-self.length // step)
        stored = -(-(self.stop - start) // step)
        return SlicePlan(fill_left, start, self.stop, kept - fill_left - stored, step)


def plan_slice(
    slice_: slice, *, lookback: int, total: int, neg_index_as_lookback: bool, fill: bool
) -> SlicePlan:
    """Resolves a user's slice into a :class:`SlicePlan` over storage positions.

    ``start=None`` means ``ts=0`` (not the start of the lookback); ``stop=None`` means the end.
    Without ``fill`` the window is clipped like a Python slice; with ``fill`` the missing
    positions on either side become fillers, so the result has ``stop - start`` items.

    Example:
        >>> plan_slice(slice(1, 6), lookback=2, total=5, neg_index_as_lookback=False, fill=True)
        SlicePlan(fill_left=0, start=3, stop=5, fill_right=3, step=1)
    """
    step = 1 if slice_.step is None else as_int(slice_.step, what="slice step")
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError(f"plan_slice takes positive steps (see slice_positions), got {step}")
    # Inlined bound resolution: this runs once per getter call in connector loops.
    start, stop = slice_.start, slice_.stop
    if start is None:
        start = lookback
    else:
        start = as_int(start, what="slice bound")
        start = lookback + start if (start >= 0 or neg_index_as_lookback) else total + start
    if stop is None:
        stop = total
    else:
        stop = as_int(stop, what="slice bound")
        stop = lookback + stop if (stop >= 0 or neg_index_as_lookback) else total + stop
    stored_start = 0 if start < 0 else (total if start > total else start)
    stored_stop = 0 if stop < 0 else (total if stop > total else stop)
    stored_stop = max(stored_stop, stored_start)
    if not fill:
        return SlicePlan(0, stored_start, stored_stop, 0, step)
    length = stop - start
    if length <= 0:
        return SlicePlan(0, stored_start, stored_start, 0, step)
    _check_count(-(-length // step))  # the items read: the step is taken before padding
    stored = stored_stop - stored_start
    if stored == 0:
        # Entirely outside the data: everything is filler; keep it on the side it lies on.
        if start >= total:
            return SlicePlan(0, total, total, length, step)
        return SlicePlan(length, 0, 0, 0, step)
    fill_left = stored_start - start
    return SlicePlan(fill_left, stored_start, stored_stop, length - fill_left - stored, step)


def slice_positions(
    slice_: slice, *, lookback: int, total: int, neg_index_as_lookback: bool, fill: bool
) -> np.ndarray:
    """Storage positions a slice with any non-zero step addresses, in the order it reads them.

    Bounds resolve as in :func:`plan_slice`. For a negative step, ``start=None`` is the last
    stored item and ``stop=None`` stops after ``ts=0`` (the lookback is left out, as it is for
    positive steps). Without ``fill`` the positions are clipped like a Python slice; with
    ``fill`` the positions outside ``[0, total)`` stay in the result (the caller fills them).

    Example:
        >>> slice_positions(slice(3, 1, -1), lookback=2, total=6, neg_index_as_lookback=True,
        ...                 fill=False).tolist()
        [5, 4]
    """
    step = 1 if slice_.step is None else as_int(slice_.step, what="slice step")
    if step == 0:
        raise ValueError("slice step cannot be zero")
    kw: dict[str, Any] = dict(
        lookback=lookback, total=total, neg_index_as_lookback=neg_index_as_lookback
    )
    if step > 0:
        plan = plan_slice(slice_, fill=fill, **kw)
        first, end = plan.start - plan.fill_left, plan.stop + plan.fill_right
        count = max(0, -((first - end) // step))
        _check_count(count)
        return _positions(first, end, step, count)
    start, stop = slice_.start, slice_.stop
    start = total - 1 if start is None else resolve_int(as_int(start, what="slice bound"), **kw)
    stop = lookback - 1 if stop is None else resolve_int(as_int(stop, what="slice bound"), **kw)
    if not fill:
        start, stop = min(start, total - 1), max(stop, -1)
        if start <= stop:  # also where a bound lies beyond int64
            return np.empty(0, np.int64)
        return np.arange(start, stop, step, dtype=np.int64)
    return _filled_backwards(start, stop, -step, total)


def _filled_backwards(start: int, stop: int, stride: int, total: int) -> np.ndarray:
    """``start, start - stride, ...`` down to above ``stop``, fillers as ``total`` or ``-1``.

    In Python ints until the positions are known to lie in ``[0, total)``: a bound beyond int64
    (a window far out of the data, all fillers) must not reach numpy.
    """
    count = max(0, -((stop - start) // stride))
    _check_count(count)
    if -(2**62) < stop < 2**62 and -(2**62) < start < 2**62:  # fillers stay put in int64
        return _positions(start, stop, -stride, count)
    positions = _positions(0, count, 1, count)
    positions[:] = -1  # below 0: fillers on the left
    above = min(count, max(0, (start - total) // stride + 1))  # at or past the end
    inside = min(count, max(0, start // stride + 1))  # down to position 0
    positions[:above] = total
    if inside > above:
        first = start - stride * above
        if inside - above == 1:  # one position: a stride beyond int64 never reaches numpy
            positions[above] = first
        else:  # two or more inside [0, total): the stride is below total, an int64
            positions[above:inside] = first - stride * np.arange(inside - above, dtype=np.int64)
    return positions


def _positions(start: int, stop: int, step: int, count: int) -> np.ndarray:
    """``np.arange(start, stop, step)`` as int64; too many for an array is the MemoryError."""
    try:
        return np.arange(start, stop, step, dtype=np.int64)
    except (ValueError, MemoryError) as error:  # numpy: "array is too big" below 2**62 too
        raise MemoryError(f"a slice of {count} items (fillers included) cannot be read") from error


def _check_count(count: int) -> None:
    # No array holds that many positions: numpy would raise an OverflowError or a ValueError.
    if count >= 2**62:
        raise MemoryError(f"a slice of {count} items (fillers included) cannot be read")


def index_sequence(indices: list[Any] | tuple[Any, ...] | np.ndarray) -> Any:
    """A list, tuple or 1-d array of indices as it is; a ``TypeError`` for other arrays.

    What :func:`resolve_list` takes: unlike :func:`index_list`, an array stays an array, so an
    integer one resolves in a few numpy operations rather than index by index.

    Example:
        >>> index_sequence(np.array([2, -1]))
        array([ 2, -1])
        >>> index_sequence(np.zeros((1, 2), int))
        Traceback (most recent call last):
        ...
        TypeError: an index array must be 1-d (a list of indices), got shape (1, 2)
    """
    if isinstance(indices, np.ndarray):
        return indices if indices.ndim == 1 else index_list(indices)
    return indices


def resolve_list(
    indices: Sequence[int], *, lookback: int, total: int, neg_index_as_lookback: bool
) -> np.ndarray:
    """Maps a list of user indices to an int64 array of storage positions (possibly out of range).

    A position beyond int64 is -1 (left of the data) or ``total`` (right of it): such an index
    is out of range like any other, not an ``OverflowError``. A list or tuple of fewer than 32
    Python ints resolves in Python (numpy's calls would cost more); an integer array, or a
    longer list or tuple of ints, in a few numpy operations; anything else index by index, with
    :func:`as_int`'s ``TypeError`` for the first index that is no int (a bool, a float).

    Example:
        >>> resolve_list([0, -1], lookback=3, total=6, neg_index_as_lookback=False).tolist()
        [3, 5]
        >>> resolve_list([10**20, -(10**20)], lookback=0, total=2, neg_index_as_lookback=True)
        array([ 2, -1])
    """
    positions = _short_positions(indices, lookback, total, neg_index_as_lookback)
    if positions is None:
        array = _int_array(indices)
        if array is not None:
            return _resolve_array(array, lookback, total, neg_index_as_lookback)
        ints = map(as_int, indices)  # as_int's TypeError for the first index that is no int
        positions = _positions_of(ints, lookback, total, neg_index_as_lookback)
    try:
        return np.array(positions, dtype=np.int64)
    except OverflowError:  # beyond int64: out of range as any other, not an overflow
        beyond = (-1, total)  # left of the data, or right of it
        fit = [p if -_INT64_BOUND <= p < _INT64_BOUND else beyond[p > 0] for p in positions]
        return np.array(fit, dtype=np.int64)


# Lists shorter than this resolve in Python ints: numpy's calls cost more than a short loop.
_SHORT = 32
_PYTHON_INT = frozenset((int,))


def _short_positions(
    indices: Any, lookback: int, total: int, neg_index_as_lookback: bool
) -> list[int] | None:
    """A short list or tuple of Python ints resolved in Python; None for anything else."""
    kind = indices.__class__
    short = (kind is list or kind is tuple) and len(indices) < _SHORT
    if short and set(map(type, indices)) <= _PYTHON_INT:
        return _positions_of(indices, lookback, total, neg_index_as_lookback)
    return None


def _positions_of(
    indices: Iterable[int], lookback: int, total: int, neg_index_as_lookback: bool
) -> list[int]:
    """:func:`resolve_int` per index, in Python ints (a position may lie beyond int64)."""
    if neg_index_as_lookback:
        return [lookback + i for i in indices]
    return [lookback + i if i >= 0 else total + i for i in indices]


def _int_array(indices: Sequence[Any]) -> np.ndarray | None:
    """``indices`` as a 1-d integer array when every member is an int; None otherwise.

    None sends the indices down the per-index path, which judges each member as
    :func:`resolve_int` does (and raises for the first that is no int).
    """
    if isinstance(indices, np.ndarray):
        return indices if indices.ndim == 1 and indices.dtype.kind in "iu" else None
    if not isinstance(indices, (list, tuple)):
        return None
    # Members' classes, not values: True and 1.0 would pass as ints in an array. numpy
    # integers up to 32 bits, and int64, convert exactly; Python ints beyond int64 overflow.
    if not set(map(type, indices)) <= _EXACT_INT_TYPES:
        return None
    try:
        return np.array(indices, dtype=np.int64)
    except OverflowError:
        return None


def _resolve_array(
    indices: np.ndarray, lookback: int, total: int, neg_index_as_lookback: bool
) -> np.ndarray:
    """:func:`resolve_int` over an integer array, positions beyond int64 as out of range."""
    # lookback + index overflows int64 exactly when index > top: such an index is out of range
    # on the right (a uint64 one beyond int64 too), as a resolved position beyond int64 is.
    top = _INT64_BOUND - 1 - lookback
    if indices.dtype.kind == "u" and indices.dtype.itemsize == 8:
        beyond = indices > top  # compared exactly, before the cast wraps them
        signed = indices.astype(np.int64)
    else:
        signed = indices.astype(np.int64, copy=False)
        beyond = signed > top
    overflowing = bool(beyond.any())
    if overflowing:
        signed = np.where(beyond, 0, signed)
    positions = signed + lookback
    if not neg_index_as_lookback:
        negative = signed < 0
        if negative.any():
            positions[negative] = signed[negative] + total
    if overflowing:
        positions[beyond] = total
    return positions


def set_positions(
    at_indices: Index, *, lookback: int, total: int, neg_index_as_lookback: bool
) -> range | list[int] | int:
    """Storage positions a ``set()`` writes, raising ``IndexError`` for any out-of-range int.

    Returns an int for an int index, a ``range`` for a slice with a positive step (clipped like
    a Python slice) or ``None``, and a list of ints for a list of indices or a slice with a
    negative step.

    Example:
        >>> set_positions(slice(0, 2), lookback=1, total=4, neg_index_as_lookback=False)
        range(1, 3)
    """
    if type(at_indices) is int:  # one write, the hot path: resolve_int inlined
        index = at_indices
        position = lookback + index if index >= 0 or neg_index_as_lookback else total + index
        if 0 <= position < total:
            return position  # else the error below
    kw: dict[str, Any] = dict(
        lookback=lookback, total=total, neg_index_as_lookback=neg_index_as_lookback
    )
    if at_indices is None:
        return range(lookback, total)
    if isinstance(at_indices, slice):
        if at_indices.step is not None and as_int(at_indices.step, what="slice step") < 0:
            return slice_positions(at_indices, fill=False, **kw).tolist()
        plan = plan_slice(at_indices, fill=False, **kw)
        return range(plan.start, plan.stop, plan.step)
    if isinstance(at_indices, (list, tuple, np.ndarray)):
        positions = _short_positions(at_indices, lookback, total, neg_index_as_lookback)
        if positions is not None:  # a short list of ints: checked in Python, as resolved
            valid = not positions or (min(positions) >= 0 and max(positions) < total)
        else:
            resolved = resolve_list(index_sequence(at_indices), **kw)
            valid = bool(((resolved >= 0) & (resolved < total)).all())
            positions = resolved.tolist()
        if valid:
            return positions
        what = f"indices {listed_indices(at_indices, [0 <= p < total for p in positions])}"
    else:
        index = as_int(at_indices)
        position = resolve_int(index, **kw)
        if in_range(position, total):
            return position
        what = f"index {index}"
    raise IndexError(
        f"cannot set at {what}: out of range for a buffer with {total - lookback} "
        f"items and a lookback of {lookback} (neg_index_as_lookback={neg_index_as_lookback})"
    )


def listed_indices(indices: Iterable[Any], flags: Iterable[bool]) -> str:
    """The ``indices`` whose flag is False, for a message: the first 8 as ints, and the count.

    Example:
        >>> listed_indices([5, 6], [True, False]), listed_indices(range(20), [False] * 20)
        ('[6]', '[0, 1, 2, 3, 4, 5, 6, 7, ...] (20 indices)')
    """
    bad = [operator.index(i) for i, ok in zip(indices, flags) if not ok]  # np.int64(6) as 6
    return short_repr(bad) + (f" ({len(bad)} indices)" if len(bad) > 8 else "")
