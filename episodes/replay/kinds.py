"""Whether a buffer class is prioritized, judged so that a second import of its module agrees.

``save`` writes a prioritized buffer's ``alpha`` and priorities, and ``load`` reads them back,
only into a buffer it takes for prioritized. A plain ``isinstance`` check against the class of
the module as imported now fails for a buffer made from another import of
``episodes.replay.prioritized`` (the module reloaded in a notebook, or imported twice, as
pytest's ``--import-mode=importlib`` does when the module's own file is collected): such a
buffer was saved as a uniform one, its priorities and ``alpha`` silently dropped. Its class is
known by its module and name instead, which every import of the module shares.
"""

from __future__ import annotations

__all__ = ["prioritized_class"]


def prioritized_class(cls: type) -> bool:
    """Whether ``cls`` is ``PrioritizedEpisodeReplayBuffer`` or a subclass, from any import.

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
        >>> class Mine(PrioritizedEpisodeReplayBuffer):
        ...     pass
        >>> prioritized_class(Mine), prioritized_class(EpisodeReplayBuffer)
        (True, False)
    """
    from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer as Prioritized

    if issubclass(cls, Prioritized):  # the usual case: one import
        return True
    name = (Prioritized.__module__, Prioritized.__qualname__)
    return any((base.__module__, base.__qualname__) == name for base in cls.__mro__)
