"""Growable numpy columns: one row per stored item, rows gathered in bulk."""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer.plain_arrays import holds_masked, masked_words, native_dtype
from episodes.buffer.stack_errors import layout, unstackable
from episodes.replay.nested import check_records, describe, fit_records, raw_rows
from episodes.spaces.batching import batch, rounded_ints

__all__ = ["Column", "as_rows", "float32_rewards", "move_back", "move_to_front"]

# Rows gathered per step of an in-place compaction: the temporary it needs, at most 4 MiB.
_MOVE_BYTES = 1 << 22


def as_rows(values: Any, what: str) -> np.ndarray:
    """Stacks a sequence of per-step values into one numeric array of rows.

    Raises:
        TypeError: The values do not stack into a numeric array (nested items, objects), or
            hold a numpy masked array with masked entries (stacking would drop its mask).
        ValueError: Items that differ in shape (rows of two shapes, a scalar reward beside a
            vector one), naming the first and one unlike it.

    Example:
        >>> as_rows([[0.0, 1.0], [2.0, 3.0]], "obs").shape
        (2, 2)
        >>> as_rows([1.0, np.zeros(2)], "rewards")
        Traceback (most recent call last):
        ...
        ValueError: rewards: the items do not stack: item 0 has shape (), item 1 has shape (2,)
    """
    # A list of items (list mode) is scanned by type; an array is looked at once.
    if isinstance(values, np.ndarray) and values.dtype.names is not None:
        return check_records(values, what)  # nested values' records
    if isinstance(values, np.ndarray):  # a numpy'd chunk's column: the usual case
        if isinstance(values, np.ma.MaskedArray) and np.ma.count_masked(values):
            raise TypeError(masked_words(what))
    elif holds_masked(values if isinstance(values, list) else [values]):
        raise TypeError(masked_words(what))
    try:
        rows = np.asarray(values)
    except ValueError as err:
        named = unstackable(values) if _all_shaped(values) else None
        if named is not None:  # rows that differ in shape: refused as the stored columns do
            raise ValueError(f"{what}: {named}") from None
        raise TypeError(f"{what}: the items do not stack into one array ({err})") from None
    except RuntimeError as err:  # torch's, for a tensor that requires grad: named, and a TypeError
        if "requires grad" not in str(err):
            raise
        raise TypeError(
            f"{what}: holds torch tensors that require grad, which numpy cannot read; record "
            "them detached (tensor.detach()), as the runner records its policy's outputs"
        ) from None
    if rows.dtype == np.float64 and _rounded_ints(values):  # numpy makes no other of ints
        rows = batch(values)  # exact as to_numpy stacks them: uint64 (objects are refused)
    if rows.dtype.kind not in "biufc" or rows.ndim == 0:
        raise TypeError(
            f"{what}: replay stores numeric arrays only (got dtype {rows.dtype}); observations, "
            "actions and extra model outputs may nest them in dicts and tuples, rewards not"
        )
    return rows


def _rounded_ints(values: Any) -> bool:
    """Whether list-mode ``values`` are ints that ``batch`` stacks exactly where numpy rounds.

    Only items all ints (or int arrays) change (``batch``'s rule): one look at the first item
    leaves floats, the usual case, at that.
    """
    if values.__class__ not in (list, tuple) or not values:
        return False
    first = values[0]
    if not isinstance(first, (int, np.integer, np.ndarray)):
        return False
    return (not isinstance(first, np.ndarray) or first.dtype.kind in "iu") and rounded_ints(values)


def _all_shaped(values: Any) -> bool:
    """Whether ``values`` is a list of arrays and numbers (rows, whatever their shapes).

    Not a list nested or holding itself, a dict or an object: those are no numeric rows.
    """
    if not isinstance(values, list):
        return False
    try:
        kinds = [layout(value) for value in values]
    except RecursionError:  # a dict holding itself
        return False
    return all(isinstance(kind, str) and kind.startswith("shape ") for kind in kinds)


def float32_rewards(rewards: np.ndarray) -> np.ndarray:
    """``rewards`` as the float32 column stores them, refused unless real scalars that fit.

    Raises:
        TypeError: Rewards that are not real numbers (a complex one would lose its imaginary
            part, a string would be parsed).
        ValueError: Rewards that are not one scalar per step (rows of another shape than the
            column's), or values a float32 cannot hold (they would overflow to infinity).

    Example:
        >>> float32_rewards(np.array([1, 2])).dtype
        dtype('float32')
        >>> float32_rewards(np.array([1e300]))
        Traceback (most recent call last):
        ...
        ValueError: rewards hold values a float32 column cannot (they overflow to inf)
    """
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be scalars, got shape {rewards.shape[1:]}")
    if rewards.dtype.kind not in "biuf":  # complex ones would lose their imaginary part
        raise TypeError(f"rewards must be real numbers, got dtype {rewards.dtype}")
    if rewards.dtype == np.float32:  # float32 rewards (numpy'd episodes) need no check
        return rewards
    with np.errstate(over="ignore", under="ignore"):
        stored = rewards.astype(np.float32)
    if np.any(np.isinf(stored) & ~np.isinf(rewards)):
        raise ValueError("rewards hold values a float32 column cannot (they overflow to inf)")
    return stored


class Column:
    """A numpy array of rows whose row dtype and shape are fixed by the first write.

    The dtype is the example's in native byte order (``>f4`` rows make a float32 column, and
    records' leaves too): samples go to torch, which takes no other (see
    ``episodes.buffer.plain_arrays``).

    Args:
        size: Rows to allocate.
        example: Rows whose dtype and trailing shape the column takes.

    Example:
        >>> col = Column(4, np.zeros((1, 2), np.float32))
        >>> col.data.shape, col.accepts(np.ones((3, 2), np.float32))
        ((4, 2), True)
    """

    __slots__ = ("data",)

    def __init__(self, size: int, example: np.ndarray):
        dtype = example.dtype
        # Records made native whole: numpy calls one native whose only foreign leaves have a
        # shape (('>f4', (2,))), which native_dtype then keeps.
        dtype = native_dtype(dtype) if dtype.names is None else dtype.newbyteorder("=")
        self.data = np.zeros((size, *example.shape[1:]), dtype)

    def accepts(self, rows: np.ndarray) -> bool:
        """Whether ``rows`` can be written without changing the row shape or kind.

        Example:
            >>> col = Column(4, np.zeros((1, 2), np.int64))
            >>> col.accepts(np.ones((3, 2), np.int32)), col.accepts(np.ones((3, 3), np.int64))
            (True, False)
            >>> col.accepts(np.ones((3, 2), np.float32))  # floats would lose their fraction
            False
        """
        kinds = {rows.dtype.kind, self.data.dtype.kind}
        # Signed and unsigned integers are one kind here (value checks follow in ``fit``).
        same_kind = len(kinds) == 1 or kinds == {"i", "u"}
        return rows.shape[1:] == self.data.shape[1:] and same_kind

    def fit(self, rows: np.ndarray, what: str) -> np.ndarray:
        """``rows`` in the column's dtype, refusing rows that do not fit or would change.

        Rows of another dtype of the same kind are cast (float64 observations into a float32
        column, as a torch learner would), but only if every value survives: an integer
        that would wrap or a float that would overflow to infinity is refused.

        Raises:
            ValueError: Another row shape or kind, or values the column's dtype cannot hold.

        Example:
            >>> col = Column(4, np.zeros((1,), np.int8))
            >>> col.fit(np.array([1, -3]), "actions").dtype
            dtype('int8')
            >>> col.fit(np.array([1, 300]), "actions")
            Traceback (most recent call last):
            ...
            ValueError: actions of dtype int64 hold values the buffer's int8 column cannot
            >>> Column(4, np.zeros((1,), np.uint8)).fit(np.array([-1, 5], np.int8), "observations")
            Traceback (most recent call last):
            ...
            ValueError: observations of dtype int8 hold values the buffer's uint8 column cannot
        """
        if self.data.dtype.names is not None or rows.dtype.names is not None:
            return fit_records(self, rows, what)  # nested: leaf by leaf
        if not self.accepts(rows):
            raise ValueError(
                f"{what} of shape {rows.shape[1:]} dtype {rows.dtype} do not fit the buffer's "
                f"{self.describe()}"
            )
        dtype = self.data.dtype
        if rows.dtype == dtype:
            return rows
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # a tiny float: 0
            cast = rows.astype(dtype)
        if dtype.kind in "fc":  # a float column: values that overflow become infinite
            changed = bool(np.any(np.isinf(cast) & ~np.isinf(rows)))
        else:  # an integer column: values that would wrap (-1 into uint8, 2**63 into int64)
            info = np.iinfo(dtype)  # a range check: a same-width round trip would not see it
            changed = rows.size > 0 and (int(rows.min()) < info.min or int(rows.max()) > info.max)
        if changed:
            raise ValueError(
                f"{what} of dtype {rows.dtype} hold values the buffer's {dtype} column cannot"
            )
        return cast

    def describe(self) -> str:
        """The row layout, for error messages.

        Example:
            >>> Column(4, np.zeros((1, 2, 3), np.float32)).describe()
            'shape (2, 3) dtype float32'
        """
        if self.data.dtype.names is not None:
            return f"nested values {describe(self.data.dtype)}"
        return f"shape {self.data.shape[1:]} dtype {self.data.dtype}"

    def resize(self, size: int) -> None:
        """Reallocates to ``size`` rows, keeping the first ``min(size, old)`` rows.

        Example:
            >>> col = Column(2, np.zeros(1))
            >>> col.data[:] = [1.0, 2.0]
            >>> col.resize(3)
            >>> col.data.tolist()
            [1.0, 2.0, 0.0]
        """
        new = np.zeros((size, *self.data.shape[1:]), self.data.dtype)
        keep = min(size, len(self.data))
        raw_rows(new)[:keep] = raw_rows(self.data)[:keep]  # records: as bytes, not by field
        self.data = new

    def keep(self, rows: np.ndarray) -> None:
        """Moves the given rows, in order, to the front (a compaction).

        Example:
            >>> col = Column(4, np.zeros(1))
            >>> col.data[:] = [0.0, 1.0, 2.0, 3.0]
            >>> col.keep(np.array([1, 3]))
            >>> col.data.tolist()  # rows past the kept ones are stale
            [1.0, 3.0, 2.0, 3.0]
        """
        move_to_front(self.data, rows)


def move_to_front(array: np.ndarray, rows: np.ndarray, done: list[int] | None = None) -> None:
    """Moves ``array[rows]`` to the front of ``array`` in place; ``rows`` must rise strictly.

    Rising rows only move forward (``rows[k] >= k``), so the rows are gathered a few MiB at a
    time: a later gather never reads a row an earlier one overwrote, and the temporary stays
    that small, where ``array[: len(rows)] = array[rows]`` would gather all of them at once.
    ``done[0]``, when given, counts the rows moved so far, right after each step, so that an
    exception (``KeyboardInterrupt``, ``MemoryError``) between two steps can be undone with
    :func:`move_back` over ``rows[: done[0]]``.

    Example:
        >>> data = np.arange(10.0)
        >>> move_to_front(data, np.array([2, 3, 7, 9]))
        >>> data[:4].tolist()
        [2.0, 3.0, 7.0, 9.0]
    """
    count = len(rows)
    step = max(1, _MOVE_BYTES // max(array[:1].nbytes, 1))
    done = [0] if done is None else done
    for start in range(0, count, step):
        stop = min(start + step, count)
        array[start:stop] = array[rows[start:stop]]
        done[0] = stop  # no call in between: a signal cannot fall between the move and its count


def move_back(array: np.ndarray, rows: np.ndarray) -> None:
    """Undoes :func:`move_to_front` of ``rows``: ``array[rows]`` as before the move.

    The rows are scattered back last first: row ``k`` goes to ``rows[k] >= k``, where no row
    still to go back sits. Rows not in ``rows`` (dead ones) keep what the move left there.

    Example:
        >>> data = np.arange(6.0)
        >>> move_to_front(data, np.array([2, 3, 5]))
        >>> move_back(data, np.array([2, 3, 5]))
        >>> data[[2, 3, 5]].tolist()
        [2.0, 3.0, 5.0]
    """
    step = max(1, _MOVE_BYTES // max(array[:1].nbytes, 1))
    for stop in range(len(rows), 0, -step):
        start = max(0, stop - step)
        array[rows[start:stop]] = array[start:stop].copy()
