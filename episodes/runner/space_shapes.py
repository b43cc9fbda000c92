"""The env's observations against its declared observation space: a warning where they differ.

The runner records observations as the env gives them and hands each chunk the env's
``single_observation_space``. A wrapper that changes the observations without updating that
space (gymnasium's vector ``TransformObservation`` given no ``single_observation_space``)
makes every chunk carry a space that does not describe it, which ``validate`` does not check
and datasets store: the first reset's call says so, once per runner.
"""

from __future__ import annotations

import warnings
from functools import singledispatch
from typing import Any

import tree
from gymnasium import spaces as gs

from episodes.spaces import filler_batch

__all__ = ["SpaceMismatchWarning", "fixed_shapes", "space_mismatch", "warn_space_mismatch"]


class SpaceMismatchWarning(UserWarning):
    """The env's observations are not shaped as its ``single_observation_space`` says."""


def space_mismatch(obs: Any, space: Any) -> str | None:
    """How a batch of observations (one row per sub-env) differs from ``space``, or None.

    Compared: the nesting (Dict keys, Tuple places) and each leaf's shape per sub-env; not
    dtypes or values (the runner records those as given). None also where ``space`` is None
    or holds a part whose items have no fixed shape (:func:`fixed_shapes`).

    Example:
        >>> import gymnasium as gym, numpy as np
        >>> box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        >>> space_mismatch(np.zeros((8, 4)), box) is None
        True
        >>> space_mismatch(np.zeros((8, 2)), box)
        'observations of shape (2,) per sub-env, where the space says (4,)'
    """
    if space is None or not fixed_shapes(space):
        return None
    try:
        expected = tree.flatten_with_path(filler_batch(space, 0, 0))
        given = tree.flatten_with_path(obs)
    except Exception:  # noqa: BLE001 - a user's space class, or items dm-tree cannot walk
        return None
    if [path for path, _ in given] != [path for path, _ in expected]:
        return "observations nested otherwise than the space (Dict keys or Tuple places)"
    for (path, leaf), (_, want) in zip(given, expected):
        got, wanted = tuple(getattr(leaf, "shape", ())[1:]), tuple(want.shape[1:])
        if got != wanted:
            where = "".join(f"[{p!r}]" for p in path)
            return f"observations{where} of shape {got} per sub-env, where the space says {wanted}"
    return None


@singledispatch
def fixed_shapes(space: Any) -> bool:
    """Whether every item of ``space`` has the one shape its type states.

    Box, Discrete, MultiBinary and MultiDiscrete, in Dict and Tuple: the spaces
    :func:`space_mismatch` judges. A user's space class, or a Text or Sequence one, states no
    shape its items keep.

    Example:
        >>> fixed_shapes(gs.Dict({"a": gs.Box(0, 1, (2,)), "b": gs.Discrete(3)}))
        True
        >>> fixed_shapes(gs.Tuple((gs.Discrete(2), gs.Text(4)))), fixed_shapes(gs.Space())
        (False, False)
    """
    return False


@fixed_shapes.register(gs.Box)
@fixed_shapes.register(gs.Discrete)
@fixed_shapes.register(gs.MultiBinary)
@fixed_shapes.register(gs.MultiDiscrete)
def _(space: Any) -> bool:
    return True


@fixed_shapes.register(gs.Dict)
def _(space: gs.Dict) -> bool:
    return all(fixed_shapes(part) for part in space.spaces.values())


@fixed_shapes.register(gs.Tuple)
def _(space: gs.Tuple) -> bool:
    return all(fixed_shapes(part) for part in space.spaces)


def warn_space_mismatch(what: str) -> None:
    """Warns (:class:`SpaceMismatchWarning`) of what :func:`space_mismatch` found.

    Called by ``EnvRunner.sample`` as the call's last act, once per runner, so that a filter
    raising the warning leaves the runner usable.

    Example:
        >>> import gymnasium as gym, numpy as np
        >>> space = gym.spaces.Dict({"b": gym.spaces.Box(0, 1)})
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_space_mismatch(space_mismatch({"a": np.zeros((2, 3))}, space))
        >>> str(caught[0].message).startswith("the env's reset observations do not fit")
        True
    """
    warnings.warn(
        f"the env's reset observations do not fit its single_observation_space ({what}): "
        "the chunks carry that space, which does not describe them (a wrapper that changes "
        "observations, as gymnasium's vector TransformObservation without a "
        "single_observation_space, leaves the space as it was); give the env the "
        "single_observation_space of what it returns",
        SpaceMismatchWarning,
        stacklevel=3,
    )
