"""episodes: reinforcement-learning experience data.

Record what an agent did as :class:`SingleAgentEpisode` chunks, read it back through
lookback-aware getters, cut and stitch chunks, and turn them into training batches.

Example:
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode()
    >>> ep.add_env_reset(0)
    >>> ep.add_env_step(1, action=0, reward=1.0)
    >>> ep.get_observations()
    [0, 1]
"""

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import SampleBatch, SingleAgentEpisode

__all__ = ["InfiniteLookbackBuffer", "SampleBatch", "SingleAgentEpisode"]
__version__ = "0.1.0"
