"""The spaces a Minari export can store, checked before anything is written.

Example:
    >>> import gymnasium as gym
    >>> check_minari_space(gym.spaces.Discrete(3), "the action space")
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from episodes.io.errors import DatasetError

__all__ = ["check_minari_space"]

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
_LEAF_SPACES = (*_ARRAY_SPACES, gym.spaces.Discrete)
_INT64_MAX = int(np.iinfo(np.int64).max)


def check_minari_space(space: gym.Space[Any], where: str) -> None:
    """Refuses a space Minari cannot store, before anything is written.

    Minari stores Box, Discrete, MultiDiscrete, MultiBinary and Text leaves inside Dict and
    Tuple spaces. A leaf without values (a zero-size shape) kills the process inside pyarrow
    (SIGFPE) where Minari writes it, so it is refused here too, as are an empty Dict or Tuple,
    a Dict with a key that is not a str (Arrow field names are) and a leaf whose dtype is not
    in the machine's byte order (pyarrow refuses byte-swapped arrays).

    Raises:
        DatasetError: Naming ``where`` and the space.

    Example:
        >>> check_minari_space(gym.spaces.Box(0, 1, (2,)), "observation space")
        >>> try:
        ...     check_minari_space(gym.spaces.Box(0, 1, (2, 0)), "observation space")
        ... except DatasetError as err:
        ...     print(str(err).split(":")[0])
        observation space Box([], [], (2, 0), float32) has no values in its items
    """
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        children: list[tuple[Any, gym.Space[Any]]] = (
            list(space.spaces.items())
            if isinstance(space, gym.spaces.Dict)
            else list(enumerate(space.spaces))
        )
        if not children:
            raise DatasetError(
                f"{where} is an empty {type(space).__name__} space, which Minari cannot store"
            )
        keys = [key for key, _ in children if not isinstance(key, str)]
        if isinstance(space, gym.spaces.Dict) and keys:
            raise DatasetError(
                f"{where} {space} has the key {keys[0]!r}, not a str: Minari stores a Dict "
                "space's keys as Arrow field names, which are str"
            )
        for key, child in children:
            check_minari_space(child, f"{where}[{key!r}]")
        return
    if isinstance(space, _LEAF_SPACES) and not np.dtype(space.dtype).isnative:
        raise DatasetError(
            f"{where} {space} has the non-native byte order dtype {np.dtype(space.dtype).str}: "
            "Minari cannot store byte-swapped values (pyarrow refuses them)"
        )
    if isinstance(space, _ARRAY_SPACES):
        if int(np.prod(space.shape)) == 0:
            raise DatasetError(
                f"{where} {space} has no values in its items: Minari cannot store a "
                "zero-size leaf (pyarrow stops the process on it)"
            )
    elif isinstance(space, gym.spaces.Discrete):
        if int(space.start) + int(space.n) - 1 > _INT64_MAX:  # Minari records it as int64
            raise DatasetError(
                f"{where} {space} holds values beyond int64, which Minari records Discrete "
                "spaces in (its reader would fail on the stored space)"
            )
    elif not isinstance(space, gym.spaces.Text):
        raise DatasetError(
            f"{where} {space} is a {type(space).__name__} space, which Minari cannot store "
            "(it stores Box, Discrete, MultiDiscrete, MultiBinary and Text, in Dict and Tuple)"
        )
