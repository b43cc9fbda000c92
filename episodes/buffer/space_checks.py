"""What ``set`` checks a finalized buffer's new values against: its space, as appends are.

A numpy'd episode checks each step's observation and action against their spaces
(:func:`~episodes.spaces.contains.checker_for`), and ``set`` holds those columns to the same
checks, so whatever a step recorded can be written back. The rewards column carries
``Box(-inf, inf, (), float32)`` to shape its fillers, and ``add_env_step`` records rewards
unchecked, as RLlib does: NaN, and a 0-d array of any dtype (``np.array(4.0)``). gymnasium's
Box refuses both (no comparison with NaN holds, and a 0-d array must cast safely to the Box's
dtype, while the same number as a numpy scalar is cast), so a column could not take its own
reads back. A scalar float Box with no finite bound has no bound NaN could break: ``set``
takes NaN there, and judges a 0-d array of numbers or bools by the number it holds, as for a
numpy scalar. Everything else is judged as gymnasium judges it (``10**400``, beyond any float,
is outside), and the column's own rules (contract 3.7: a wrong shape, anything but a number,
a value the column's dtype changes) still refuse what the column cannot hold. Any other space,
a Box with a finite bound or of another shape included, is checked as ``add_env_step`` checks
it: NaN is outside ``Box(-1, 1, (2,))`` and ``Box(-inf, inf, (2,))``.

Example:
    >>> import gymnasium as gym
    >>> from episodes.spaces.contains import checker_for
    >>> rewards = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
    >>> check_in_space(rewards, [float("nan"), np.array(4.0)], checker_for(rewards))
    >>> box = gym.spaces.Box(-1.0, 1.0, ())
    >>> check_in_space(box, [float("nan")], checker_for(box))
    Traceback (most recent call last):
    ValueError: value nan is not in the buffer's space Box(-1.0, 1.0, (), float32)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.spaces.contains import Checker
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.structs import short_repr

__all__ = ["check_in_space", "takes_nan", "unbounded_scalar"]


def unbounded_scalar(space: gym.Space[Any] | None) -> bool:
    """Whether ``space`` is a scalar float Box with no finite bound (the rewards column's).

    gymnasium's Box, or a subclass that does not override ``contains`` (one that does may
    judge its items otherwise; ``make_checker`` asks it, and so does ``set``).

    Example:
        >>> unbounded_scalar(gym.spaces.Box(float("-inf"), float("inf"), (), np.float64))
        True
        >>> unbounded_scalar(gym.spaces.Box(float("-inf"), float("inf"), (2,)))
        False
    """
    return (
        isinstance(space, gym.spaces.Box)
        and type(space).contains is gym.spaces.Box.contains
        and space.shape == ()
        and space.dtype is not None
        and np.dtype(space.dtype).kind == "f"  # a retyped space may hold a scalar type
        and not bool(np.any(space.bounded_below))
        and not bool(np.any(space.bounded_above))
    )


def takes_nan(space: gym.Space[Any] | None) -> bool:
    """Whether ``set`` takes NaN for ``space``: :func:`unbounded_scalar`, cached per space.

    Example:
        >>> takes_nan(gym.spaces.Box(float("-inf"), float("inf"), ())), takes_nan(None)
        (True, False)
    """
    return space is not None and _UNBOUNDED.get(space)


def check_in_space(space: gym.Space[Any], items: list[Any], check: Checker) -> None:
    """Raises where one of ``items``, new values of a finalized column, is outside ``space``.

    ``check`` is the space's checker (:func:`~episodes.spaces.contains.checker_for`); for
    an unbounded scalar float Box, an item it refuses is taken where it is NaN or a 0-d array
    of a number it takes.

    Raises:
        ValueError: An item is outside the space, naming it.

    Example:
        >>> from episodes.spaces.contains import checker_for
        >>> box = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
        >>> check_in_space(box, [float("nan"), np.array(4.0)], checker_for(box))
        >>> check_in_space(gym.spaces.Discrete(2), [0, 2], checker_for(gym.spaces.Discrete(2)))
        Traceback (most recent call last):
        ValueError: value 2 is not in the buffer's space Discrete(2)
    """
    unbounded = None
    for item in items:
        if not check(item):
            if unbounded is None:
                unbounded = takes_nan(space)
            if not (unbounded and _by_value(item, check)):
                raise ValueError(
                    f"value {short_repr(item)} is not in the buffer's space {short_repr(space)}"
                )


def _by_value(item: Any, check: Checker) -> bool:
    """Whether an unbounded scalar Box takes ``item``, which its checker refused."""
    if item.__class__ is np.ndarray and item.shape == () and item.dtype.kind in "biuf":
        item = item[()]  # the number it holds, as a numpy scalar, which gymnasium casts
        if check(item):
            return True
    return isinstance(item, (float, np.floating)) and bool(item != item)  # NaN


_UNBOUNDED: PerSpaceCache[bool] = PerSpaceCache(unbounded_scalar)
