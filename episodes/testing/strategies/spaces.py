"""Strategies for gymnasium spaces and for valid items of a space.

Leaf kinds are tried simple-first (``Discrete`` before ``Box`` before ``Text`` ...), containers
come last and nest at most ``max_depth`` levels, so a failing example shrinks towards a small,
flat space and towards the simplest items of it (zeros, short strings, the lowest integers).

Example:
    >>> from hypothesis import find
    >>> find(spaces(), lambda space: True)
    Discrete(1)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from functools import singledispatch
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces as gs
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "ALL_KINDS",
    "BATCHABLE_KINDS",
    "CONTAINER_KINDS",
    "LEAF_KINDS",
    "items",
    "spaces",
]

#: Leaf space kinds, simplest first (this order is also the shrinking order).
LEAF_KINDS = ("discrete", "box", "multi_binary", "multi_discrete", "text", "sequence", "graph")
#: Container kinds; ``one_of`` needs gymnasium's ``OneOf``.
CONTAINER_KINDS = ("dict", "tuple", "one_of")
#: Every kind :func:`spaces` knows.
ALL_KINDS = LEAF_KINDS + CONTAINER_KINDS
#: Kinds whose items stack into fixed-shape numpy arrays, i.e. what ``to_numpy()`` can batch.
BATCHABLE_KINDS = ("discrete", "box", "multi_binary", "multi_discrete", "dict", "tuple")

#: The deepest nesting :func:`spaces` draws: with a Sequence or Graph at the bottom (one level
#: more), the 32 levels episodes' space serialization takes; deeper strategies also run into
#: Python's recursion limit when hypothesis first validates them (from about 130 levels).
MAX_DEPTH = 31
#: The most Box dimensions: numpy's own limit (hypothesis refuses more when it first draws).
MAX_DIMS = 32

_BOX_DTYPES = (np.float32, np.float64, np.int64, np.uint8)
_KEYS = ("a", "b", "c", "d")


def _shapes(min_dims: int, max_dims: int, max_side: int) -> st.SearchStrategy[tuple[int, ...]]:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=max_side)


@st.composite
def _box(
    draw: st.DrawFn, max_dims: int, max_side: int, min_dims: int = 0, floats: bool = False
) -> gs.Box:
    dtype = draw(st.sampled_from(_BOX_DTYPES[:2] if floats else _BOX_DTYPES))
    shape = draw(_shapes(min(min_dims, max_dims), max_dims, max_side))
    if np.issubdtype(dtype, np.unsignedinteger):
        low = draw(st.integers(0, 2))
        return gs.Box(low, low + draw(st.integers(0, 3)), shape, dtype)
    low = draw(st.integers(-3, 0))
    high = low + draw(st.integers(0, 4))
    if np.issubdtype(dtype, np.floating) and draw(st.booleans()):
        # Unbounded float boxes (like the reward space) are common in RL and must work too.
        return gs.Box(-np.inf, np.inf, shape, dtype)
    return gs.Box(low, high, shape, dtype)


def _leaf(kind: str, max_dims: int, max_side: int) -> st.SearchStrategy[gs.Space[Any]]:
    if kind == "discrete":
        # Plain Discrete(n) first so it shrinks to Discrete(1); a shifted start after.
        with_start = st.builds(gs.Discrete, st.integers(1, 4), start=st.integers(-2, 2))
        return st.integers(1, 4).map(gs.Discrete) | with_start
    if kind == "box":
        return _box(max_dims, max_side)
    if kind == "multi_binary":
        return st.builds(gs.MultiBinary, st.integers(1, max_side))
    if kind == "multi_discrete":
        nvec = st.lists(st.integers(1, 4), min_size=1, max_size=max_side)
        return nvec.map(gs.MultiDiscrete)
    if kind == "text":
        return st.builds(gs.Text, st.integers(1, 4), min_length=st.just(0))
    if kind == "sequence":
        feature = st.builds(gs.Discrete, st.integers(1, 3)) | _box(
            min(1, max_dims), min(2, max_side)
        )
        return st.builds(gs.Sequence, feature)
    if kind == "graph":
        # Gymnasium's Graph needs node shapes of at least one dimension.
        node = _box(1, min(2, max_side), min_dims=1, floats=True)
        edge = st.none() | st.builds(gs.Discrete, st.integers(1, 3))
        return st.builds(gs.Graph, node_space=node, edge_space=edge)
    raise ValueError(f"unknown leaf space kind {kind!r}; known: {LEAF_KINDS}")


def whole(value: Any) -> bool:
    """Whether ``value`` is an int (numpy's too), not a bool.

    Example:
        >>> whole(3), whole(np.int64(3)), whole(True), whole(3.0)
        (True, True, False, False)
    """
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def spaces(
    kinds: Sequence[str] = ALL_KINDS,
    *,
    max_depth: int = 2,
    max_children: int = 3,
    max_dims: int = 2,
    max_side: int = 3,
) -> st.SearchStrategy[gs.Space[Any]]:
    """Draws gymnasium spaces: leaves of the given ``kinds``, nested in Dict/Tuple/OneOf.

    Args:
        kinds: Which kinds may appear (see ``ALL_KINDS``); leaf kinds and container kinds
            (``"dict"``, ``"tuple"``, ``"one_of"``). Pass ``BATCHABLE_KINDS`` for spaces whose
            items ``to_numpy()`` can stack.
        max_depth: Containers nest at most this deep (0: leaves only; at most
            :data:`MAX_DEPTH`, 31).
        max_children: At most this many sub-spaces per container.
        max_dims: At most this many dimensions for Box shapes (at most :data:`MAX_DIMS`, 32,
            numpy's limit); a Graph's node space has at least one, which gymnasium needs.
        max_side: At most this many entries along any dimension.

    Raises:
        TypeError: ``kinds`` is not an iterable of strings (None, a number, lists inside).
        ValueError: ``kinds`` is one string, names an unknown kind or no leaf kind; a
            ``max_*`` is not an int in its range (``max_depth`` above 31 or ``max_dims``
            above 32, say).

    Example:
        >>> from hypothesis import given
        >>> @given(spaces(("discrete", "dict"), max_depth=1))
        ... def test(space):
        ...     assert space.contains(space.sample())
        >>> test()
    """
    if isinstance(kinds, str):  # a string is a sequence of letters, not of kinds
        raise ValueError(f"kinds is a sequence of kinds such as ('box',), got {kinds!r}")
    try:
        kinds = tuple(kinds)  # once: a generator would be used up by the first test of it
    except TypeError:
        raise TypeError(
            f"kinds is a sequence of kind names such as ('box',), got {kinds!r} "
            f"({type(kinds).__name__})"
        ) from None
    odd = [kind for kind in kinds if not isinstance(kind, str)]
    if odd:  # a list or set inside would fail as unhashable, naming nothing
        raise TypeError(f"kinds holds kind names (strings) such as 'box', got {odd[0]!r}")
    for name, value, least, most in (
        ("max_depth", max_depth, 0, MAX_DEPTH),
        ("max_children", max_children, 1, None),
        ("max_dims", max_dims, 0, MAX_DIMS),
        ("max_side", max_side, 1, None),
    ):
        if not (whole(value) and value >= least and (most is None or value <= most)):
            bounds = f">= {least}" if most is None else f"in [{least}, {most}]"
            raise ValueError(f"{name} must be an int {bounds}, got {value!r}")
    # Plain ints for hypothesis, which refuses numpy ones.
    max_depth, max_children = int(max_depth), int(max_children)
    max_dims, max_side = int(max_dims), int(max_side)
    unknown = set(kinds) - set(ALL_KINDS)
    if unknown:
        raise ValueError(f"kinds: unknown space kinds {sorted(unknown)}; known: {ALL_KINDS}")
    leaf_kinds = [k for k in LEAF_KINDS if k in kinds]
    if not leaf_kinds:
        raise ValueError(f"kinds must name at least one leaf kind {LEAF_KINDS}, got {kinds}")
    leaves = st.one_of([_leaf(k, max_dims, max_side) for k in leaf_kinds])
    containers = [k for k in CONTAINER_KINDS if k in kinds]
    if max_depth <= 0 or not containers:
        return leaves

    def extend(children: st.SearchStrategy[gs.Space[Any]]) -> st.SearchStrategy[gs.Space[Any]]:
        options: list[st.SearchStrategy[gs.Space[Any]]] = []
        if "dict" in containers:
            keys = st.lists(st.sampled_from(_KEYS), min_size=1, max_size=max_children, unique=True)
            options.append(keys.flatmap(functools.partial(_dict_of, children)))
        if "tuple" in containers:
            options.append(st.lists(children, min_size=1, max_size=max_children).map(_tuple_space))
        if "one_of" in containers:
            options.append(st.lists(children, min_size=1, max_size=max_children).map(_one_of_space))
        return st.one_of(options)

    strategy: st.SearchStrategy[gs.Space[Any]] = leaves
    for _ in range(max_depth):
        strategy = leaves | extend(strategy)
    # The unrolled nesting's own repr triples per level (MBs at depth 8, which hypothesis puts
    # in its errors): a deferred strategy draws the same, and its repr is the call's.
    built = strategy

    def call() -> st.SearchStrategy[gs.Space[Any]]:
        return built

    call.__name__ = call.__qualname__ = (
        f"spaces({kinds!r}, max_depth={max_depth}, max_children={max_children}, "
        f"max_dims={max_dims}, max_side={max_side})"
    )
    return st.deferred(call)


def _dict_of(
    children: st.SearchStrategy[gs.Space[Any]], keys: list[str]
) -> st.SearchStrategy[gs.Space[Any]]:
    return st.tuples(*[children] * len(keys)).map(functools.partial(_dict_space, keys))


def _dict_space(keys: Sequence[str], subs: Sequence[gs.Space[Any]]) -> gs.Space[Any]:
    return gs.Dict(dict(zip(keys, subs)))


def _tuple_space(subs: list[gs.Space[Any]]) -> gs.Space[Any]:
    return gs.Tuple(subs)


def _one_of_space(subs: list[gs.Space[Any]]) -> gs.Space[Any]:
    return gs.OneOf(subs)


# ------------------------------------------------------------------------------------- items
def items(space: gs.Space[Any]) -> st.SearchStrategy[Any]:
    """Draws valid values of ``space`` (``space.contains(value)`` always holds).

    Values have the types gymnasium's own ``sample()`` gives (numpy scalars and arrays of the
    space's dtype, dicts, tuples, strings, ``GraphInstance``). They shrink towards the lowest
    integers, zeros and empty strings/sequences. A subclass space (at any level) is drawn as
    its gymnasium base is; where it overrides ``contains`` (a Box holding a unit ball), the
    draws it refuses are filtered out, so a space that takes few of its base's values makes
    hypothesis give up (a failed health check): draw those values yourself.

    Example:
        >>> from hypothesis import find
        >>> find(items(gym.spaces.Discrete(3, start=1)), lambda x: True)
        np.int64(1)
    """
    return _items(space)


def _items(space: gs.Space[Any]) -> st.SearchStrategy[Any]:
    strategy = _by_kind(space)
    cls: Any = type(space)
    base = next(c for c in cls.__mro__ if c in _by_kind.registry)  # what the dispatch used
    if cls.contains is not base.contains:  # a subclass judging its values itself
        strategy = strategy.filter(space.contains)
    return strategy


@singledispatch
def _by_kind(space: gs.Space[Any]) -> st.SearchStrategy[Any]:
    raise TypeError(f"items() does not know how to draw values of {type(space).__name__}")


@_by_kind.register
def _(space: gs.Discrete) -> st.SearchStrategy[Any]:
    start, n = int(space.start), int(space.n)
    return st.integers(start, start + n - 1).map(space.dtype.type)


def _box_elements(dtype: np.dtype[Any], low: Any, high: Any) -> st.SearchStrategy[Any]:
    if np.dtype(dtype).kind == "b":  # a bool Box holds False and True (within its bounds)
        return st.sampled_from([v for v in (False, True) if low <= v <= high] or [False])
    if np.issubdtype(dtype, np.integer):
        # Python ints: an int64 bound above 2**53 must not pass through a float.
        info = np.iinfo(dtype)
        lo = max(int(low), int(info.min)) if np.isfinite(low) else int(info.min)
        hi = min(int(high), int(info.max)) if np.isfinite(high) else int(info.max)
        return st.integers(lo, hi)
    # The dtype's own width: a float16 Box drew float64 values that overflowed to inf.
    width: Literal[16, 32, 64] = {2: 16, 4: 32}.get(np.dtype(dtype).itemsize, 64)  # type: ignore[assignment]
    # A float16 Box's infinite bound is its largest finite value, not None: hypothesis would
    # draw wider floats and discard those beyond float16's range, most of them (wider dtypes
    # keep None: a bound would be drawn often, and sums of such draws overflow).
    biggest = float(np.finfo(dtype).max) if width == 16 else None
    return st.floats(
        min_value=float(low) if np.isfinite(low) else (None if biggest is None else -biggest),
        max_value=float(high) if np.isfinite(high) else biggest,
        allow_nan=False,
        allow_infinity=False,
        width=width,
    )


@_by_kind.register
def _(space: gs.Box) -> st.SearchStrategy[Any]:
    low, high = space.low, space.high
    if low.size == 0:  # a Box of no entries holds one value
        return st.just(np.zeros(space.shape, space.dtype))
    if np.all(low == low.flat[0]) and np.all(high == high.flat[0]):
        elements = _box_elements(space.dtype, low.flat[0], high.flat[0])
        return hnp.arrays(space.dtype, space.shape, elements=elements)
    # Per-entry bounds: draw each entry within its own bounds.
    per_entry = [_box_elements(space.dtype, lo, hi) for lo, hi in zip(low.flat, high.flat)]
    return st.tuples(*per_entry).map(
        lambda values: np.array(values, dtype=space.dtype).reshape(space.shape)
    )


@_by_kind.register
def _(space: gs.MultiBinary) -> st.SearchStrategy[Any]:
    return hnp.arrays(space.dtype, space.shape, elements=st.integers(0, 1))


@_by_kind.register
def _(space: gs.MultiDiscrete) -> st.SearchStrategy[Any]:
    starts, nvec = space.start.flat, space.nvec.flat
    entries = [st.integers(int(s), int(s) + int(n) - 1) for s, n in zip(starts, nvec)]
    return st.tuples(*entries).map(
        lambda values: np.array(values, dtype=space.dtype).reshape(space.shape)
    )


@_by_kind.register
def _(space: gs.Text) -> st.SearchStrategy[Any]:
    alphabet = sorted(space.character_set)
    return st.text(st.sampled_from(alphabet), min_size=space.min_length, max_size=space.max_length)


@_by_kind.register
def _(space: gs.Dict) -> st.SearchStrategy[Any]:
    # Keys in the space's order, as sample() gives them: fixed_dictionaries shuffles them, and
    # code flattening list(obs.values()) would see other layouts on equal values.
    keys = list(space.spaces)
    values = st.tuples(*[_items(sub) for sub in space.spaces.values()])
    return values.map(functools.partial(_keyed, keys))


def _keyed(keys: list[Any], values: tuple[Any, ...]) -> dict[Any, Any]:
    return dict(zip(keys, values))


@_by_kind.register
def _(space: gs.Tuple) -> st.SearchStrategy[Any]:
    return st.tuples(*[_items(sub) for sub in space.spaces])


@_by_kind.register
def _(space: gs.Sequence) -> st.SearchStrategy[Any]:
    values = st.lists(_items(space.feature_space), max_size=3)
    if space.stack:
        return values.map(functools.partial(_stacked, space.feature_space))
    return values.map(tuple)


def _stacked(feature: gs.Space[Any], values: list[Any]) -> Any:
    empty: Any = gym.vector.utils.create_empty_array(feature, len(values))
    if not values:  # concatenate cannot stack nothing; the empty array is a valid value
        return empty
    return gym.vector.utils.concatenate(feature, values, empty)


def _tagged(index: int, value: Any) -> tuple[np.int64, Any]:
    return (np.int64(index), value)  # gymnasium's sample() gives the index as np.int64


@_by_kind.register
def _(space: gs.OneOf) -> st.SearchStrategy[Any]:
    branches = [
        _items(sub).map(functools.partial(_tagged, i)) for i, sub in enumerate(space.spaces)
    ]
    return st.one_of(branches)


@st.composite
def _graph(draw: st.DrawFn, space: gs.Graph) -> gs.GraphInstance:
    num_nodes = draw(st.integers(1, 3))
    nodes = _stack(
        space.node_space,
        draw(st.lists(_items(space.node_space), min_size=num_nodes, max_size=num_nodes)),
    )
    if space.edge_space is None:
        return gs.GraphInstance(nodes, None, None)
    num_edges = draw(st.integers(0, 3))
    edges = _stack(
        space.edge_space,
        draw(st.lists(_items(space.edge_space), min_size=num_edges, max_size=num_edges)),
    )
    # int32 links, as gymnasium's sample() gives them.
    links = draw(hnp.arrays(np.int32, (num_edges, 2), elements=st.integers(0, num_nodes - 1)))
    return gs.GraphInstance(nodes, edges, links)


def _stack(space: gs.Space[Any], values: list[Any]) -> np.ndarray:
    shape = getattr(space, "shape", None) or ()
    return np.array(values, dtype=space.dtype).reshape((len(values), *shape))


@_by_kind.register
def _(space: gs.Graph) -> st.SearchStrategy[Any]:
    return _graph(space)
