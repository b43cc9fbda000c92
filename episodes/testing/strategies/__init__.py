"""Hypothesis strategies for spaces, items, episodes, chunked episodes and rollouts.

Every strategy shrinks towards small spaces, short episodes and simple values, so a failing
property reports a minimal example. Needs ``hypothesis`` (install it yourself, e.g. with
``pip install episodes[dev]``); :func:`rollouts` also needs torch, imported only when it draws.

Example:
    >>> import gymnasium as gym
    >>> from hypothesis import given
    >>> from episodes.testing.strategies import episodes
    >>> @given(episodes(gym.spaces.Discrete(4), gym.spaces.Discrete(2), max_len=3))
    ... def test_actions_have_one_row_per_step(ep):
    ...     assert len(ep.get_actions()) == len(ep)
    >>> test_actions_have_one_row_per_step()
"""

from episodes.testing.strategies.chunks import ChunkedEpisode, chunked_episodes, replay_in_chunks
from episodes.testing.strategies.episodes import (
    DEFAULT_EXTRA_MODEL_OUTPUTS,
    episodes,
    infos,
    resolve_space,
)
from episodes.testing.strategies.rollouts import rollouts
from episodes.testing.strategies.spaces import (
    ALL_KINDS,
    BATCHABLE_KINDS,
    CONTAINER_KINDS,
    LEAF_KINDS,
    items,
    spaces,
)

__all__ = [
    "ALL_KINDS",
    "BATCHABLE_KINDS",
    "CONTAINER_KINDS",
    "DEFAULT_EXTRA_MODEL_OUTPUTS",
    "LEAF_KINDS",
    "ChunkedEpisode",
    "chunked_episodes",
    "episodes",
    "infos",
    "items",
    "replay_in_chunks",
    "resolve_space",
    "rollouts",
    "spaces",
]
