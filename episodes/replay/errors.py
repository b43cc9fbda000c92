"""The replay buffers' errors (all are ``ValueError`` subclasses)."""

from __future__ import annotations

from typing import Any

from episodes.errors import DeviceError  # one class for every package's device checks

__all__ = ["DeviceError", "EmptyBufferError", "EvictedEpisodeError"]


class EmptyBufferError(ValueError):
    """Nothing to sample: an empty buffer, or no start that fits the asked sequence length.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> EpisodeReplayBuffer(10).sample(1)
        Traceback (most recent call last):
        episodes.replay.errors.EmptyBufferError: cannot sample from an empty buffer
    """


class EvictedEpisodeError(ValueError):
    """A chunk continues an episode that the buffer has already evicted.

    ``episode_id`` is the episode's id (the first such chunk's, in add order). ``add`` refuses
    these chunks by default; ``on_evicted="drop"`` or ``"restart"`` takes them (see ``add``).

    Example:
        >>> from functools import partial
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> Episode = partial(SingleAgentEpisode, actions=[0], rewards=[1.0], len_lookback_buffer=0)
        >>> buf = EpisodeReplayBuffer(1)  # room for one step: adding "b" evicts "a"
        >>> buf.add(Episode("a", observations=[0, 1])); buf.add(Episode("b", observations=[0, 1]))
        >>> buf.add(Episode("a", observations=[1, 2], t_started=1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        episodes.replay.errors.EvictedEpisodeError: chunk of episode 'a' continues an episode ...
        >>> try:
        ...     buf.add(Episode("a", observations=[1, 2], t_started=1))
        ... except EvictedEpisodeError as error:
        ...     print(error.episode_id)
        a
    """

    def __init__(self, message: str, episode_id: Any = None) -> None:
        super().__init__(message)
        self.episode_id = episode_id
