"""The observation a contract check's just-reset episode starts with: valid, small, repeatable.

Gymnasium's ``sample()`` is no good here for every space the strategies draw: a ``Text(10**9)``
samples a string of up to a billion characters, and a float64 ``Box(-1e308, 1e308)`` raises
``OverflowError`` (its bounds' range is beyond float64). The value a just-reset episode holds
does not matter to the check, only that it is in the space; spaces without a rule here are
sampled from a copy seeded with 0.

Example:
    >>> import gymnasium as gym
    >>> import numpy as np
    >>> reset_item(gym.spaces.Box(-1e308, 1e308, (2,), np.float64))
    array([0., 0.])
    >>> reset_item(gym.spaces.Text(10**9, min_length=2))
    '00'
    >>> reset_item(gym.spaces.Dict({"n": gym.spaces.Discrete(3, start=5)}))
    {'n': np.int64(5)}
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import gymnasium.spaces as gs
import numpy as np

__all__ = ["reset_item"]


@functools.singledispatch
def reset_item(space: gs.Space[Any]) -> Any:
    """An item of ``space`` (what a seeded copy of it samples, for spaces without a rule).

    Example:
        >>> import gymnasium as gym
        >>> reset_item(gym.spaces.MultiBinary(3)).shape
        (3,)
    """
    sampler = copy.deepcopy(space)
    sampler.seed(0)
    return sampler.sample()


@reset_item.register
def _(space: gs.Box) -> Any:
    # Zeros clipped into the bounds: no range is computed, so no bound overflows.
    # Clipped in the Box's dtype: int bounds beyond 2**53 stay exact.
    return np.asarray(np.clip(np.zeros(space.shape, space.dtype), space.low, space.high))


@reset_item.register
def _(space: gs.Discrete) -> Any:
    return (
        space.start.copy() if isinstance(space.start, np.ndarray) else space.dtype.type(space.start)
    )


@reset_item.register
def _(space: gs.Text) -> Any:
    return min(space.character_set) * space.min_length if space.min_length else ""


@reset_item.register
def _(space: gs.Dict) -> Any:
    return {key: reset_item(sub) for key, sub in space.spaces.items()}


@reset_item.register
def _(space: gs.Tuple) -> Any:
    return tuple(reset_item(sub) for sub in space.spaces)
