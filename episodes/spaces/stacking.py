"""Stacking items with their space's help: an array space's items given as lists are rows.

Without a space, :func:`~episodes.spaces.batching.batch` reads lists and tuples as structure,
as dm-tree does, so Box observations recorded as Python lists would stack leaf by leaf (a
column per component). A space says where the leaves are: the items of a Box, Discrete,
MultiDiscrete or MultiBinary space are arrays however they were given.

Example:
    >>> import gymnasium as gym
    >>> batch_in_space([[0.0, 0.5], [1.0, 2.0]], gym.spaces.Box(-5, 5, (2,))).tolist()
    [[0.0, 0.5], [1.0, 2.0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as SequenceABC
from functools import singledispatch
from typing import Any

import gymnasium.spaces as gs
import numpy as np

from episodes.spaces.batching import (
    _typed_empty_lists,
    batch,
    check_sortable_keys,
    tuple_parts,
)
from episodes.spaces.filler import text_dtype
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.structs import arrays_equal, data_equal, flatten, same_nesting

__all__ = [
    "UNSTACKABLE_SPACES",
    "batch_in_space",
    "batch_with_layout",
    "equal_in_space",
    "find_space_kind",
    "unstackable_space",
]

_SEQUENCES = frozenset((list, tuple))
_TUPLE_FORMS = _SEQUENCES | {np.ndarray}
_ARRAY_SPACES = frozenset((gs.Box, gs.Discrete, gs.MultiDiscrete, gs.MultiBinary))


def batch_in_space(items: SequenceABC[Any], space: gs.Space[Any] | None) -> Any:
    """:func:`batch` of ``items``, with lists and tuples at array-space leaves taken as rows.

    Dict and Tuple spaces are walked (their items must nest like the space, or the items are
    batched as :func:`batch` would); a Text space's strings get room for its ``max_length``
    characters. Sequence, Graph and OneOf items have no fixed layout and are refused, whatever
    the items at hand (equal-length sequences would stack, and refuse the next longer one).

    Raises:
        ValueError: The items cannot be stacked (differing structures or shapes, a Sequence,
            Graph or OneOf space, a Dict space whose keys do not sort, as int and str keys).

    Example:
        >>> import gymnasium as gym
        >>> box, n = gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(3)
        >>> space = gym.spaces.Dict({"pos": box, "n": n})
        >>> stacked = batch_in_space([{"pos": [0, 1], "n": 2}, {"pos": [1, 1], "n": 0}], space)
        >>> stacked["pos"].shape, stacked["n"].tolist()
        ((2, 2), [2, 0])
    """
    if space is not None:
        check_sortable_keys(space)  # a numpy column's leaves are in sorted key order
    return _in_space(items, space)


def _in_space(items: SequenceABC[Any], space: gs.Space[Any] | None) -> Any:
    if space is None:
        return batch(items, space=space)
    unstackable = unstackable_space(space)
    if unstackable is not None:
        raise ValueError(f"{unstackable} items have no fixed layout and stay in list mode")
    if len(items) == 0:
        return batch(items, space=space)
    return _batch(space, items)


def equal_in_space(a: Any, b: Any, space: gs.Space[Any] | None) -> bool:
    """Whether two items are equal leaf-wise (NaNs equal), the space saying where leaves are.

    How ``concat_episode`` compares the observation at a join (and the dataset validator with
    it): a Box item given as a list (a list-mode chunk) is one row, as a numpy'd chunk holds
    it, which ``data_equal`` alone would read as structure. The leaves of a Box, Discrete,
    MultiDiscrete or MultiBinary part compare by value in the part's dtype (a list of Python
    floats is float64, the float32 row a numpy'd chunk holds is not: both are float32 in a
    float32 Box; a cast of another kind, such as float to int, is not made), and a Tuple
    item given as a list equals the tuple. Items that do not fit the space are not equal in it.
    Without a space, items that nest alike are equal where their leaves hold equal values in
    equal shapes, whatever the dtypes (a float32 ``[2.0]`` equals a float64 ``[2.0]``, as
    ``np.array_equal`` has it; an int equals a float only exactly, text never bytes).

    Example:
        >>> import gymnasium as gym
        >>> box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        >>> equal_in_space([0.0, 0.1], np.float32([0.0, 0.1]), None)
        False
        >>> equal_in_space([0.0, 0.1], np.float32([0.0, 0.1]), box)
        True
        >>> equal_in_space(np.float32([2.0]), np.float64([2.0]), None)
        True
    """
    if data_equal(a, b):
        return True
    if space is None:
        # Leaf by leaf by value, whatever the dtypes: a chunk numpy'd next to float64 steps
        # holds its float32 first observation as float64. A list and a tuple of equal leaves
        # are one item (a Tuple's, say).
        return same_nesting(a, b) and _leaves_equal(a, b)
    if space.__class__ in _ARRAY_SPACES:  # the usual observation: one array, no walk
        try:
            arrays = np.asarray(a), np.asarray(b)
        except (ValueError, TypeError):  # ragged: it fits no array space
            return False
        if arrays[0].dtype != object and arrays[1].dtype != object:
            return data_equal(*(_in_space_dtype(space, x) for x in arrays))
    try:
        batched = _in_space([a], space), _in_space([b], space)
    except ValueError:
        return False
    if not data_equal(*(_in_space_dtype(space, x) for x in batched)):
        return False
    # numpy's strings drop trailing NULs ("a" and "a\x00" batch alike): text compared as str.
    return _texts_equal(space, a, b)


def _leaves_equal(a: Any, b: Any) -> bool:
    return all(_value_equal(x, y) for x, y in zip(flatten(a)[0], flatten(b)[0]))


def _value_equal(a: Any, b: Any) -> bool:
    """Whether two leaves hold the same values in the same shape, whatever their dtypes.

    NaNs are equal; an int equals a float only exactly (``2**53 + 1`` is not ``2.0**53``,
    which float64 would call equal); text never equals bytes, nor a number a string.
    """
    if data_equal(a, b):
        return True
    try:
        x, y = np.asarray(a), np.asarray(b)
    except (ValueError, TypeError, RuntimeError):  # nothing numpy reads as values
        return False
    if x.shape != y.shape:
        return False
    kinds = x.dtype.kind + y.dtype.kind
    if not set(kinds) <= set("biufc"):
        # Strings of other widths (<U1 against <U4) compare by value, item by item as Python
        # compares them: numpy's own comparison drops trailing NULs ("a" equal to "a\x00").
        return kinds in ("UU", "SS") and _text_items(a) == _text_items(b)
    floats = [z for z in (x, y) if z.dtype.kind in "fc"]
    if not floats:
        return bool(np.array_equal(x, y))  # numpy compares ints of either sign exactly
    if not arrays_equal(x, y):  # NaNs equal, a complex value's parts each
        return False
    if len(floats) == 2:
        return True
    # An int against a float, compared in float: ints beyond 2**53 may have been rounded.
    ints = y if floats[0] is x else x
    with np.errstate(over="ignore", invalid="ignore"):
        big = np.abs(ints.astype(np.float64)) >= 2.0**53
    if not big.any():
        return True
    return all(int(i) == f for i, f in zip(ints[big].tolist(), floats[0][big].tolist()))


def _text_items(value: Any) -> Any:
    """A text leaf's strings as Python compares them: a str itself, an array's as lists."""
    return value.tolist() if isinstance(value, np.ndarray) else value


@singledispatch
def _texts_equal(space: gs.Space[Any], a: Any, b: Any) -> bool:
    return True  # no text here: the batched comparison decided


@_texts_equal.register
def _(space: gs.Text, a: Any, b: Any) -> bool:
    if isinstance(a, (str, bytes, np.ndarray)) and isinstance(b, (str, bytes, np.ndarray)):
        return _text_items(a) == _text_items(b)
    return True


@_texts_equal.register
def _(space: gs.Dict, a: Any, b: Any) -> bool:
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return True
    parts = space.spaces.items()
    return all(_texts_equal(sub, a[k], b[k]) for k, sub in parts if k in a and k in b)


@_texts_equal.register
def _(space: gs.Tuple, a: Any, b: Any) -> bool:
    a, b = tuple_parts(a, space), tuple_parts(b, space)
    if a is None or b is None:
        return True
    return all(_texts_equal(sub, x, y) for sub, x, y in zip(space.spaces, a, b))


@singledispatch
def _in_space_dtype(space: gs.Space[Any], value: Any) -> Any:
    return value


@_in_space_dtype.register(gs.Box)
@_in_space_dtype.register(gs.Discrete)
@_in_space_dtype.register(gs.MultiDiscrete)
@_in_space_dtype.register(gs.MultiBinary)
def _(space: gs.Space[Any], value: Any) -> Any:
    dtype = space.dtype
    if value.__class__ is not np.ndarray or dtype is None or value.dtype == dtype:
        return value
    kinds = value.dtype.kind + dtype.kind
    # Ints of either signedness compare by value (Python ints are int64, a uint8 image is not);
    # no other cast across kinds: 0.5 must not become 0.
    if not np.can_cast(value.dtype, dtype, "same_kind") and kinds not in ("iu", "ui"):
        return value
    with np.errstate(over="ignore", invalid="ignore"):  # out of the dtype's range: checked below
        cast = value.astype(dtype)
        # Only a cast that keeps the values compares in the space's dtype (a float rounded to
        # float32 is kept; 256 wrapped to 0 in uint8, -1 wrapped to 2**64 - 1 in uint64 or 1e300
        # overflowed to inf is not): distinct items must stay distinct.
        if dtype.kind in "fc":
            kept = np.array_equal(np.isfinite(cast), np.isfinite(value))
        else:
            kept = np.array_equal(cast.astype(value.dtype), value) and np.array_equal(
                cast < 0, value < 0
            )
    return cast if kept else value


@_in_space_dtype.register
def _(space: gs.Dict, value: Any) -> Any:
    if not isinstance(value, dict) or not set(value) <= set(space.spaces):
        return value
    return {key: _in_space_dtype(space.spaces[key], sub) for key, sub in value.items()}


@_in_space_dtype.register
def _(space: gs.Tuple, value: Any) -> Any:
    if value.__class__ not in _SEQUENCES or len(value) != len(space.spaces):
        return value
    return tuple(_in_space_dtype(sub, part) for sub, part in zip(space.spaces, value))


def batch_with_layout(items: SequenceABC[Any], space: gs.Space[Any] | None) -> Any:
    """:func:`batch_in_space` where the space has a fixed layout, else :func:`batch`.

    How list-mode items are read as columns (converter, connectors): a Box item given as a
    Python list is a row; items of a Sequence, Graph or OneOf space stack only if they happen
    to fit, as without a space. A Dict space (or part) whose keys do not sort (int and str
    keys together) is a ``ValueError`` naming them, as :func:`batch_in_space` refuses it.

    Example:
        >>> import gymnasium as gym
        >>> batch_with_layout([[0.0, 1.0], [2.0, 3.0]], gym.spaces.Box(-5, 5, (2,))).shape
        (2, 2)
        >>> seq = gym.spaces.Sequence(gym.spaces.Discrete(3))
        >>> [leaf.tolist() for leaf in batch_with_layout([(0, 1), (1, 2)], seq)]
        [[0, 1], [1, 2]]
    """
    if space is None:
        return batch(items)
    check_sortable_keys(space)  # dm-tree's own error names neither the keys nor the space
    if unstackable_space(space) is not None:
        return batch(items)
    return _in_space(items, space)


def nest_as_space(value: Any, space: gs.Space[Any] | None) -> Any:
    """Batched rows nested as ``space`` says: a Tuple part a tuple, also where it was a list.

    Items of a Tuple space may be tuples or lists (gymnasium's ``Tuple`` contains both), and a
    batch of list items keeps a list there (:func:`batch_in_space`). Readers that build training
    columns call this so that their output nests alike whatever form the items were recorded
    in. Where the Tuple parts lie is worked out once per space object and cached; values not
    nested like the space (or no space) are returned as they are.

    Example:
        >>> import gymnasium as gym
        >>> pair = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))
        >>> type(nest_as_space([np.array([0, 1]), np.array([2, 0])], pair)).__name__
        'tuple'
    """
    # The common cases cost one class test and a cache lookup: an array (a Box column), no
    # space, or a space without a Tuple part, where nothing could change. Otherwise the
    # cached plan says where the tuples go, with no walk of the space per call.
    if space is None or value.__class__ not in (list, tuple, dict):
        return value
    plan = _TUPLE_PLANS.get(space)
    return value if plan is None else _apply_plan(value, plan)


def _tuple_plan(space: Any) -> Any:
    # None where no Tuple part lies below; else ("t", per-part plans) or ("d", {key: plan}).
    if isinstance(space, gs.Tuple):
        return ("t", tuple(_tuple_plan(sub) for sub in space.spaces))
    if isinstance(space, gs.Dict):
        subs = {key: _tuple_plan(sub) for key, sub in space.spaces.items()}
        subs = {key: plan for key, plan in subs.items() if plan is not None}
        return ("d", subs) if subs else None
    return None


def _apply_plan(value: Any, plan: Any) -> Any:
    kind, subs = plan
    if kind == "t":
        if value.__class__ not in (list, tuple) or len(value) != len(subs):
            return value
        return tuple(v if p is None else _apply_plan(v, p) for v, p in zip(value, subs))
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key, sub in subs.items():
        if key in out:
            out[key] = _apply_plan(out[key], sub)
    return out


def unstackable_space(space: gs.Space[Any]) -> str | None:
    """The name of a space in ``space`` whose items cannot form a numpy column, if any.

    Example:
        >>> import gymnasium as gym
        >>> seq, n = gym.spaces.Sequence(gym.spaces.Discrete(2)), gym.spaces.Discrete(2)
        >>> unstackable_space(gym.spaces.Dict({"s": seq})), unstackable_space(n)
        ('Sequence', None)
    """
    return find_space_kind(space, UNSTACKABLE_SPACES)


#: Spaces whose items have no fixed layout (lengths, node counts or sub-spaces vary).
UNSTACKABLE_SPACES: tuple[type[gs.Space[Any]], ...] = (gs.Sequence, gs.Graph, gs.OneOf)


@singledispatch
def find_space_kind(space: Any, kinds: tuple[type[Any], ...]) -> str | None:
    """The type name of the first part of ``space`` (through Dict and Tuple) among ``kinds``.

    Example:
        >>> import gymnasium as gym
        >>> find_space_kind(gym.spaces.Tuple([gym.spaces.Text(3)]), (gym.spaces.Text,))
        'Text'
    """
    return type(space).__name__ if isinstance(space, kinds) else None


@find_space_kind.register
def _(space: gs.Dict, kinds: tuple[type[Any], ...]) -> str | None:
    return next(filter(None, (find_space_kind(s, kinds) for s in space.spaces.values())), None)


@find_space_kind.register
def _(space: gs.Tuple, kinds: tuple[type[Any], ...]) -> str | None:
    return next(filter(None, (find_space_kind(s, kinds) for s in space.spaces)), None)


@singledispatch
def _batch(space: gs.Space[Any], items: SequenceABC[Any]) -> Any:
    return batch(items)


@_batch.register(gs.Box)
@_batch.register(gs.Discrete)
@_batch.register(gs.MultiDiscrete)
@_batch.register(gs.MultiBinary)
def _(space: gs.Space[Any], items: SequenceABC[Any]) -> Any:
    # Only a first list or tuple misleads batch(), which reads it as structure: after an array
    # or a number it stacks later lists as rows (np.asarray), so one look decides.
    if items[0].__class__ not in _SEQUENCES:
        return batch(items)
    try:
        stacked = np.asarray(items)
    except (ValueError, TypeError) as err:
        raise ValueError(f"Cannot batch items of differing shape: {err}") from err
    if stacked.dtype == object:
        raise ValueError("Cannot batch items of differing shape or of no numeric type")
    return _typed_empty_lists(stacked, items)


@_batch.register
def _(space: gs.Text, items: SequenceABC[Any]) -> Any:
    if not all(isinstance(item, str) for item in items):
        return batch(items)
    # Width from the space, not the items: a later string up to max_length must fit. A longer
    # item (list mode does not check spaces) widens it rather than being cut.
    width = max(space.max_length, 1, *(len(item) for item in items))
    try:
        return np.array(items, dtype=text_dtype(width))
    except TypeError as err:  # numpy has no strings that wide
        raise ValueError(f"Cannot batch Text items {width} characters wide: {err}") from err


@_batch.register
def _(space: gs.Dict, items: SequenceABC[Any]) -> Any:
    keys = items[0].keys() if isinstance(items[0], Mapping) else None
    if (
        keys is None
        or not set(keys) <= set(space.spaces)
        or not all(isinstance(item, Mapping) and item.keys() == keys for item in items)
    ):
        return batch(items)  # refuses differing structures as it always does
    return {key: _batch(space.spaces[key], [item[key] for item in items]) for key in keys}


@_batch.register
def _(space: gs.Tuple, items: SequenceABC[Any]) -> Any:
    size = len(space.spaces)
    # A namedtuple is a tuple here (Tuple.contains takes it): the column nests as a tuple, as
    # a column numpy'd before its steps makes it.
    kinds = {tuple if isinstance(item, tuple) else type(item) for item in items}
    if np.ndarray in kinds and kinds <= _TUPLE_FORMS:
        # Tuple.contains takes an array of the parts' items too (np.array([1, 0]) for two
        # Discretes): its rows are the parts, as a tuple's are, and the column the space's.
        found = [tuple_parts(item, space) for item in items]
        if any(parts is None for parts in found):
            return batch(items)
        items = found
    elif not kinds <= _SEQUENCES or not all(len(item) == size for item in items):
        return batch(items)
    # Tuple.contains takes lists too, and a padded read puts the space's filler (a tuple) among
    # recorded lists: position decides, and only items all of one kind keep it.
    parts = [_batch(sub, [item[i] for item in items]) for i, sub in enumerate(space.spaces)]
    return list(parts) if kinds == {list} else tuple(parts)


# Where a space's Tuple parts lie (None: nowhere), per live space object.
_TUPLE_PLANS: PerSpaceCache[Any] = PerSpaceCache(_tuple_plan)
