"""Which values a numpy column can hold, and the error for those it cannot.

A number may wait in a scalar column's pending list (written in bulk at the next read) only if
writing it cannot fail or change it, so that a value the column cannot hold (inf into ints, -1
into uints, 10**400 or 1e40 into float32) is refused at append time, exactly as a one-by-one
assignment refuses it, and never surfaces at a later read.

Example:
    >>> always, ranged, low, high = fit_of(np.dtype(np.uint8))
    >>> bool in always, int in ranged, (low, high)
    (True, True, (0, 255))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer.batch_stacks import _PLAIN_NUMBER_KINDS, _stacked, _stacked_exactly
from episodes.buffer.plain_arrays import (
    check_items_unmasked,
    check_unmasked,
    native_dtype,
    plain_leaves,
    same_record,
)
from episodes.buffer.stack_errors import layout, unstackable
from episodes.spaces import batch as stack_items
from episodes.structs import flatten, leaves_up_to, same_nesting, short_repr, unflatten

__all__ = [
    "MISFIT_ERRORS",
    "adopted_layout",
    "appended_row",
    "batch_leaves",
    "batch_misfit",
    "first_batch",
    "first_leaves",
    "fit_of",
    "misfit",
    "staged_batch",
    "staged_leaves",
    "staged_rows",
    "values_at",
    "write_rows",
]

_INTEGERS = frozenset((int, np.int64, np.int32))
_FLOATS = frozenset((float, np.float64, np.float32))
_BOOLS = frozenset((bool, np.bool_))
# The largest magnitude of each number class above (a Python int has none).
_LARGEST = {
    bool: 1,
    np.bool_: 1,
    np.int32: 2**31,
    np.int64: 2**63,
    np.float32: float(np.finfo(np.float32).max),
    np.float64: float(np.finfo(np.float64).max),
    float: float(np.finfo(np.float64).max),
}
_FIT_BY_DTYPE: dict[np.dtype[Any], tuple[frozenset[type], frozenset[type], float, float]] = {}
# Dtype kinds of numbers and bools. Such a column takes only values numpy reads as one of
# them: numpy would parse "2.5" into 2.5, turn None into NaN and any string or dict into True.
_NUMBER_KINDS = "biufc"
_MAY_OVERFLOW: dict[tuple[np.dtype[Any], np.dtype[Any]], bool] = {}

_NUL_DROPPED = "numpy's fixed-width strings drop trailing NUL characters"
# A complex value into a column of real numbers or bools: numpy would drop its imaginary part.
_NOT_REAL = "complex numbers into a column of real numbers would lose their imaginary part"

_NOT_RECORD = "not a record of the column's structured dtype"

#: What numpy raises when a value does not fit a column.
MISFIT_ERRORS = (ValueError, TypeError, OverflowError)


def fit_of(dtype: np.dtype[Any]) -> tuple[frozenset[type], frozenset[type], float, float]:
    """Number classes a scalar column of ``dtype`` takes unchecked, and those it takes in a range.

    Returns ``(always, ranged, low, high)``: a number of a class in ``always`` always keeps its
    value in the column (up to a float's rounding); one of a class in ``ranged`` does if
    ``low <= value <= high``. Any other number takes the checked path (:func:`appended_row`):
    0.5 into ints, 1e40 into float32 (it would be inf), NaN or inf into floats.

    Example:
        >>> always, ranged, low, high = fit_of(np.dtype(np.float32))
        >>> np.float32 in always, float in ranged, high == float(np.finfo(np.float32).max)
        (True, True, True)
    """
    fit = _FIT_BY_DTYPE.get(dtype)
    if fit is not None:
        return fit
    numbers = _INTEGERS | _FLOATS
    if dtype.kind in "iu":
        info = np.iinfo(dtype)  # floats take the checked path: 0.5 is no int
        fit = _BOOLS, _INTEGERS, int(info.min), int(info.max)
    elif dtype.kind in "fc":
        top = float(np.finfo(dtype).max)
        always = frozenset(c for c in numbers if c is not int and _LARGEST[c] <= top)
        fit = always | _BOOLS, numbers - always, -top, top
    else:  # bools take bools only (0.5 or 5 is no bool); other kinds take no number unchecked
        fit = (_BOOLS if dtype.kind == "b" else frozenset()), frozenset(), 1, 0
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
    elif isinstance(value, (np.str_, np.bytes_)):  # whose repr drops trailing NULs
        what = f"np.{type(value).__name__}({value[:]!r})"
    else:
        what = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
    return ValueError(
        f"{what} does not fit a numpy column of dtype {leaf.dtype} and item shape "
        f"{leaf.shape[1:]} ({error})"
    )


def appended_row(leaf: np.ndarray, value: Any) -> Any:
    """``value`` as one new row of column ``leaf``, or the misfit error.

    An appended item must have the column's item shape (no broadcasting: a scalar is not a
    row of two), a column of numbers or bools takes numbers and bools only (no None, no
    strings, not even "2.5"), and a float written into an integer or bool column must survive
    the cast (0.5 is not the int 0), as must a finite number written into a narrower float
    column (1e40 would be inf in float32) and a string written into a string column ("hello"
    does not fit ``<U2``; a string or bytes ending in NUL does not fit either, as numpy's
    fixed-width strings drop trailing NULs). An int beyond uint64 is no bool (numpy would
    store ``2**64`` as True). The row of a flat object column is the value itself, whatever it
    is (a list, a tuple or an array too, as list mode stores it: contract 3.7); a 0-d array is
    unwrapped into its value, as before.

    Example:
        >>> appended_row(np.zeros((3, 2)), [1, 2]).tolist()
        [1.0, 2.0]
        >>> appended_row(np.zeros((3, 2)), 5.0)
        Traceback (most recent call last):
        ValueError: 5.0 does not fit a numpy column of dtype float64 and item shape (2,) ...
        >>> appended_row(np.zeros(3, np.int64), 0.5)
        Traceback (most recent call last):
        ValueError: 0.5 does not fit a numpy column of dtype int64 and item shape () ...
        >>> appended_row(np.zeros(3), "2.5")
        Traceback (most recent call last):
        ValueError: '2.5' does not fit a numpy column of dtype float64 ... (not a number: <U3)
        >>> appended_row(np.array([None, "a"]), [1, 2])  # an object column's value itself
        [1, 2]
    """
    if leaf.ndim == 1 and leaf.dtype.kind == "O":
        if value.__class__ is not np.ndarray or value.ndim:
            return value
    check_unmasked(value, "the value")  # np.asarray would drop its mask
    row = np.empty(leaf.shape[1:], leaf.dtype)
    kind = row.dtype.kind
    try:
        given = np.asarray(value)
        if given.shape != row.shape:
            raise ValueError(f"item shape {given.shape}")
        if row.dtype.names is not None and not same_record(given.dtype, row.dtype):
            raise ValueError(_NOT_RECORD)  # numpy would write a number into every field
        # An int beyond int64 is an object to numpy, but a number the assignment judges.
        if kind in _NUMBER_KINDS and given.dtype.kind not in _NUMBER_KINDS:
            if not isinstance(value, int):
                raise ValueError(f"not a number: {given.dtype}")
        if given.dtype.kind == "c" and kind in "biuf":
            raise ValueError(_NOT_REAL)
        # Into a narrower float (1e40 into float32) a value may overflow to inf: numpy's
        # overflow flag refuses it, no scan needed. (np.errstate costs more than the
        # assignment: only where needed.)
        overflowing = kind in "fc" and _may_overflow(given.dtype, row.dtype)
        if overflowing or (kind in "iub" and given.dtype.kind in "fc"):  # NaN into ints: below
            with np.errstate(
                over="raise" if overflowing else "ignore", under="ignore", invalid="ignore"
            ):
                row[...] = value  # a tiny value rounds, as numpy's
        else:
            row[...] = value  # numpy's own checks for Python numbers (300 into int8 raises)
    except FloatingPointError as error:
        raise misfit(value, leaf, ValueError(f"beyond the range of {leaf.dtype}")) from error
    except MISFIT_ERRORS as error:
        raise misfit(value, leaf, error) from error
    if kind in "iub" and given.dtype.kind == "O":
        # An int beyond uint64 (2**64, -2**64): numpy refuses it for ints but reads it as
        # True for bools; no such int is a bool.
        raise misfit(value, leaf, ValueError("the value changes in that dtype"))
    if kind in "US" and _ends_in_nul(value):
        raise misfit(value, leaf, ValueError(_NUL_DROPPED))
    # Arrays and numpy scalars are cast without those checks: the value must survive.
    lossy = kind in "iub" and given.dtype.kind in "iufcb" and given.dtype != row.dtype
    lossy |= kind in "US"  # a longer string is cut to the column's width
    if lossy and not np.array_equal(row, given):
        raise misfit(value, leaf, ValueError("the value changes in that dtype"))
    if overflowing and given.dtype.kind == "O" and _overflows(row, given):  # no flag
        raise misfit(value, leaf, ValueError(f"beyond the range of {row.dtype}"))
    if kind == "O" and not row.ndim:
        return row[()]
    return row


def _ends_in_nul(value: Any) -> bool:
    """Whether ``value``, or a string among its items (a row), ends in NUL: padding to numpy.

    Only Python strings and bytes (alone, in lists or tuples, or in object arrays) can hold
    one: numpy's own string arrays dropped it already.
    """
    if isinstance(value, str):
        return value.endswith("\x00")
    if isinstance(value, bytes):
        return value.endswith(b"\x00")
    if isinstance(value, (list, tuple)):
        return any(_ends_in_nul(item) for item in value)
    if isinstance(value, np.ndarray) and value.dtype == object:
        return any(_ends_in_nul(item) for item in value.flat)
    return False


def _may_overflow(given: np.dtype[Any], column: np.dtype[Any]) -> bool:
    """Whether a value of dtype ``given`` may be beyond the range of float dtype ``column``."""
    key = (given, column)
    may = _MAY_OVERFLOW.get(key)
    if may is None:
        may = _MAY_OVERFLOW[key] = not np.can_cast(given, column)
    return may


def write_rows(column: np.ndarray, where: Any, rows: np.ndarray) -> None:
    """``column[where] = rows`` for checked rows; a tiny float narrowed rounds to 0.

    As by numpy's default, also under ``np.seterr(under="raise")`` (overflow was checked).

    Example:
        >>> column = np.ones(3, np.float32)
        >>> with np.errstate(all="raise"):
        ...     write_rows(column, slice(0, 2), np.array([1e-50, 2.0]))
        >>> column.tolist()
        [0.0, 2.0, 1.0]
    """
    try:  # np.errstate costs more than the assignment: only where underflow was an error
        column[where] = rows
    except FloatingPointError:  # the rows fit (overflow is checked before): rewrite them all
        with np.errstate(under="ignore"):
            column[where] = rows


def _overflows(cast: np.ndarray, given: np.ndarray) -> bool:
    """Whether a finite value of ``given`` became inf in ``cast`` (1e40 into float32)."""
    infinite = np.isinf(cast)
    if not infinite.any():
        return False
    return given.dtype.kind == "O" or bool((infinite & ~np.isinf(given)).any())


def staged_rows(leaves: list[np.ndarray], item: Any, structure: Any = None) -> list[Any]:
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
    values = [item] if structure is None else values_at(structure, item)
    if values is None or len(values) != len(leaves):
        raise ValueError(f"item {short_repr(item)} does not match the column's item structure")
    # The checks of an append: the item shape exactly (no broadcasting), values that survive.
    return [appended_row(leaf, value) for leaf, value in zip(leaves, values)]


def values_at(structure: Any, item: Any) -> list[Any] | None:
    """``item``'s values at ``structure``'s leaves (:func:`leaves_up_to`), or None.

    Where ``structure`` holds a tuple (a Tuple part), an array of as many rows is read as its
    parts, as gymnasium's ``Tuple.contains`` reads ``np.array([1, 0])`` for two Discretes.

    Example:
        >>> [int(v) for v in values_at((0, 0), np.array([2, 1]))]
        [2, 1]
        >>> values_at({"a": 0}, {"b": 1}) is None
        True
    """
    found = leaves_up_to(structure, item)
    if found is None:  # only where the item does not nest as it is: no cost on the usual path
        found = leaves_up_to(structure, _array_parts(structure, item))
    return found


def _array_parts(structure: Any, item: Any) -> Any:
    """``item`` with an array read as its rows where ``structure`` holds a tuple of its length."""
    if isinstance(structure, dict):
        if not isinstance(item, dict) or item.keys() != structure.keys():
            return item
        return {key: _array_parts(structure[key], value) for key, value in item.items()}
    if isinstance(structure, (tuple, list)):
        if isinstance(item, np.ndarray) and item.ndim and len(item) == len(structure):
            item = list(item)
        if isinstance(item, (tuple, list)) and len(item) == len(structure):
            return [_array_parts(sub, value) for sub, value in zip(structure, item)]
    return item


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
        values = [item] if structure is None else values_at(structure, item)
        if values is not None:
            for value in values:
                check_unmasked(value, "the value")  # np.asarray would drop its mask
            return [np.asarray(value) for value in values], _nested_as(structure, [item])
    return flatten(item)


def _nested_as(structure: Any, items: list[Any]) -> Any:
    """``structure`` with a Tuple part a list where every item holds a list there.

    As numpy'ing the items from list mode nests them (``batch_in_space``), so a column numpy'd
    before its first item holds what it would hold numpy'd after.
    """
    if isinstance(structure, dict):
        return {
            key: _nested_as(part, [item[key] for item in items]) for key, part in structure.items()
        }
    if isinstance(structure, (tuple, list)):
        parts = [_nested_as(part, [item[i] for item in items]) for i, part in enumerate(structure)]
        return parts if all(item.__class__ is list for item in items) else tuple(parts)
    return structure


def first_batch(
    structure: Any, leaf_ndim: int, items: list[Any], columns: list[np.ndarray] | None = None
) -> Any:
    """The batch an empty, untyped column takes from its first ``items``.

    Each item is read as :func:`first_leaves` reads one: in a column shaped by a space, a list
    at a leaf is a row, so extending by a list of items stores what appending them one by one,
    or numpy'ing them from list mode, stores (not a column per component). ``columns`` are the
    empty column's placeholder leaves (their item shapes name a value that does not fit).

    Example:
        >>> first_batch(None, 2, [[0.5, 0.25], [1.0, -1.0]]).tolist()  # Box rows
        [[0.5, 0.25], [1.0, -1.0]]
        >>> [leaf.tolist() for leaf in first_batch(None, 1, [(1, 0.5), (2, 1.5)])]  # no shape
        [[1, 2], [0.5, 1.5]]
    """
    check_items_unmasked(items)  # stacking would drop their masks
    if structure is not None or leaf_ndim > 1:
        values = [[item] if structure is None else values_at(structure, item) for item in items]
        if all(value is not None for value in values):
            per_leaf = list(zip(*values))
            try:
                leaves = [np.asarray(leaf) for leaf in per_leaf]
            except MISFIT_ERRORS as error:  # ragged: name the value (numpy's words do not)
                raise _first_misfit(per_leaf, columns, error) from error
            _check_nuls(leaves, per_leaf)
            return unflatten(_nested_as(structure, items), leaves)
    try:
        batch = stack_items(items)
    except ValueError as error:
        named = unstackable(items)  # numpy's words name no item
        if named is None:
            raise
        raise named from error
    leaves = flatten(batch)[0]
    if any(getattr(leaf, "dtype", None) is not None and leaf.dtype.kind in "US" for leaf in leaves):
        _check_nuls(leaves, list(zip(*(flatten(item)[0] for item in items))))
    return batch


def _first_misfit(
    per_leaf: list[Any], columns: list[np.ndarray] | None, error: Exception
) -> ValueError:
    """The error for the first value of ``per_leaf[k]`` unlike ``columns[k]``'s item shape."""
    for k, values in enumerate(per_leaf):
        column = columns[k] if columns is not None and k < len(columns) else None
        wanted = layout(values[0]) if column is None else f"shape {column.shape[1:]}"
        for value in values:
            found = layout(value)
            if found != wanted and column is not None:
                try:  # the words of a typed column's refusal
                    words = f"item shape {np.shape(value)}"
                except ValueError:
                    words = str(found)
                return misfit(value, column, ValueError(words))
            if found != wanted:
                return ValueError(f"the values do not stack: {wanted!r}, then {found!r}")
    return ValueError(f"the values do not stack into a numpy column ({error})")


def _check_nuls(leaves: list[Any], values: list[Any]) -> None:
    """Refuses a string value ending in NUL that a string leaf of ``leaves`` would drop."""
    for leaf, column_values in zip(leaves, values):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "US":
            for value in column_values:
                if _ends_in_nul(value):
                    raise misfit(value, leaf, ValueError(_NUL_DROPPED))


Layout = list[tuple[tuple[int, ...], np.dtype[Any]]]


def adopted_layout(
    before: list[np.ndarray], structure_before: Any, layout: Layout, structure: Any
) -> Layout:
    """The leaf layouts (item shape, dtype) an untyped column takes for its first values.

    ``layout`` is the first values' own, but a string leaf stays as wide as the empty
    placeholder ``before`` (a space's layout) made it where that is wider: a Text part of a
    Dict or Tuple space has room for ``max_length`` characters, as a top-level Text column has,
    so a short first string does not refuse a later, longer one.

    Example:
        >>> before = [np.zeros((0,), "<U4"), np.zeros((0, 2))]
        >>> adopted_layout(before, (0, 0), [((), np.dtype("<U1")), ((2,), np.dtype(int))], (0, 0))
        [((), dtype('<U4')), ((2,), dtype('int64'))]
    """
    layout = [(shape, native_dtype(dtype)) for shape, dtype in layout]  # as numpy'ing stores
    if len(before) != len(layout) or not same_nesting(structure_before, structure):
        return layout
    adopted = []
    for placeholder, (shape, dtype) in zip(before, layout):
        wider = placeholder.dtype.itemsize > dtype.itemsize and placeholder.shape[1:] == shape
        if dtype.kind in "US" and placeholder.dtype.kind == dtype.kind and wider:
            dtype = placeholder.dtype
        adopted.append((shape, dtype))
    return adopted


def staged_batch(leaves: list[np.ndarray], structure: Any, items: list[Any]) -> Any:
    """``items`` as one batch in the column's layout, each cast as :func:`staged_rows` casts it.

    Example:
        >>> staged_batch([np.zeros((3, 2))], None, [[1, 2], [3, 4]]).tolist()
        [[1.0, 2.0], [3.0, 4.0]]
    """
    return unflatten(structure, staged_leaves(leaves, structure, items))


def staged_leaves(leaves: list[np.ndarray], structure: Any, items: list[Any]) -> list[np.ndarray]:
    """:func:`staged_batch`'s leaves: one array per column leaf, of its dtype and item shape.

    Example:
        >>> [leaf.tolist() for leaf in staged_leaves([np.zeros(3, np.int8)], None, [1, 2])]
        [[1, 2]]
    """
    check_items_unmasked(items)  # stacking would drop their masks
    column = leaves[0]
    if structure is None and column.dtype.kind in _PLAIN_NUMBER_KINDS:
        # Numbers into a flat number column: one stack and one batch check (as strict as the
        # per-item one) instead of a cast per item; any doubt takes the per-item path, which
        # also gives its error.
        try:
            batch = np.asarray(items)
        except (ValueError, TypeError, OverflowError):
            batch = None
        if batch is not None and batch.dtype == column.dtype:  # nothing to cast or check
            if batch.shape[1:] == column.shape[1:] and len(batch) == len(items):
                return [batch]
        elif (
            batch is not None
            and _stacked_exactly(batch, column.dtype)
            and batch_misfit(column, batch, len(items)) is None
        ):
            with np.errstate(under="ignore"):  # a tiny float rounds to 0, as numpy's default
                return [batch.astype(column.dtype, copy=False)]
    staged = [staged_rows(leaves, item, structure) for item in items]
    return [_stacked(leaf, rows) for leaf, rows in zip(leaves, zip(*staged))]


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
    if batch.__class__ is np.ndarray and batch.ndim:  # a flat column's: one leaf, with rows
        return [batch], None
    arrays, structure = plain_leaves(batch)  # masked arrays refused
    if any(a.ndim == 0 for a in arrays) or len({len(a) for a in arrays}) > 1:
        raise ValueError(
            "extend takes a list of items or a batch whose leaves share a leading axis, "
            f"got leaves of shapes {[a.shape for a in arrays]}"
        )
    return arrays, structure


def batch_misfit(column: np.ndarray, leaf: np.ndarray, count: int) -> ValueError | None:
    """The error for a batch ``leaf`` of ``count`` rows that column ``column`` cannot take.

    The rows must have the column's item shape, a column of numbers or bools takes numbers
    and bools only (not strings or objects, as :func:`appended_row`), and values of a narrower
    kind must survive the cast (0.5 into ints, 300 into int8, "hello" into ``<U2``, 1e40 into
    float32); None when they fit.

    Example:
        >>> print(batch_misfit(np.zeros((4, 2), np.int8), np.full((2, 2), 300), 2))
        an array of shape (2, 2) and dtype int64 does not fit a numpy column of dtype int8 ...
        >>> batch_misfit(np.zeros((4, 2), np.int8), np.ones((2, 2)), 2) is None
        True
    """
    if leaf.shape[1:] != column.shape[1:] or len(leaf) != count:
        return misfit(leaf, column, ValueError(f"batch of shape {leaf.shape}"))
    if column.dtype.kind in _NUMBER_KINDS and leaf.dtype.kind not in _NUMBER_KINDS:
        return misfit(leaf, column, ValueError(f"not numbers: {leaf.dtype}"))
    if column.dtype.names is not None and not same_record(leaf.dtype, column.dtype):
        return misfit(leaf, column, ValueError(_NOT_RECORD))
    if leaf.dtype.kind == "c" and column.dtype.kind in "biuf":
        return misfit(leaf, column, ValueError(_NOT_REAL))
    narrowing = column.dtype.kind in "iub" and leaf.dtype.kind in "iufcb"
    # Strings longer than the column's width would be cut ("hello" into <U2).
    narrowing |= column.dtype.kind in "US" and leaf.dtype.kind in "US"
    if narrowing and leaf.dtype != column.dtype:
        with np.errstate(invalid="ignore", over="ignore"):
            cast = leaf.astype(column.dtype)
        if not np.array_equal(cast, leaf):
            return misfit(leaf, column, ValueError("values change in that dtype"))
    elif column.dtype.kind in "fc" and _may_overflow(leaf.dtype, column.dtype):
        with np.errstate(over="ignore", under="ignore"):
            cast = leaf.astype(column.dtype)
        if _overflows(cast, leaf):
            return misfit(leaf, column, ValueError(f"beyond the range of {column.dtype}"))
    return None
