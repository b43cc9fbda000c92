"""Episodes whose observations are flattened: what stores that hold flat rows take.

A replay buffer stores numeric arrays, one row a step; goal-conditioned envs (a Dict of
``observation``, ``achieved_goal`` and ``desired_goal``) and other nested observations do not
fit it. :func:`flatten_episode_observations` gives a copy of an episode whose observations are
the rows gymnasium's ``flatten`` makes (float32, Discrete leaves one-hot), lookback included,
so that the copy can be stored and the original keeps its nested items.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.connectors.last_rows import FLAT_LEAVES
from episodes.connectors.observations import _flat_leaves
from episodes.episode import SingleAgentEpisode
from episodes.spaces.batching import batch

__all__ = ["flatten_episode_observations", "flat_space"]


def flat_space(space: gym.Space[Any] | None) -> gym.spaces.Box | None:
    """The float32 Box that :func:`flatten_episode_observations`' rows lie in (None for None).

    gymnasium's ``flatten_space`` bounds (a Discrete leaf's one-hot in ``[0, 1]``), as float32.

    Raises:
        ValueError: A space holding a leaf other than Box, Discrete, MultiDiscrete or
            MultiBinary (Text, Sequence, Graph, OneOf), naming it.

    Example:
        >>> space = gym.spaces.Dict({"goal": gym.spaces.Box(-1, 1, (2,)),
        ...                          "mode": gym.spaces.Discrete(3)})
        >>> flat_space(space)
        Box([-1. -1.  0.  0.  0.], 1.0, (5,), float32)
    """
    if space is None:
        return None
    leaves = _leaves_in_order(space, space)
    odd = next((leaf for leaf in leaves if not isinstance(leaf, FLAT_LEAVES)), None)
    if odd is not None:  # gymnasium flattens some of them (OneOf, Text) to rows of no use here
        raise ValueError(
            f"{space} does not flatten to float32 rows of one size: it holds {odd} (only Box, "
            "Discrete, MultiDiscrete and MultiBinary leaves do; a Text leaf's strings are no "
            "numbers, a Sequence, Graph or OneOf has items of many sizes)"
        )
    bounds: list[Any] = [gym.spaces.flatten_space(leaf) for leaf in leaves]  # Boxes, each
    with np.errstate(over="ignore"):  # float64 bounds beyond float32's range: +-inf, quietly
        low = [part.low.astype(np.float32) for part in bounds]
        high = [part.high.astype(np.float32) for part in bounds]
    empty = np.zeros(0, np.float32)  # a space without leaves (an empty Dict): rows of width 0
    return gym.spaces.Box(np.concatenate([empty, *low]), np.concatenate([empty, *high]))


def _leaves_in_order(space: gym.Space[Any], value: Any) -> list[Any]:
    """The leaves of a value nested as ``space``, in the space's order (gymnasium's flatten's).

    A Dict's keys come in the order the space holds them, which is not always sorted (an
    ``OrderedDict``, ``sort_keys=False``), where dm-tree would sort them.
    """
    if isinstance(space, gym.spaces.Dict):
        return [
            leaf for key, sub in space.spaces.items() for leaf in _leaves_in_order(sub, value[key])
        ]
    if isinstance(space, gym.spaces.Tuple):
        return [
            leaf for sub, part in zip(space.spaces, value) for leaf in _leaves_in_order(sub, part)
        ]
    return [value]


def flatten_episode_observations(episode: SingleAgentEpisode) -> SingleAgentEpisode:
    """A copy of ``episode`` whose observations are flat float32 rows; the original unchanged.

    Each observation, lookback ones included, becomes the row gymnasium's
    ``flatten(observation_space, observation)`` gives (leaves in the space's order, a Dict's
    keys as the space holds them, Discrete and MultiDiscrete leaves one-hot), as float32, and
    the copy's observation space is :func:`flat_space` of the episode's. An episode without a space
    flattens its leaves as recorded (no one-hot, dict keys sorted), as
    :class:`~episodes.connectors.FlattenObservations` does. Everything else (id, times,
    actions, rewards, infos, extra model outputs, flags, ``custom_data``) is copied as is,
    and the copy keeps the episode's mode (list or numpy).

    Raises:
        ValueError: Observations that do not flatten to numbers (a Text leaf) or to rows of
            one size (a Sequence, Graph or OneOf leaf, see :func:`flat_space`); a finite value
            float32 cannot hold (:class:`~episodes.connectors.Float32RangeError`). The episode
            is unchanged.

    Example:
        >>> space = gym.spaces.Dict({"goal": gym.spaces.Box(-1, 1, (2,)),
        ...                          "mode": gym.spaces.Discrete(3)})
        >>> ep = SingleAgentEpisode(
        ...     observations=[{"goal": np.array([0.5, -0.5], np.float32), "mode": 2}] * 3,
        ...     actions=[0, 1], rewards=[1.0, 0.0], observation_space=space,
        ...     len_lookback_buffer=0)
        >>> flat = flatten_episode_observations(ep)
        >>> flat.get_observations(0), flat.observation_space.shape
        (array([ 0.5, -0.5,  0. ,  0. ,  1. ], dtype=float32), (5,))
        >>> type(ep.get_observations(0)).__name__  # the original keeps its dicts
        'dict'
    """
    space = episode.observation_space
    column = episode.observations
    lookback = column.lookback
    count = lookback + len(column)
    new_space = flat_space(space)
    name = f"flatten_episode_observations (episode {episode.id_!r})"
    if count == 0:
        width = 0 if space is None else int(new_space.shape[0])  # type: ignore[union-attr]
        rows = np.zeros((0, width), np.float32)
    else:
        items = column.get(
            slice(-lookback, None), neg_index_as_lookback=True, one_hot_discrete=space is not None
        )
        batched = items if column.finalized else batch(items)
        if space is not None:  # leaves in the space's order, as its flat_space bounds
            batched = _leaves_in_order(space, batched)
        rows = _flat_leaves(batched, count, name)
    flat = InfiniteLookbackBuffer(rows if column.finalized else list(rows), lookback=lookback)
    shallow = copy.copy(episode)  # shares every column with the episode until the deep copy
    shallow.observations = flat
    shallow.observation_space = new_space
    return copy.deepcopy(shallow, {id(flat): flat})  # the new rows are not copied again
