"""A chunk's rewards as the storage takes them: one real number per step.

The storage's rewards are ``[T, N, 1]`` floats, one number per step and env. Rewards that are
not (complex numbers, whose imaginary part a cast drops; strings, which a cast would parse;
objects such as None, which a cast turns into NaN; vectors of a multi-objective env, or
one-item arrays, which numpy would broadcast or fail on) are refused naming the chunk's
episode, once per chunk (dtype and shape only, nothing per step), before any storage is
touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from episodes.episode.reward_values import is_real

#: numpy dtype kinds of real numbers: bools, signed and unsigned ints, floats.
REAL_KINDS = "biuf"


def step_rewards(chunk: Any, read: Callable[[Any, str], Any]) -> np.ndarray:
    """``chunk``'s rewards, read with ``read(chunk, "rewards")``, as a 1-D real array.

    Raises:
        ValueError: Steps that are not one number each (a vector, a one-item array, a dict),
            or that do not form one array (ragged), naming the episode and the step shape.
        TypeError: Rewards that are not real numbers: complex (the storage would drop their
            imaginary parts), strings or objects (None, mixed types). Ints beyond int64 are
            taken as float64 (a ``ValueError`` beyond any float's range).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.converter.columns import rows
        >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 0],
        ...                         rewards=[1, 2], len_lookback_buffer=0)
        >>> step_rewards(ep, rows).tolist()
        [1, 2]
        >>> ep = SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 0],
        ...                         rewards=[[1.0, 10.0]] * 2, len_lookback_buffer=0)
        >>> step_rewards(ep, rows)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: rewards of episode 'a' have steps of shape (2,): ...
    """
    where = f"rewards of episode {chunk.id_!r}"
    try:
        rewards = read(chunk, "rewards")
    except ValueError as err:  # ragged steps: numpy's or the batching's error, named
        raise ValueError(f"{where}: the steps do not form one array ({err})") from None
    if not isinstance(rewards, np.ndarray):  # a dict or tuple of arrays per step
        raise ValueError(
            f"{where} hold a {type(rewards).__name__} per step: the storage takes one real "
            "number per step"
        )
    if rewards.ndim != 1:
        raise ValueError(
            f"{where} have steps of shape {rewards.shape[1:]}: the storage takes one number "
            "per step (shape ()); scalarize vector rewards, squeeze one-item ones, first"
        )
    kind = rewards.dtype.kind
    if kind == "c":
        raise TypeError(
            f"{where} must be real numbers, got complex ones (dtype {rewards.dtype}); the "
            "storage's float rewards would drop their imaginary parts"
        )
    if kind == "O" and all(map(is_real, rewards.tolist())):
        try:  # ints beyond int64 (numpy keeps them as objects): the storage's floats, as a
            return rewards.astype(np.float64)  # cast of the replay buffer's rewards does
        except OverflowError:
            raise ValueError(f"{where} hold an int beyond any float's range") from None
    if kind not in REAL_KINDS:
        raise TypeError(
            f"{where} must be real numbers (bools, ints or floats), got {rewards.dtype} "
            "values: strings and objects (None, mixed types) hold no number the storage "
            "takes"
        )
    return rewards
