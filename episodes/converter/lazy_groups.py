"""``Rollout.groups`` of the fast path: a runner sample's per-env chunk lists, built when read."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.indexing import sequence_position
from episodes.runner import SampledChunks

__all__ = ["LazyGroups", "env_bounds"]


class LazyGroups(Sequence[list[SingleAgentEpisode]]):
    """The per-env chunk lists of a :class:`SampledChunks`, built when a group is read.

    ``bounds`` (optional) gives env ``n``'s chunks as ``chunks[bounds[n]:bounds[n + 1]]`` of
    any sequence (chunks laid out env by env); by default they come from ``env_indices``.

    Read as the general path's list of lists is: an index as a list reads it (a bool or a
    float is a ``TypeError``, as ``SampledChunks`` reads its own), a slice is a list of groups,
    and it is equal to any sequence (a list, a tuple, another ``LazyGroups``) of equal groups.
    A group is built once and then kept, so ``groups[0] is groups[0]`` and a change to that
    list (an ``append``) stays, as in a list of lists.

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> groups = LazyGroups(EnvRunner(env, RandomPolicy(env.action_space), seed=0).sample(3))
        >>> sum(len(c) for c in groups[1]), groups[1] is groups[1], repr(groups)
        (3, True, 'LazyGroups(2 groups, 2 chunks, 1 built)')
        >>> groups == [list(g) for g in groups], groups[::-1] == [groups[1], groups[0]]
        (True, True)
        >>> groups[True]
        Traceback (most recent call last):
        TypeError: group indices must be integers or slices, not bool
    """

    def __init__(self, chunks: Sequence[SingleAgentEpisode], bounds: np.ndarray | None = None):
        self._chunks = chunks
        if bounds is None:
            assert isinstance(chunks, SampledChunks)
            bounds = env_bounds(chunks)
        self._bounds = bounds
        self._built: dict[int, list[SingleAgentEpisode]] = {}

    def __len__(self) -> int:
        return len(self._bounds) - 1

    @overload
    def __getitem__(self, index: int) -> list[SingleAgentEpisode]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[SingleAgentEpisode]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        n = sequence_position(index, len(self), "group")
        group = self._built.get(n)
        if group is None:
            group = list(self._chunks[int(self._bounds[n]) : int(self._bounds[n + 1])])
            self._built[n] = group
        return group

    def __iter__(self) -> Iterator[list[SingleAgentEpisode]]:
        for n in range(len(self)):
            yield self[n]

    def __eq__(self, other: object) -> bool:
        # As SampledChunks and GroupSample: equal to any sequence of equal groups.
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # a list's repr would print every chunk
        chunks = int(self._bounds[-1] - self._bounds[0]) if len(self._bounds) else 0
        return f"LazyGroups({len(self)} groups, {chunks} chunks, {len(self._built)} built)"


def env_bounds(chunks: SampledChunks) -> np.ndarray:
    """``[N + 1]``: env ``n``'s chunks are ``chunks[bounds[n]:bounds[n + 1]]`` (none built).

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(20)
        >>> chunks.env_indices.tolist(), env_bounds(chunks).tolist()  # env 0's episode ended
        ([0, 0, 1], [0, 2, 3])
    """
    return np.searchsorted(chunks.env_indices, np.arange(chunks.num_envs + 1))
