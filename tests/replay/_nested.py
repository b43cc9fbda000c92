"""Nested (Dict / Tuple) spaces and checks shared by the nested replay tests."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Tuple
from hypothesis import strategies as st

from tests.replay.reference import RefBuffer, assert_states_equal

LEAVES = st.sampled_from(
    [
        Box(-2, 2, (), np.float32),
        Box(-2, 2, (2,), np.float64),
        Box(0, 9, (2, 2), np.uint8),
        Discrete(5),
        Discrete(3, start=-2),
        MultiDiscrete([3, 2]),
        MultiBinary(4),
    ]
)


def nested_spaces(keys: list[str]) -> st.SearchStrategy[Any]:
    """Dict and Tuple spaces (at most 5 leaves) over :data:`LEAVES`, Dict keys among ``keys``."""
    return st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda s: Tuple(tuple(s))),
            st.dictionaries(st.sampled_from(keys), inner, min_size=1, max_size=3).map(Dict),
        ),
        max_leaves=5,
    ).filter(lambda s: isinstance(s, (Dict, Tuple)))


def samples(space: Any, count: int, seed: int) -> list[Any]:
    """``count`` items of ``space``, seeded."""
    space.seed(seed)
    return [space.sample() for _ in range(count)]


def leaf_equal(got: Any, want: Any, where: str = "obs") -> None:
    """``got`` (a nested structure of arrays) equals ``want`` leaf by leaf, nesting alike."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for key in want:
            leaf_equal(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            leaf_equal(g, w, f"{where}[{i}]")
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=where)


def row(column: Any, *index: int) -> Any:
    """One item of a nested batch column (a leaf's ``[index]`` everywhere)."""
    if isinstance(column, dict):
        return {k: row(v, *index) for k, v in column.items()}
    if isinstance(column, tuple):
        return tuple(row(v, *index) for v in column)
    return column[index]


def zeros_like(item: Any) -> Any:
    """An item of zeros nested as ``item`` (tuples for lists), as padding holds them."""
    if isinstance(item, dict):
        return {k: zeros_like(v) for k, v in item.items()}
    if isinstance(item, (tuple, list)):
        return tuple(zeros_like(v) for v in item)
    return np.zeros_like(np.asarray(item))


def plain(value: Any) -> Any:
    """A state with its record columns as bytes (compared bit for bit, NaNs too)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.names is not None:
        return (str(value.dtype), np.ascontiguousarray(value).view(np.uint8))
    return value


def same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    """``assert_states_equal`` with record columns compared bit for bit (NaNs too)."""
    assert_states_equal(plain(a), plain(b))


def places(buf: Any, ref: RefBuffer, indices: np.ndarray) -> list[Any]:
    """The reference episode and step of each item index (found through ``episode_steps``)."""
    ids, times = buf.episode_steps(indices)
    return [(ref.episodes[i], int(t) - ref.episodes[i].t_begin) for i, t in zip(ids, times)]


def interleaved_pieces(
    lengths: list[int], cuts: list[list[int]], modes: list[Any], piece: Any
) -> list[Any]:
    """Episodes of ``lengths`` steps cut at ``cuts``, their pieces interleaved round robin.

    ``piece(e, lo, hi, numpy, declare, last)`` makes episode ``e``'s piece of steps ``lo:hi``
    (``last``: it ends the episode), with the mode (``numpy``, ``declare``) the pieces take in
    turn from ``modes``.
    """
    per_episode = []
    for e, length in enumerate(lengths):
        bounds = sorted({0, length, *[c % (length + 1) for c in cuts[e]]})
        per_episode.append(
            [
                piece(e, lo, hi, *modes[(e + j) % len(modes)], hi == length)
                for j, (lo, hi) in enumerate(zip(bounds, bounds[1:]))
            ]
        )
    out = []
    while any(per_episode):
        for pieces in per_episode:
            if pieces:
                out.append(pieces.pop(0))
    return out
