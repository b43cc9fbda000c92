"""Observation connectors: flattening with one-hot, and n-frame stacking across chunk borders."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import tree

from episodes.connectors.base import (
    Batch,
    EpisodeConnector,
    as_arrays,
    concat_rows,
    filler_for,
    sliding_rows,
    with_fill_dtype,
)
from episodes.episode import SingleAgentEpisode

__all__ = ["FlattenObservations", "FrameStack", "flatten_rows"]


def flatten_rows(value: Any) -> np.ndarray:
    """A batched (possibly nested) value ``[B, ...]`` as one float32 matrix ``[B, D]``.

    Leaves are reshaped to ``[B, -1]`` and concatenated in dm-tree order (dict keys sorted).

    Example:
        >>> flatten_rows({"a": np.zeros((2, 2)), "b": np.ones(2)})
        array([[0., 0., 1.],
               [0., 0., 1.]], dtype=float32)
    """
    leaves = [np.asarray(leaf) for leaf in tree.flatten(value)]
    rows = leaves[0].shape[0]
    mats = [leaf.reshape(rows, -1).astype(np.float32, copy=False) for leaf in leaves]
    return mats[0] if len(mats) == 1 else np.concatenate(mats, axis=1)


def _whole_count(value: Any, name: str, minimum: int) -> int:
    # int() would truncate 2.7 to 2 and take True as 1: a window size must be a real integer.
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        ) from None
    if count < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {count}")
    return count


def _read_obs(episode: SingleAgentEpisode, start: int, stop: int, fill: Any, one_hot: bool) -> Any:
    one_hot = one_hot and episode.observation_space is not None
    value = episode.get_observations(
        slice(start, stop), neg_index_as_lookback=True, fill=fill, one_hot_discrete=one_hot
    )
    space = episode.observation_space
    rows = as_arrays(value, fill, finalized=episode.observations.finalized, space=space)
    if fill is None:  # nothing padded: the rows keep their dtype
        return rows
    # Padded or not, the rows take the dtype the filler gives them (with a space, the
    # space's), so a column's dtype does not depend on where a chunk was cut.
    return with_fill_dtype(rows, filler_for(space, fill, one_hot_discrete=one_hot))


class FlattenObservations(EpisodeConnector):
    """Writes each row's observation, flattened to float32 ``[rows, D]`` (discrete one-hot).

    Args:
        one_hot_discrete: One-hot Discrete/MultiDiscrete leaves (needs the observation space).
        out_key: The batch column to write.
        inference: Rows per episode (see :mod:`episodes.connectors.base`).

    Example:
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 2, 1], actions=[0, 0], rewards=[0.0, 0.0],
        ...                         observation_space=gym.spaces.Discrete(3),
        ...                         len_lookback_buffer=0)
        >>> FlattenObservations()([ep], {})["obs"]
        array([[1., 0., 0.],
               [0., 0., 1.]], dtype=float32)
    """

    def __init__(
        self, *, one_hot_discrete: bool = True, out_key: str = "obs", inference: bool = False
    ):
        super().__init__(inference=inference)
        self.one_hot_discrete = one_hot_discrete
        self.out_key = out_key

    def __call__(self, episodes: list[SingleAgentEpisode], batch: Batch) -> Batch:
        """Writes the flattened observation rows of ``episodes`` into ``batch``."""
        parts = []
        for episode in episodes:
            start, stop = self.rows(episode)
            if stop > start:
                value = _read_obs(episode, start, stop, None, self.one_hot_discrete)
                parts.append(flatten_rows(value))
        if parts:
            batch[self.out_key] = concat_rows(parts)
        return batch


class FrameStack(EpisodeConnector):
    """Writes the last ``n`` observations of each row: ``[rows, n, *obs_shape]``, oldest first.

    Row ``ts`` holds observations ``ts-n+1 .. ts``; before the episode's first observation (and
    beyond the lookback) frames are ``fill``-ed. Each episode's whole window range is read once.

    Args:
        n: Frames per row (an integer >= 1; a float or bool is a ``TypeError``).
        fill: Filler for missing frames (default 0.0).
        flatten: Flatten (and one-hot) every frame and concatenate: ``[rows, n * D]`` float32.
        out_key: The batch column to write.
        inference: Rows per episode (see :mod:`episodes.connectors.base`).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[1.0, 2.0, 3.0], actions=[0, 0],
        ...                         rewards=[0.0, 0.0], len_lookback_buffer=0)
        >>> FrameStack(2)([ep], {})["obs"]
        array([[0., 1.],
               [1., 2.]])
    """

    def __init__(
        self,
        n: int,
        *,
        fill: Any = 0.0,
        flatten: bool = False,
        out_key: str = "obs",
        inference: bool = False,
    ):
        count = _whole_count(n, "FrameStack's n", 1)
        if fill is None:  # the getter would clip the window: fewer rows than steps
            raise ValueError("FrameStack needs a fill value for frames before the episode")
        super().__init__(inference=inference)
        self.n = count
        self.fill = fill
        self.flatten = flatten
        self.out_key = out_key

    def __call__(self, episodes: list[SingleAgentEpisode], batch: Batch) -> Batch:
        """Writes the stacked frames of every row of ``episodes`` into ``batch``."""
        parts = []
        for episode in episodes:
            start, stop = self.rows(episode)
            if stop <= start:
                continue
            value = _read_obs(episode, start - self.n + 1, stop, self.fill, self.flatten)
            if self.flatten:
                windows = sliding_rows(flatten_rows(value), self.n)
                parts.append(windows.reshape(windows.shape[0], -1))
            else:
                parts.append(sliding_rows(value, self.n))
        if parts:
            batch[self.out_key] = concat_rows(parts)
        return batch
