"""Which values a numpy column can hold, and the error for those it cannot.

A number may wait in a scalar column's pending list (written in bulk at the next read) only if
writing it cannot fail, so that a value the column cannot hold (inf into ints, -1 into uints,
10**400 into floats) is refused at append time, exactly as a one-by-one assignment refuses
it, and never surfaces at a later read.

Example:
    >>> always, low, high = fit_of(np.dtype(np.uint8))
    >>> bool in always, int in always, (low, high)
    (True, False, (0, 255))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.structs import flatten, leaves_up_to, unflatten

__all__ = [
    "INTEGERS",
    "MISFIT_ERRORS",
    "appended_row",
    "batch_leaves",
    "batch_misfit",
    "first_leaves",
    "fit_of",
    "misfit",
    "staged_batch",
    "staged_rows",
]

INTEGERS = frozenset((int, np.int64, np.int32))
_FLOATS = frozenset((float, np.float64, np.float32))
_BOOLS = frozenset((bool, np.bool_))
# Per leaf dtype kind: classes that always convert, and the integer range that does.
_HUGE = 1 << 1023
_ALWAYS_FIT = {
    "b": _BOOLS,  # other numbers take the checked path: 0.5 or 5 is not a bool
    "f": frozenset((np.int64, np.int32)) | _FLOATS | _BOOLS,
    "c": frozenset((np.int64, np.int32)) | _FLOATS | _BOOLS,
    "i": _BOOLS,
    "u": _BOOLS,
}
_FIT_BY_DTYPE: dict[np.dtype[Any], tuple[frozenset[type], int, int]] = {}

#: What numpy raises when a value does not fit a column.
MISFIT_ERRORS = (ValueError, TypeError, OverflowError)


def fit_of(dtype: np.dtype[Any]) -> tuple[frozenset[type], int, int]:
    """Number classes that always fit a scalar column of ``dtype``, and the int range that does.

    Example:
        >>> always, low, high = fit_of(np.dtype(np.float32))
        >>> float in always, int in always, low < -(10**300) and high > 10**300
        (True, False, True)
    """
    fit = _FIT_BY_DTYPE.get(dtype)
    if fit is not None:
        return fit
    always_fit = _ALWAYS_FIT.get(dtype.kind, frozenset())
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        fit = always_fit, int(info.min), int(info.max)
    elif dtype.kind in "fc":
        fit = always_fit, -_HUGE, _HUGE
    else:
        fit = always_fit, 1, 0  # an empty range: integers take the checked path
    _FIT_BY_DTYPE[dtype] = fit
    return fit


def misfit(value: Any, leaf: np.ndarray, error: Exception) -> ValueError:
    """The error for ``value`` that does not fit column ``leaf`` (``error``: numpy's).

    Example:
        >>> column = np.zeros((4, 2), np.int8)
        >>> str(misfit(1000, column, OverflowError("out of bounds")))
        '1000 does not fit a numpy column of dtype int8 and item shape (2,) (out of bounds)'
    """
    if isinstance(value, np.ndarray):
        what = f"an array of shape {value.shape} and dtype {value.dtype}"
    else:
        what = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
    return ValueError(
        f"{what} does not fit a numpy column of dtype {leaf.dtype} and item shape "
        f"{leaf.shape[1:]} ({error})"
    )


def appended_row(leaf: np.ndarray, value: Any) -> np.ndarray:
    """``value`` as one new row of column ``leaf``, or the misfit error.

    An appended item must have the column's item shape (no broadcasting: a scalar is not a
    row of two), and a float written into an integer or bool column must survive the cast
    (0.5 is not the int 0), as must a string written into a string column ("hello" does not
    fit ``<U2``).

    Example:
        >>> appended_row(np.zeros((3, 2)), [1, 2]).tolist()
        [1.0, 2.0]
        >>> appended_row(np.zeros((3, 2)), 5.0)
        Traceback (most recent call last):
        ValueError: 5.0 does not fit a numpy column of dtype float64 and item shape (2,) ...
        >>> appended_row(np.zeros(3, np.int64), 0.5)
        Traceback (most recent call last):
        ValueError: 0.5 does not fit a numpy column of dtype int64 and item shape () ...
    """
    row = np.empty(leaf.shape[1:], leaf.dtype)
    try:
        given = np.asarray(value)
        if given.shape != row.shape:
            raise ValueError(f"item shape {given.shape}")
        row[...] = value  # numpy's own checks for Python numbers (300 into int8 raises)
    except MISFIT_ERRORS as error:
        raise misfit(value, leaf, error) from error
    # Arrays and numpy scalars are cast without those checks: the value must survive.
    lossy = row.dtype.kind in "iub" and given.dtype.kind in "iufcb" and given.dtype != row.dtype
    lossy |= row.dtype.kind in "US"  # a longer string is cut to the column's width
    if lossy and not np.array_equal(row, given):
        raise misfit(value, leaf, ValueError("the value changes in that dtype"))
    return row


def staged_rows(leaves: list[np.ndarray], item: Any, structure: Any = None) -> list[np.ndarray]:
    """``item`` cast into one new row per leaf, or the misfit error before anything is written.

    ``structure`` (the column's item structure, if nested) must nest like ``item``: the same
    dict keys, so that no value lands under another key.

    Example:
        >>> leaves = [np.zeros((3,), np.int64), np.zeros((3, 2))]
        >>> [row.tolist() for row in staged_rows(leaves, (1, [1, 2]), structure=(0, 0))]
        [1, [1.0, 2.0]]
        >>> staged_rows(leaves, (1,), structure=(0, 0))
        Traceback (most recent call last):
        ValueError: item (1,) does not match the column's item structure
        >>> staged_rows(leaves, {"a": 1, "c": [0, 0]}, structure={"a": 0, "b": [0, 0]})
        Traceback (most recent call last):
        ValueError: item {'a': 1, 'c': [0, 0]} does not match the column's item structure
    """
    # A flat column's item is one row, whatever it is (a list of two for a row of two); a
    # nested column's values are read at its leaves (where a list is a row too).
    values = [item] if structure is None else leaves_up_to(structure, item)
    if values is None or len(values) != len(leaves):
        raise ValueError(f"item {item!r} does not match the column's item structure")
    # The checks of an append: the item shape exactly (no broadcasting), values that survive.
    return [appended_row(leaf, value) for leaf, value in zip(leaves, values)]


def first_leaves(structure: Any, leaf_ndim: int, item: Any) -> tuple[list[Any], Any]:
    """The leaves and structure an empty, untyped column takes from its first ``item``.

    A column shaped by a space (``structure``, or rows: ``leaf_ndim > 1``) reads a list at a
    leaf as a row, as stacking the same item later would; one without a shape flattens it.

    Example:
        >>> [x.tolist() for x in first_leaves(None, 2, [0.5, 1.5])[0]]  # a Box row
        [[0.5, 1.5]]
        >>> first_leaves(None, 1, (1, 2.5))[0]  # no shape: the tuple is structure
        [1, 2.5]
    """
    if structure is not None or leaf_ndim > 1:
        values = [item] if structure is None else leaves_up_to(structure, item)
        if values is not None:
            return [np.asarray(value) for value in values], structure
    return flatten(item)


def staged_batch(leaves: list[np.ndarray], structure: Any, items: list[Any]) -> Any:
    """``items`` as one batch in the column's layout, each cast as :func:`staged_rows` casts it.

    Example:
        >>> staged_batch([np.zeros((3, 2))], None, [[1, 2], [3, 4]]).tolist()
        [[1.0, 2.0], [3.0, 4.0]]
    """
    staged = [staged_rows(leaves, item, structure) for item in items]
    return unflatten(structure, [np.stack(rows) for rows in zip(*staged)])


def batch_leaves(batch: Any) -> tuple[list[np.ndarray], Any]:
    """A batched struct's leaves as arrays (and its structure), checked to share a leading axis.

    A scalar, a tuple of scalars or a ragged batch would otherwise count as no items.

    Example:
        >>> [a.shape for a in batch_leaves({"x": np.zeros((2, 3)), "y": np.ones(2)})[0]]
        [(2, 3), (2,)]
        >>> batch_leaves((3, 4))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: extend takes a list of items or a batch whose leaves share ... [(), ()]
    """
    leaves, structure = flatten(batch)
    arrays = [np.asarray(leaf) for leaf in leaves]
    if any(a.ndim == 0 for a in arrays) or len({len(a) for a in arrays}) > 1:
        raise ValueError(
            "extend takes a list of items or a batch whose leaves share a leading axis, "
            f"got leaves of shapes {[a.shape for a in arrays]}"
        )
    return arrays, structure


def batch_misfit(column: np.ndarray, leaf: np.ndarray, count: int) -> ValueError | None:
    """The error for a batch ``leaf`` of ``count`` rows that column ``column`` cannot take.

    The rows must have the column's item shape, and values of a narrower kind must survive
    the cast (0.5 into ints, 300 into int8, "hello" into ``<U2``); None when they fit.

    Example:
        >>> print(batch_misfit(np.zeros((4, 2), np.int8), np.full((2, 2), 300), 2))
        an array of shape (2, 2) and dtype int64 does not fit a numpy column of dtype int8 ...
        >>> batch_misfit(np.zeros((4, 2), np.int8), np.ones((2, 2)), 2) is None
        True
    """
    if leaf.shape[1:] != column.shape[1:] or len(leaf) != count:
        return misfit(leaf, column, ValueError(f"batch of shape {leaf.shape}"))
    narrowing = column.dtype.kind in "iub" and leaf.dtype.kind in "iufcb"
    # Strings longer than the column's width would be cut ("hello" into <U2).
    narrowing |= column.dtype.kind in "US" and leaf.dtype.kind in "US"
    if narrowing and leaf.dtype != column.dtype:
        with np.errstate(invalid="ignore", over="ignore"):
            cast = leaf.astype(column.dtype)
        if not np.array_equal(cast, leaf):
            return misfit(leaf, column, ValueError("values change in that dtype"))
    return None
