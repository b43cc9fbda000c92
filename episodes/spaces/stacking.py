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

from episodes.spaces.batching import batch

__all__ = ["batch_in_space"]

_SEQUENCES = frozenset((list, tuple))


def batch_in_space(items: SequenceABC[Any], space: gs.Space[Any] | None) -> Any:
    """:func:`batch` of ``items``, with lists and tuples at array-space leaves taken as rows.

    Dict and Tuple spaces are walked (their items must nest like the space, or the items are
    batched as :func:`batch` would); spaces this does not know are batched by :func:`batch`.

    Raises:
        ValueError: The items cannot be stacked (differing structures or shapes).

    Example:
        >>> import gymnasium as gym
        >>> box, n = gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(3)
        >>> space = gym.spaces.Dict({"pos": box, "n": n})
        >>> stacked = batch_in_space([{"pos": [0, 1], "n": 2}, {"pos": [1, 1], "n": 0}], space)
        >>> stacked["pos"].shape, stacked["n"].tolist()
        ((2, 2), [2, 0])
    """
    if space is None or len(items) == 0:
        return batch(items, space=space)
    return _batch(space, items)


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
    return stacked


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
    kind, size = type(items[0]), len(space.spaces)
    if kind not in _SEQUENCES or not all(
        type(item) is kind and len(item) == size for item in items
    ):
        return batch(items)
    parts = [_batch(sub, [item[i] for item in items]) for i, sub in enumerate(space.spaces)]
    return kind(parts)
