"""Stacking nested items along a new leading axis and splitting them again.

Nesting follows dm-tree: dicts, tuples (incl. namedtuples) and lists are structure, anything
else is a leaf. Flat items skip dm-tree entirely because that is the common, hot case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Sequence as SequenceABC
from functools import singledispatch
from typing import Any

import numpy as np
import tree
from gymnasium import spaces as gs

from episodes.spaces.filler import filler_batch
from episodes.spaces.item_walks import holds_itself, mapping_words, other_mapping
from episodes.structs import map_alike, map_leaves

__all__ = [
    "batch",
    "batch_one_class",
    "check_sortable_keys",
    "is_flat",
    "map_leaves",
    "map_leaves_with_space",
    "rounded_ints",
    "tuple_parts",
    "unbatch",
]

# Ints of smaller magnitude are floats exactly; the largest uint64.
_EXACT_FLOAT_INTS = 2**53
_UINT64_MAX = 2**64 - 1


def is_flat(item: Any) -> bool:
    """Tell whether ``item`` is a single leaf rather than a dict/tuple/list structure.

    Args:
        item: Anything.

    Returns:
        ``True`` for scalars, arrays, strings, ``None`` ...; ``False`` for mappings, tuples
        and lists.

    Example:
        >>> is_flat(3), is_flat(np.zeros(2)), is_flat({"a": 1}), is_flat((1, 2))
        (True, True, False, False)
    """
    return not isinstance(item, (Mapping, tuple, list))


def _empty_list_items(items: SequenceABC[Any]) -> np.ndarray[Any, Any] | None:
    # Zero-size items given as lists: ``[]`` is a value of a ``Box((0,))``, not an empty
    # structure whose leaves (none) would stack to nothing and lose the items.
    if all(item.__class__ is list and not item for item in items):
        return np.zeros((len(items), 0))
    return None


def batch(items: SequenceABC[Any], *, space: gs.Space[Any] | None = None) -> Any:
    """Stack items leaf-wise along a new axis 0.

    Every leaf becomes ``np.asarray([leaf_0, leaf_1, ...])``, so Python ints turn into int64,
    Python floats into float64 and numpy scalars/arrays keep their dtype. Dicts stay dicts
    (same key order), tuples stay tuples. A zero-size item given as a list (``[]``, a
    ``Box((2, 0))`` item ``[[], []]``) holds no value to type it: it counts as float64, as
    ``np.asarray([])`` types it alone, also beside arrays of another dtype (which numpy would
    let decide), so the dtype does not depend on which items sit beside it.

    Args:
        items: The items, all of the same structure.
        space: Optional space of one item. Used when ``items`` is empty, to build an
            empty struct whose leaves have shape ``(0, *leaf_shape)`` and the leaf dtype, and
            to read items that are all ``[]`` as a Tuple's (an empty struct) rather than as
            zero-size values (float64, shape ``(n, 0)``).

    Returns:
        The batched structure; ``np.asarray([])`` for no items and no space.

    Raises:
        ValueError: If the items differ in structure or a leaf's shapes differ, an item
            holds itself (a list inside itself: its nesting has no end), or an item holds a
            ``Mapping`` that is no dict (a TensorDict, which dm-tree cannot walk).

    Example:
        >>> b = batch([{"a": 1, "b": (0.5, 2)}, {"a": 3, "b": (1.5, 4)}])
        >>> b["a"], b["b"][0]
        (array([1, 3]), array([0.5, 1.5]))
    """
    if len(items) == 0:
        if space is None:
            return np.asarray([])
        check_sortable_keys(space)
        try:
            return filler_batch(space, 0, 0)
        except MemoryError as err:  # no array holds even none of them (a Text too wide)
            raise ValueError(f"Cannot batch items of {space}: {err}") from err
    first = items[0]
    if first.__class__ is list and not first and not isinstance(space, gs.Tuple):
        empty = _empty_list_items(items)
        if empty is not None:
            return empty
    # No float64 shortcut for a first Python float: np.fromiter would call float() on every
    # item, turning None into nan and "2.5" into 2.5 where np.asarray keeps what they are.
    if first.__class__ is np.ndarray and first.ndim:
        joined = _join_rows(items)
        if joined is not None:
            return _exact_int_rows(joined, items)
    if is_flat(first):
        stacked = _asarray(items)
        # An object array may hide a dict or list among flat items: refuse it as the
        # reverse order is refused (checked only for object results, so at no other cost).
        if stacked.dtype == object and not all(is_flat(item) for item in items):
            raise ValueError("Cannot batch items of differing structure: flat and nested items")
        return _typed_empty_lists(_exact(stacked, items), items)
    mapping = other_mapping(first)  # dm-tree would walk it by its len and iter: a TensorDict
    if mapping is not None:  # crashes the process there (its iter raises, its len is its rows)
        raise ValueError(mapping_words("item 0", mapping))
    try:
        return tree.map_structure(_stack, *items)
    except RecursionError:  # dm-tree's walk ran out of stack: deep nesting, or an endless one
        if holds_itself(items):
            raise ValueError(
                "Cannot batch an item that holds itself (a dict, list or tuple inside itself): "
                "it nests without end"
            ) from None
        raise
    except (TypeError, ValueError) as e:
        if (
            mapping := other_mapping(list(items))
        ) is not None:  # beside item 0's dict (a TypeError)
            raise ValueError(mapping_words("an item", mapping)) from e
        rows = _as_rows(items)
        if rows is not None:
            return rows
        try:  # tuples beside lists (one Tuple item recorded either way): tuples there
            return map_alike(lambda leaves: _stack(*leaves), list(items))
        except (TypeError, ValueError):
            pass  # other nestings, or a leaf's shapes differ: the error below
        check_sortable_keys(first)
        raise ValueError(f"Cannot batch items of differing structure or shape: {e}") from e


def _as_rows(items: SequenceABC[Any]) -> np.ndarray | None:
    # Array rows among tuples or lists (a Tuple space's items given as arrays, beside its
    # fillers) stack as rows, as they do when an array comes first; None where they do not.
    if not any(item.__class__ is np.ndarray and item.ndim for item in items):
        return None
    if not all(item.__class__ in (np.ndarray, tuple, list) for item in items):
        return None
    try:
        stacked = np.asarray(items)
    except (ValueError, TypeError):
        return None
    return None if stacked.dtype == object else _typed_empty_lists(stacked, items)


def _typed_empty_lists(stacked: np.ndarray, items: SequenceABC[Any]) -> np.ndarray:
    """``stacked`` (``np.asarray(items)``) as float64 or wider where it is empty of lists.

    An empty list holds no value to type it: alone numpy makes it float64, beside an array it
    takes the array's dtype, so zero-size Box items recorded as lists stacked float32 beside a
    float32 filler and float64 without one. Checked only for an empty result (no cost else).

    Example:
        >>> _typed_empty_lists(np.asarray([np.zeros(0, np.float32), []]), [0, []]).dtype
        dtype('float64')
        >>> _typed_empty_lists(np.zeros((2, 0), np.float32), [0, 0]).dtype  # arrays alone
        dtype('float32')
    """
    if stacked.size or stacked.dtype.kind not in "biufc":
        return stacked
    if not any(item.__class__ in (list, tuple) for item in items):
        return stacked
    return stacked.astype(np.result_type(stacked.dtype, np.float64), copy=False)


def _join_rows(items: SequenceABC[Any]) -> np.ndarray | None:
    # Equal-shaped arrays (observations) in one C call instead of asarray's per-item shape
    # discovery; None unless every item is exactly an array (a subclass may hold a mask).
    kinds = list(map(type, items))
    if kinds.count(np.ndarray) != len(kinds):
        return None
    return _join_arrays(items)


def _join_arrays(items: SequenceABC[Any]) -> np.ndarray | None:
    # Items all exactly np.ndarray. concatenate insists on equal trailing dims and ndim, the
    # lengths checked here on equal leading ones, so the result is exactly what asarray would
    # build; None otherwise.
    try:
        lengths = list(map(len, items))
    except TypeError:  # a 0-d array has no len(): asarray's general path judges it
        return None
    length = lengths[0]
    if lengths.count(length) != len(lengths):
        return None
    try:
        joined = np.concatenate(items)
    except (ValueError, TypeError):  # a TypeError: no common dtype (asarray makes objects)
        return None
    return joined.reshape(len(items), length, *joined.shape[1:])


def batch_one_class(items: SequenceABC[Any], item_class: type) -> np.ndarray:
    """:func:`batch` of ``items`` (at least one), whose classes are all exactly ``item_class``.

    The caller's scan of the items' classes stands in for batch's own: Python floats are read
    as float64 and ints as numpy's default int (a value beyond it takes batch's path), as
    ``np.asarray`` types them, and arrays join as rows. Other classes are batched as
    :func:`batch` does.

    Args:
        items: The items, each of class ``item_class`` exactly (no subclass).
        item_class: Their class.

    Returns:
        What ``batch(items)`` returns.

    Raises:
        ValueError: As :func:`batch` (arrays of differing shapes, say).

    Example:
        >>> batch_one_class([0.5, 2.0], float), batch_one_class([1, 2**63], int).dtype
        (array([0.5, 2. ]), dtype('uint64'))
        >>> batch_one_class([np.zeros(2, np.float32), np.ones(2, np.float32)], np.ndarray).shape
        (2, 2)
    """
    if item_class is float:
        return np.fromiter(items, np.float64, len(items))
    if item_class is int:
        try:
            return np.fromiter(items, np.int_, len(items))
        except OverflowError:  # an int beyond it: uint64, float or object, as batch decides
            return batch(items)
    if item_class is np.ndarray and items[0].ndim:
        joined = _join_arrays(items)
        if joined is not None:
            return _exact_int_rows(joined, items)
    return batch(items)


def _asarray(items: SequenceABC[Any], what: str = "Cannot batch items of differing shapes") -> Any:
    try:
        return np.asarray(items)
    except ValueError as error:  # numpy's words (an inhomogeneous shape) name no shape
        shapes = dict.fromkeys(str(np.shape(i)) if is_flat(i) else type(i).__name__ for i in items)
        raise ValueError(f"{what}: {', '.join(list(shapes)[:4])}") from error


def _stack(*leaves: Any) -> np.ndarray:
    return _exact(_asarray(leaves, "a leaf's shapes differ"), leaves)


def _exact(stacked: np.ndarray, items: SequenceABC[Any]) -> np.ndarray:
    # Array rows by _exact_int_rows, as the flat path joins them; other leaves by _exact_ints.
    first = items[0]
    if first.__class__ is np.ndarray and first.ndim:
        return _exact_int_rows(stacked, items)
    return _exact_ints(stacked, items)


def _exact_int_rows(joined: np.ndarray, items: SequenceABC[Any]) -> np.ndarray:
    """:func:`_exact_ints` for rows: int arrays of both int64 and uint64 joined as floats."""
    if not joined.size:  # no value, none rounded (and no first item to look at)
        return joined
    if joined.dtype.kind != "f" or not all(
        item.__class__ is np.ndarray and item.dtype.kind in "iu" for item in items
    ):
        return joined
    flat = _exact_ints(joined.reshape(-1), [v for item in items for v in item.ravel().tolist()])
    return flat.reshape(joined.shape)


def _int_like(item: Any) -> bool:
    """An int: Python's, numpy's, or a 0-d int array."""
    if isinstance(item, (int, np.integer)):
        return True
    return isinstance(item, np.ndarray) and item.ndim == 0 and item.dtype.kind in "iu"


def _exact_ints(stacked: np.ndarray, items: SequenceABC[Any]) -> np.ndarray:
    """``stacked``, unless numpy made floats of ints no one int64 or uint64 holds together.

    ``2**63 + 1`` beside ``1`` (or a uint64 beside an int64) stacks as float64, which rounds
    both to 2**63; uint64 holds them exactly, and ints of both signs go into an object column,
    as ints beyond 64 bits do. Ints beside floats stay floats, and so do ints float64 holds.

    Example:
        >>> _exact_ints(np.asarray([2**63 + 1, 1]), [2**63 + 1, 1]).tolist()
        [9223372036854775809, 1]
    """
    if stacked.dtype.kind != "f" or not _int_like(items[0]):
        return stacked
    if not all(_int_like(item) for item in items):
        return stacked
    if not rounded_ints(items):
        return stacked  # every one a float64 exactly: numpy's dtype, as RLlib's
    values = [int(item) for item in items]
    if min(values) >= 0 and max(values) <= _UINT64_MAX:
        return np.array(values, dtype=np.uint64)
    return np.array(values, dtype=object)


def rounded_ints(items: SequenceABC[Any]) -> bool:
    """Whether numpy, stacking ``items`` as floats, may have rounded an int among them.

    An int64 beside a uint64 or a float stacks as float64: an int (or an int array's value)
    of 2**53 or more may then read as its neighbour.

    Example:
        >>> rounded_ints([np.int64(2**60 + 1), np.uint64(1)]), rounded_ints([2**52, 0.5])
        (True, False)
    """
    return any(_big_int(item) for item in items)


def _big_int(item: Any) -> bool:
    if isinstance(item, (int, np.integer)):
        return abs(int(item)) >= _EXACT_FLOAT_INTS
    if isinstance(item, np.ndarray) and item.dtype.kind in "iu" and item.size:
        if not item.ndim:  # one value (a filler): no min and max passes
            return abs(int(item)) >= _EXACT_FLOAT_INTS
        low = 0 if item.dtype.kind == "u" else -int(item.min())  # no pass for unsigned ones
        return max(low, int(item.max())) >= _EXACT_FLOAT_INTS
    return False


def unbatch(struct: Any) -> list[Any]:
    """Split a batched structure into its items along axis 0 (the inverse of :func:`batch`).

    Args:
        struct: A leaf array or a dict/tuple/list structure of arrays, all with the same
            length along axis 0.

    Returns:
        ``[item_0, item_1, ...]``, each item the structure indexed at ``i`` on every leaf.

    Raises:
        ValueError: If the leaves have different lengths.

    Example:
        >>> items = unbatch({"a": np.array([1, 2]), "b": (np.array([3.0, 4.0]),)})
        >>> len(items), int(items[1]["a"]), float(items[1]["b"][0])
        (2, 2, 4.0)
    """
    if is_flat(struct):
        return list(struct)
    try:
        leaves = tree.flatten(struct)
    except TypeError:
        check_sortable_keys(struct)  # dm-tree sorts dict keys: int and str ones do not sort
        raise
    if not leaves:
        return []
    lengths = {len(leaf) for leaf in leaves}
    if len(lengths) != 1:
        raise ValueError(f"Cannot unbatch: leaves have different lengths {sorted(lengths)}")
    columns = [list(leaf) for leaf in leaves]  # each leaf split once (C speed), then regrouped
    return [tree.unflatten_as(struct, list(row)) for row in zip(*columns, strict=True)]


def check_sortable_keys(struct: Any) -> None:
    """Refuses a dict (or Dict space) whose keys do not sort, as int and str keys together.

    dm-tree orders a dict's leaves by sorted key, so a numpy column cannot hold such items;
    ``struct`` is an item, a batch or a space (walked through Dict and Tuple parts).

    Raises:
        ValueError: Naming the keys.

    Example:
        >>> check_sortable_keys({"a": 1, "b": (2, {1: 0, 2: 0})})
        >>> check_sortable_keys({1: 0, "x": 0})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: dict keys [1, 'x'] do not sort (int and str keys together, say): ...
    """
    node = struct.spaces if isinstance(struct, (gs.Dict, gs.Tuple)) else struct
    if isinstance(node, Mapping):
        try:
            sorted(node)
        except TypeError:
            raise ValueError(
                f"dict keys {list(node)!r} do not sort (int and str keys together, say): a "
                "numpy column cannot hold such items"
            ) from None
        parts: Any = node.values()
    elif isinstance(node, (tuple, list)):
        parts = node
    else:
        return
    for part in parts:
        check_sortable_keys(part)


def map_leaves_with_space(
    fn: Callable[[Any, gs.Space[Any]], Any], struct: Any, space: gs.Space[Any]
) -> Any:
    """Walk a value together with its space and apply ``fn(leaf, leaf_space)`` at the leaves.

    ``Dict`` spaces are walked by key (in the value's key order), ``Tuple`` spaces by
    position; every other space is a leaf, whatever its value looks like (so a batched value
    works as well as a single item).

    Args:
        fn: Called as ``fn(leaf_value, leaf_space)``.
        struct: A value of ``space`` (or a batch of them, batched leaf-wise).
        space: The space describing ``struct``.

    Returns:
        The value's structure with ``fn``'s results: dicts as dicts, a ``Tuple`` space's part
        as a plain tuple (also when given as a list or a namedtuple).

    Raises:
        KeyError: If a dict value has a key the ``Dict`` space lacks.
        ValueError: If a ``Tuple`` value has the wrong length or type, or a ``Dict`` space's
            value is no mapping or lacks one of its keys.

    Example:
        >>> import gymnasium as gym
        >>> sp = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(0, 1)})
        >>> map_leaves_with_space(lambda v, s: type(s).__name__, {"a": 0, "b": 0.5}, sp)
        {'a': 'Discrete', 'b': 'Box'}
    """
    return _walk(space, struct, fn)


@singledispatch
def _walk(space: gs.Space[Any], value: Any, fn: Callable[[Any, gs.Space[Any]], Any]) -> Any:
    return fn(value, space)


@_walk.register
def _(space: gs.Dict, value: Any, fn: Callable[[Any, gs.Space[Any]], Any]) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError(f"Dict space expects a mapping value, got {type(value).__name__}")
    out = {}
    for key, sub in value.items():
        if key not in space.spaces:
            raise KeyError(f"key {key!r} not in Dict space; known keys {list(space.spaces)}")
        out[key] = _walk(space.spaces[key], sub, fn)
    if len(out) != len(space.spaces):  # a missing key would make flattened rows shorter
        missing = [key for key in space.spaces if key not in out]
        raise ValueError(f"Dict value lacks the space's keys {missing}")
    return out


@_walk.register
def _(space: gs.Tuple, value: Any, fn: Callable[[Any, gs.Space[Any]], Any]) -> Any:
    parts = tuple_parts(value, space)
    if parts is None:
        raise ValueError(
            f"Tuple space of {len(space.spaces)} expects a tuple/list of that length (or an "
            f"array of its items), got {type(value).__name__}"
            + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
        )
    return tuple(_walk(s, v, fn) for s, v in zip(space.spaces, parts, strict=True))


def tuple_parts(value: Any, space: gs.Tuple) -> SequenceABC[Any] | None:
    """``value``'s parts by position as an item of the Tuple ``space``, or None.

    A tuple or list of the space's length is its own parts; so is a numpy array whose rows
    are the parts' items (gymnasium's ``Tuple.contains`` takes ``np.array([1, 0])`` for two
    Discretes): each row shaped as its part's items are (a scalar for a Discrete, Text, Dict
    ...), or an object array holding one part each (parts of different shapes). An array of
    rows one dimension deeper than that (a batch of such items stacked as rows) is no item:
    None, as for anything else.

    Example:
        >>> import gymnasium as gym
        >>> pair = gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Discrete(2)])
        >>> [int(v) for v in tuple_parts(np.array([2, 1]), pair)]
        [2, 1]
        >>> tuple_parts(np.array([[2, 1], [0, 0]]), pair) is None
        True
    """
    size = len(space.spaces)
    if isinstance(value, (tuple, list)):
        return value if len(value) == size else None
    if isinstance(value, np.ndarray) and _rows_fit(space, value.shape):
        return list(value)
    if isinstance(value, np.ndarray) and value.dtype.hasobject and value.shape == (size,):
        return list(value)  # an object array of the parts (ragged ones: no rows to fit)
    return None


@singledispatch
def _rows_fit(space: gs.Space[Any], shape: tuple[int, ...]) -> bool:
    # An item of a Text, Dict, Sequence ... part is one element of an array (np.str_, an object).
    return shape == ()


@_rows_fit.register(gs.Box)
@_rows_fit.register(gs.Discrete)
@_rows_fit.register(gs.MultiDiscrete)
@_rows_fit.register(gs.MultiBinary)
def _(space: gs.Space[Any], shape: tuple[int, ...]) -> bool:
    return space.shape == shape


@_rows_fit.register
def _(space: gs.Tuple, shape: tuple[int, ...]) -> bool:
    if not shape or shape[0] != len(space.spaces):
        return False
    return all(_rows_fit(sub, shape[1:]) for sub in space.spaces)
