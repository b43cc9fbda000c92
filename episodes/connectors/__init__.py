"""Connectors: ``(episodes, batch) -> batch`` pieces that build model/learner inputs.

All read episodes through the lookback-aware getters, so a chunk cut with enough lookback
gives the same rows as the un-cut episode.

Example:
    >>> import gymnasium as gym
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[1, 0],
    ...                         rewards=[1.0, 1.0], action_space=gym.spaces.Discrete(2),
    ...                         len_lookback_buffer=0)
    >>> pipe = ConnectorPipeline([FrameStack(2), PrevActionsPrevRewards(1, 0),
    ...                           AddLearnerColumns()])
    >>> batch = pipe([ep])
    >>> batch["obs"].shape, batch["prev_n_actions"].shape, batch["actions"].shape
    ((2, 2), (2, 1, 2), (2,))
"""

from episodes.connectors.base import (
    Connector,
    ConnectorPipeline,
    EpisodeConnector,
    check_episodes,
    concat_rows,
    sliding_rows,
)
from episodes.connectors.flat_episodes import flatten_episode_observations
from episodes.connectors.float32 import Float32RangeError
from episodes.connectors.learner import AddLearnerColumns
from episodes.connectors.lookback_reach import ShortLookbackWarning
from episodes.connectors.mean_std import MeanStdFilter
from episodes.connectors.observations import FlattenObservations, FrameStack, flatten_rows
from episodes.connectors.prev import PrevActionsPrevRewards

__all__ = [
    "AddLearnerColumns",
    "Connector",
    "ConnectorPipeline",
    "EpisodeConnector",
    "FlattenObservations",
    "Float32RangeError",
    "FrameStack",
    "MeanStdFilter",
    "PrevActionsPrevRewards",
    "ShortLookbackWarning",
    "check_episodes",
    "concat_rows",
    "flatten_episode_observations",
    "flatten_rows",
    "sliding_rows",
]
