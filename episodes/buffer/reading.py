"""Assembling reads: a resolved index plan turned into a batch of the buffer's store.

The buffer resolves user indices with :mod:`episodes.indexing`; these functions fetch the
stored part from the store, encode it, and pad it with fillers, using only the store protocol
(:mod:`episodes.buffer.store`), so list and numpy stores answer every read the same way.

Example:
    >>> from episodes.buffer.list_store import ListStore
    >>> from episodes.indexing import SlicePlan
    >>> read_plan(ListStore([1, 2]), None, SlicePlan(1, 0, 2, 0, 1), 0, False)
    [0, 1, 2]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes import indexing
from episodes.buffer.column_fillers import column_typed
from episodes.buffer.discrete_window import window_one_hot
from episodes.buffer.store import Store
from episodes.spaces import filler_item, one_hot
from episodes.spaces.batching import rounded_ints
from episodes.spaces.filler import refuse_cut_fill
from episodes.structs import (
    common_nesting,
    flatten,
    is_nested,
    leaves_up_to,
    map_alike,
    same_nesting,
    unflatten,
)

# Dtype kinds of numbers and bools.
_NUMBERS = "biufc"
# Position lists shorter than this are checked and (from a list store) read in Python.
_SHORT = 32
# The classes a fill may nest in (subclasses, e.g. namedtuples, are left as they are).
_NESTED = (dict, tuple, list)
# A padded read of this many stored items or more, at positions that run on by one, reads them
# as views rather than a gathered copy (fewer are gathered: checking costs more than copying).
_VIEWS = 256


def read_plan(
    store: Store,
    space: gym.Space[Any] | None,
    plan: indexing.SlicePlan,
    fill: Any,
    one_hot_discrete: bool,
) -> Any:
    """The batch a slice plan describes: fillers, the stored window, fillers, then the step.

    The step is taken first (:meth:`~episodes.indexing.SlicePlan.step_first`): items it skips
    are never encoded, so one outside the space that the result leaves out raises nothing.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> plan = indexing.SlicePlan(fill_left=0, start=1, stop=5, fill_right=2, step=2)
        >>> read_plan(ArrayStore.from_batch(np.arange(5)), None, plan, -1, False).tolist()
        [1, 3, -1]
    """
    strided = plan if plan.step == 1 else plan.step_first()
    try:
        window = store.window(strided.start, strided.stop)
        if plan.step != 1:
            window = store.stride(window, plan.step)
        if one_hot_discrete and type(space) is gym.spaces.Discrete:
            # The connector hot path: one zero matrix and one scatter.
            rows = window_one_hot(
                window,
                n=int(space.n),
                start=int(space.start),
                fill_left=strided.fill_left,
                fill_right=strided.fill_right,
            )
            if rows is not None:
                return store.from_rows(rows)
        if one_hot_discrete:
            window = store.encode_one_hot(window, space)
        if strided.fill_left or strided.fill_right:
            padded = _padded(store, space, strided, window, fill, one_hot_discrete)
            if padded is None:  # joined, ints would round: read as the item-by-item path does
                return read_positions(store, space, _positions(strided, len(store)), fill,
                                      one_hot_discrete, 0)  # fmt: skip
            window = padded
    except MemoryError as error:  # fillers no array (or list) holds: the slice is too long
        kept = -(-(strided.stop - strided.start) // plan.step)  # items the step keeps
        count = strided.fill_left + kept + strided.fill_right
        why = f": {error}" if str(error) else ""
        raise MemoryError(
            f"a slice of {count} items (fillers included) cannot be read{why}"
        ) from error
    return window


def _padded(
    store: Store,
    space: gym.Space[Any] | None,
    plan: indexing.SlicePlan,
    window: Any,
    fill: Any,
    one_hot_discrete: bool,
) -> Any:
    """The stored ``window`` with the plan's fillers on either side.

    None where joining them makes floats of ints that float64 may round (int64 beside uint64):
    the item-by-item read keeps those exact (``batch``), or refuses the fill.
    """
    item = column_fill(store, fill) if space is None and store.is_numpy else fill
    parts = [window] if plan.stored else []
    if plan.fill_left:
        parts.insert(0, _fillers(store, space, item, plan.fill_left, one_hot_discrete))
    if plan.fill_right:
        parts.append(_fillers(store, space, item, plan.fill_right, one_hot_discrete))
    fillers = parts[0] if plan.fill_left else parts[-1]
    if store.is_numpy and plan.stored and _joins_rounded(window, fillers):
        return None
    try:
        return store.join(parts)
    except ValueError as error:
        raise filler_mismatch(fill, space) from error


def read_positions(
    store: Store,
    space: gym.Space[Any] | None,
    positions: np.ndarray,
    fill: Any,
    one_hot_discrete: bool,
    lookback: int,
    indices: Any = None,
) -> Any:
    """The batch of the items at storage ``positions``; out-of-range ones are fillers or raise.

    Raises:
        IndexError: A position is out of range and ``fill`` is None (``indices``, the user's
            indices, name the bad ones).

    Example:
        >>> from episodes.buffer.list_store import ListStore
        >>> read_positions(ListStore([5, 6, 7]), None, np.array([2, 3, 0]), -1, False, 0)
        [7, -1, 5]
        >>> read_positions(ListStore([5, 6]), None, np.array([3]), None, False, 1, indices=[2])
        Traceback (most recent call last):
        IndexError: indices [2] are out of range for a buffer with 1 items and a lookback of 1
    """
    total = len(store)
    valid: np.ndarray | None = None
    listed: list[int] | None = None
    if len(positions) < _SHORT:  # a few positions: Python's loop costs less than numpy's masks
        listed = positions.tolist()
        all_valid = not listed or (min(listed) >= 0 and max(listed) < total)
        flags = [] if all_valid else [0 <= p < total for p in listed]
    else:
        valid = (positions >= 0) & (positions < total)
        all_valid = bool(valid.all())
        flags = [] if all_valid else valid.tolist()
    if not all_valid and fill is None:
        named = positions if indices is None else indices  # listed as plain ints, the first 8
        raise IndexError(
            f"indices {indexing.listed_indices(named, flags)} are out of range for a buffer with "
            f"{total - lookback} items and a lookback of {lookback}"
        )
    if all_valid:
        if not len(positions):
            empty = indexing.SlicePlan(0, 0, 0, 0, 1)
            return read_plan(store, space, empty, fill, one_hot_discrete)
        pylist = store.pylist  # a list store's items, read as its gather reads them
        if listed is not None and pylist is not None:
            gathered = [pylist[p] for p in listed]
        else:
            gathered = store.gather(positions)
        return store.encode_one_hot(gathered, space) if one_hot_discrete else gathered
    item = column_fill(store, fill) if space is None and store.is_numpy else fill
    filler = item if space is None else filler_at(store, space, fill, one_hot_discrete)
    if store.is_numpy:
        refuse_cut_fill(filler)  # stacked with the items: numpy's strings would cut it
        valid = np.array(flags, dtype=bool) if valid is None else valid
        mixed = _filled_gather(store, space, positions, valid, filler, item, one_hot_discrete)
        if mixed is not None:
            return mixed
        if item is not fill and space is None and isinstance(fill, (str, bytes)):
            filler = fill  # an object column's NUL-ending text: its items are the text itself
    items = [
        (one_hot(store.get(p), space) if one_hot_discrete else store.get(p)) if ok else filler
        for p, ok in zip(positions.tolist() if listed is None else listed, flags)
    ]
    try:
        batch = store.from_items(items)
    except ValueError as error:
        raise filler_mismatch(fill, space) from error
    if store.is_numpy and _gained_objects(store, batch):
        raise filler_mismatch(fill, space)  # as a slice's read refuses the same fill
    return batch


def _gained_objects(store: Store, batch: Any) -> bool:
    """Whether a padded read of a numpy column came out as objects where it holds none.

    numpy joins a record (structured) item and a number fill as an object array: the fill
    does not stack with the items, as the join of a slice's read says.
    """
    template = store.window(0, 0) if getattr(store, "typed", True) else None
    if template is None:
        return False
    columns, got = flatten(template)[0], flatten(batch)[0]
    return len(columns) == len(got) and any(
        isinstance(leaf, np.ndarray) and leaf.dtype.hasobject and not column.dtype.hasobject
        for column, leaf in zip(columns, got)
    )


def read_backwards(
    store: Store,
    space: gym.Space[Any] | None,
    positions: np.ndarray,
    fill: Any,
    one_hot_discrete: bool,
    lookback: int,
) -> Any:
    """The batch a negative-step slice reads: the items at ``positions``, in their order.

    ``positions`` come from :func:`episodes.indexing.slice_positions`, so they fall by the
    slice's step. Where every one holds a stored item and nothing is encoded, the result is the
    forward window they span, stepped backwards: views of a numpy store's arrays, as a positive
    step's read gives (and as RLlib's does). Fillers and one-hot vectors are new arrays, so such
    a read gathers, as :func:`read_positions` does.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch(np.arange(5))
        >>> out = read_backwards(store, None, np.array([4, 2, 0]), None, False, 0)
        >>> out.tolist(), np.shares_memory(out, store.data)
        ([4, 2, 0], True)
    """
    count = len(positions)
    if count and not one_hot_discrete and positions[-1] >= 0 and positions[0] < len(store):
        first, last = int(positions[0]), int(positions[-1])
        step = int(positions[1]) - first if count > 1 else -1
        return store.stride(store.window(last, first + 1), step)
    return read_positions(store, space, positions, fill, one_hot_discrete, lookback)


def _filled_gather(
    store: Store,
    space: gym.Space[Any] | None,
    positions: np.ndarray,
    valid: np.ndarray,
    filler: Any,
    fill: Any,
    one_hot_discrete: bool,
) -> Any:
    """A numpy store's read of stored items and fillers mixed, each leaf built once.

    The result is what stacking the items one by one (``from_items``) gives: the stored rows
    and the fillers joined (the first position's part first: its dict keys order the result),
    then put in the positions' order (the fillers alone where no position holds an item). None
    where that could differ, for the item-by-item path: leaves other than numbers and bools
    (strings; objects, but for an object column's filler, placed whole as a slice's read
    places it), a filler leaf whose batch has another dtype or shape than the item's own, a
    filler that nests otherwise. Each leaf is allocated once, in the dtype the
    join gives, and takes the stored rows (views where the positions run on by one) and one
    filler row in place: no joined copy to reorder.
    """
    taken = np.flatnonzero(valid)
    try:  # one filler row stands for all of them, unless the fillers are the whole read
        fillers = _fillers(store, space, fill, 1 if len(taken) else len(valid), one_hot_discrete)
    except (ValueError, TypeError):  # a ragged fill: the item-by-item path names it
        return None
    # With no stored item the fillers alone are the read: checked as a stored part would be.
    gathered = _stored(store, positions[taken]) if len(taken) else fillers
    if one_hot_discrete and len(taken):
        gathered = store.encode_one_hot(gathered, space)
    # The items stack leaf by leaf only where a filler nests like a stored item, in plain dicts,
    # tuples and lists (a list filler beside array rows, or a namedtuple, fails to stack).
    if not (_plain(gathered) and _plain(filler) and same_nesting(gathered, filler)):
        return None
    stored_leaves = flatten(gathered)[0]
    filler_leaves = flatten(fillers)[0]
    item_leaves = flatten(filler)[0]
    if not len(stored_leaves) == len(filler_leaves) == len(item_leaves):
        return None
    for stored, padded, item in zip(stored_leaves, filler_leaves, item_leaves):
        own = np.asarray(item)
        if padded.dtype != own.dtype or padded.shape[1:] != own.shape:
            return None
        # Numbers (and bools) stack as they concatenate, an object column's filler (one object,
        # column_fill's) is placed whole as a slice's join places it; strings read as wide as
        # the widest string read, not the column.
        kinds = stored.dtype.kind + own.dtype.kind
        if kinds != "OO" and (kinds[0] not in _NUMBERS or kinds[1] not in _NUMBERS):
            return None
        if _ints_round(stored, padded):
            return None  # the items stack exactly (batch), where the join would round
    if not len(taken):
        return fillers
    first_stored = bool(valid[0])
    parts = [gathered, fillers] if first_stored else [fillers, gathered]
    if not same_nesting(parts[0], parts[1]):
        return None  # as the join refuses them
    stored_at, fillers_at = _places(taken, valid)

    def placed(leaves: list[np.ndarray]) -> np.ndarray:
        stored, padded = leaves if first_stored else leaves[::-1]
        dtype, shape = stored.dtype, stored.shape[1:]
        if (
            dtype is not padded.dtype
            or not dtype.isnative
            or dtype.metadata
            or shape != padded.shape[1:]
        ):
            # The join of the empty parts says the dtype (or refuses the shapes) as theirs would:
            # native byte order, no metadata.
            like = np.concatenate([leaf[:0] for leaf in leaves])
            dtype, shape = like.dtype, like.shape[1:]
        out = np.empty((len(positions), *shape), dtype)
        out[stored_at] = stored
        for rows in fillers_at:
            out[rows] = padded  # the one filler row, broadcast
        return out

    try:
        return map_alike(placed, parts)
    except (ValueError, TypeError):  # they do not stack: the item-by-item path says how
        return None


def _positions(plan: indexing.SlicePlan, total: int) -> np.ndarray:
    """The storage positions a step-first plan reads, fillers at out-of-range ones.

    Example:
        >>> _positions(indexing.SlicePlan(2, 0, 3, 1, 2), 5).tolist()
        [-1, -1, 0, 2, 5]
    """
    return np.concatenate(
        [
            np.full(plan.fill_left, -1),
            np.arange(plan.start, plan.stop, plan.step),
            np.full(plan.fill_right, total),
        ]
    )


def _joins_rounded(window: Any, fillers: Any) -> bool:
    """Whether a numpy store's stored window and fillers join a leaf of ints as rounded floats."""
    if window.__class__ is np.ndarray and fillers.__class__ is np.ndarray:  # no walk: flat
        return window.dtype.kind != fillers.dtype.kind and _ints_round(window, fillers)
    left, right = flatten(window)[0], flatten(fillers)[0]
    return len(left) == len(right) and any(map(_ints_round, left, right))


def _ints_round(stored: Any, fillers: Any) -> bool:
    """Whether int leaves join as floats (int64 beside uint64) that may round.

    ``batch``, which the item-by-item read stacks with, keeps such ints exact. ``fillers`` are
    copies of one row: the first stands for all.

    Example:
        >>> big, small = np.array([2**63 + 1, 1], np.uint64), np.ones(2, np.uint64)
        >>> zeros = np.zeros(3, np.int64)
        >>> _ints_round(big, zeros), _ints_round(small, zeros), _ints_round(zeros, big)
        (True, False, True)
    """
    if not (isinstance(stored, np.ndarray) and isinstance(fillers, np.ndarray)):
        return False
    kinds = stored.dtype.kind + fillers.dtype.kind
    if kinds not in ("iu", "ui") or max(stored.itemsize, fillers.itemsize) < 8 or not len(fillers):
        return False  # ints narrower than uint64 join an int64 exactly
    unsigned = stored if kinds[0] == "u" else fillers
    return unsigned.itemsize == 8 and rounded_ints([fillers[0], stored])


def _stored(store: Store, positions: np.ndarray) -> Any:
    """The stored items at in-range ``positions``: a window of views where many run on by one."""
    first, count = int(positions[0]), len(positions)
    if count >= _VIEWS and int(positions[-1]) - first == count - 1:
        if bool((positions[1:] - positions[:-1] == 1).all()):
            return store.window(first, first + count)
    return store.gather(positions)


def _places(taken: np.ndarray, valid: np.ndarray) -> tuple[Any, list[Any]]:
    """Where a read puts its stored rows (at ``taken``) and its fillers (where not ``valid``).

    Slices where the rows run on, else indices.

    Example:
        >>> _places(np.array([1, 2]), np.array([False, True, True, False, False]))
        (slice(1, 3, None), [slice(0, 1, None), slice(3, 5, None)])
        >>> _places(np.array([0, 2]), np.array([True, False, True]))
        (array([0, 2]), [slice(1, 2, None)])
    """
    first, last = int(taken[0]), int(taken[-1])
    if last - first == len(taken) - 1:  # the stored rows in one run, fillers either side
        sides = [slice(0, first), slice(last + 1, len(valid))]
        return slice(first, last + 1), [side for side in sides if side.stop > side.start]
    missing = np.flatnonzero(~valid)
    start, stop = int(missing[0]), int(missing[-1]) + 1
    return taken, [slice(start, stop) if stop - start == len(missing) else missing]


def filler_at(store: Store, space: gym.Space[Any] | None, fill: Any, one_hot_discrete: bool) -> Any:
    """The filler item a read of ``store`` pads with: a finalized column's in its dtypes.

    Without a space, a numpy column's ``fill`` as :func:`column_fill` makes it (refused where
    it does not fit one item); with one, the space's filler item, whose number leaves take the
    column's dtypes where ``fill`` keeps its value there (see
    :mod:`episodes.buffer.column_fillers`).

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> rewards = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
        >>> filler_at(ArrayStore.from_batch(np.array([7])), rewards, 0, False)
        array(0)
    """
    if space is None:
        return column_fill(store, fill) if store.is_numpy else fill
    filler = filler_item(space, fill, one_hot_discrete=one_hot_discrete)
    return column_typed(store, space, fill, filler, one_hot_discrete) if store.is_numpy else filler


def _fillers(
    store: Store, space: gym.Space[Any] | None, fill: Any, count: int, one_hot_discrete: bool
) -> Any:
    """``count`` fillers as a batch of ``store``: a finalized column's in its dtypes."""
    fillers = store.fillers(space, fill, count, one_hot_discrete)
    if space is None or not store.is_numpy:
        return fillers
    return column_typed(store, space, fill, fillers, one_hot_discrete)


def _plain(value: Any) -> bool:
    """Whether ``value`` nests in plain dicts, tuples and lists only (no subclasses)."""
    kind = value.__class__
    if kind is dict:
        return all(_plain(part) for part in value.values())
    if kind is tuple or kind is list:
        return all(_plain(part) for part in value)
    return not isinstance(value, (dict, tuple, list))


def column_fill(store: Store, fill: Any) -> Any:
    """``fill`` as one item of a numpy column without a space, or ``fill`` itself.

    A list or tuple ``fill`` for a column of array rows is one row (an array), and a dict,
    tuple or list ``fill`` that nests like the items of a nested column is one item of its
    nesting (tuples where either has one) with array leaves, so that fillers stack leaf by
    leaf (:func:`~episodes.spaces.filler_batch`) into a batch nested like the column's, and
    every read form (index lists, slices, fillers only) pads alike. Its leaves keep their own
    dtypes: a padded read stacks them with the stored items as numpy does.

    Raises:
        ValueError: Such a ``fill`` has a leaf not shaped like the column's item leaf.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> store = ArrayStore.from_batch({"h": np.zeros((1, 2), np.float32)})
        >>> column_fill(store, {"h": [0.0, 0.0]})
        {'h': array([0., 0.])}
    """
    if fill.__class__ not in _NESTED or not getattr(store, "typed", True):
        if fill.__class__ in (str, bytes) and fill[-1:] in ("\x00", b"\x00"):
            return _object_fill(store, fill)  # whole in an object column, refused elsewhere
        return fill  # a number (the hot path), or an untyped column: no item layout yet
    template = store.window(0, 0)
    if not is_nested(template):
        if template.dtype.hasobject:  # one object, as the column holds it (never split)
            item = np.empty((), dtype=object)
            item[()] = fill
            return item
        if isinstance(fill, dict):  # a dict is no row
            raise filler_mismatch(fill)
        leaves, stored, item = [fill], [template], _leaf_array(fill, fill)
        nested = None
    else:
        found = leaves_up_to(template, fill)
        if found is None:
            return fill  # not this column's nesting: the join says it does not stack
        leaves, stored = found, flatten(template)[0]
        nested = common_nesting([template, fill])
    arrays = []
    for leaf, column in zip(leaves, stored):
        array = _leaf_array(leaf, fill)
        if column.dtype.hasobject:  # one object, as the column holds it
            array = np.empty((), dtype=object)
            array[()] = leaf
        if array.shape != column.shape[1:]:
            raise filler_mismatch(fill)
        arrays.append(array)
    return item if nested is None else unflatten(nested, arrays)


def _leaf_array(leaf: Any, fill: Any) -> np.ndarray:
    """``leaf`` of ``fill`` as an array; a ragged one is the fill's ``ValueError``, not numpy's."""
    try:
        return np.asarray(leaf)
    except ValueError:
        raise filler_mismatch(fill) from None


def filler_mismatch(fill: Any, space: gym.Space[Any] | None = None) -> ValueError:
    """The error for fillers that do not stack with the stored items.

    With a ``space`` the fillers are the space's, so the stored items are what does not fit.

    Example:
        >>> from episodes.buffer.array_store import ArrayStore
        >>> rows = ArrayStore.from_batch(np.zeros((2, 3)))  # a scalar fill cannot pad rows
        >>> read_plan(rows, None, indexing.SlicePlan(1, 0, 2, 0, 1), 0, False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: fill=0 cannot pad this buffer's items: ... or a fill shaped like one item
    """
    if space is not None:
        return ValueError(
            f"fill={fill!r} cannot pad this buffer's items: its fillers are laid out as the "
            f"buffer's space {space} says and the stored items are not, so they do not stack"
        )
    return ValueError(
        f"fill={fill!r} cannot pad this buffer's items: without a space the filler is "
        "fill itself, which does not stack with them; give the buffer a space (fillers "
        "then take the items' shape and dtype) or a fill shaped like one item"
    )


def _object_fill(store: Store, fill: Any) -> Any:
    """``fill`` as a 0-d object item where the column holds objects (no string cuts it)."""
    template = store.window(0, 0) if getattr(store, "typed", True) else None
    if template is None or is_nested(template) or not template.dtype.hasobject:
        return fill
    item = np.empty((), dtype=object)
    item[()] = fill
    return item
