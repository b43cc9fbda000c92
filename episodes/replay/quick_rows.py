"""The usual chunk's columns read without the checks that cannot refuse them.

A numpy'd episode's observations and actions are plain numeric arrays, with a flat space or
none: ``ingest``'s general reading (lists, nested items, spaces that do not stack, masked
arrays) returns them as they are. Its checks cost more than the rows of a tiny rollout (a few
microseconds each, a dozen per chunk), so a column that none of them could refuse is taken
here at once; any other goes the general way, which keeps every refusal and its words.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.replay.columns import float32_rewards

__all__ = ["quick_rows", "rewards_as_float32"]

# Exact classes (a subclass may be anything): none nests, none is among the spaces whose
# items do not stack (``episodes.spaces.UNSTACKABLE_SPACES``).
_FLAT_SPACES = frozenset({gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                          gym.spaces.MultiBinary})  # fmt: skip
_ANY = np.logical_or.reduce  # the ufunc itself, not np.any's Python wrapper


def quick_rows(values: Any, count: int, space: Any) -> np.ndarray | None:
    """``values`` if they are ``count`` plain numeric rows the general reading takes as they are.

    None for anything else (lists, records, masked arrays, scalars, other counts, nested or
    other spaces): the caller reads those the general way.

    Example:
        >>> rows = np.zeros((3, 2), np.float32)
        >>> quick_rows(rows, 3, gym.spaces.Box(0, 1, (2,))) is rows
        True
        >>> quick_rows(rows, 4, None), quick_rows([0.0, 1.0], 2, None)
        (None, None)
    """
    if values.__class__ is not np.ndarray:  # a list, a masked array, a struct of columns
        return None
    if space is not None and space.__class__ not in _FLAT_SPACES:
        return None
    dtype = values.dtype
    if dtype.names is not None or dtype.kind not in "biufc" or not values.ndim:
        return None
    return values if len(values) == count else None


def rewards_as_float32(rows: np.ndarray) -> np.ndarray:
    """:func:`~episodes.replay.columns.float32_rewards`, quicker for float rewards that fit.

    Float rewards whose float32 copy holds no infinity are that copy, as there; anything else
    (float32 rewards, ints, an overflow to refuse, infinities given) goes through it.

    Example:
        >>> rewards_as_float32(np.array([1.5, -2.0])).dtype
        dtype('float32')
        >>> rewards_as_float32(np.array([1e300]))
        Traceback (most recent call last):
        ...
        ValueError: rewards hold values a float32 column cannot (they overflow to inf)
    """
    if rows.ndim == 1 and rows.dtype.kind == "f" and rows.dtype != np.float32:
        with np.errstate(over="ignore", under="ignore"):
            stored = rows.astype(np.float32)
        if not _ANY(np.isinf(stored)):
            return stored
    return float32_rewards(rows)
