"""Episode replay buffers: uniform and prioritized, with n-step, sequence and episode sampling.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.replay import EpisodeReplayBuffer
    >>> buf = EpisodeReplayBuffer(capacity=1000, seed=0)
    >>> buf.add(SingleAgentEpisode(observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
    ...                            rewards=[1.0, 1.0, 1.0], terminated=True,
    ...                            len_lookback_buffer=0))
    >>> batch = buf.sample(8, n_step=3, gamma=0.9)
    >>> sorted(set(batch["n_step"].tolist()))
    [1, 2, 3]
"""

from episodes.replay.buffer import EpisodeReplayBuffer
from episodes.replay.errors import EmptyBufferError, EvictedEpisodeError
from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer
from episodes.replay.sum_tree import SumTree

__all__ = [
    "EmptyBufferError",
    "EpisodeReplayBuffer",
    "EvictedEpisodeError",
    "PrioritizedEpisodeReplayBuffer",
    "SumTree",
]
