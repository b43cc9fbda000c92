"""The check every connector makes of the episodes it is given.

Example:
    >>> import numpy as np
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)
    >>> check_episodes(np.array([ep, ep]), "FrameStack") == [ep, ep]  # an array's as a list
    True
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode

__all__ = ["check_episodes"]


def check_episodes(episodes: Any, who: str) -> Sequence[SingleAgentEpisode]:
    """Refuses anything but a sequence of :class:`SingleAgentEpisode`, naming ``who``.

    One episode in place of a list, or a list holding something else, would otherwise fail
    deep inside a connector with an error naming neither. ``who`` is the connector (or the
    check) the episodes were given to. A list, tuple or other ``Sequence`` is taken, and so is
    a 1-d numpy array of episodes, as ``np.array(episodes)``, ``rng.permutation(episodes)`` and
    ``rng.choice(episodes, k)`` give them (an empty one of any dtype holds no episodes).

    Returns:
        The episodes as the connectors read them: the sequence given, an array's as a list.

    Raises:
        TypeError: ``episodes`` is not a sequence of episodes; the message names the first
            item that is not one, with its position and type. A numpy array that is not 1-d,
            or holds no objects (numbers, text), is named with its dtype and shape.

    Example:
        >>> ep = SingleAgentEpisode(observations=[0], len_lookback_buffer=0)
        >>> check_episodes([ep, ep], "FrameStack") == [ep, ep]
        True
        >>> check_episodes([ep, 3], "FrameStack")
        Traceback (most recent call last):
        TypeError: FrameStack: connectors take a list of SingleAgentEpisode, got item 1: 3 (int)
        >>> check_episodes(np.array([[ep], [ep]]), "FrameStack")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: FrameStack: ... got a 2-d numpy array (object, shape (2, 1)): pass a list ...
    """
    what = f"{who}: connectors take a list of SingleAgentEpisode, got"
    if isinstance(episodes, np.ndarray):
        if episodes.ndim != 1 or (episodes.dtype != object and episodes.size):
            raise TypeError(
                f"{what} a {episodes.ndim}-d numpy array ({episodes.dtype}, shape "
                f"{episodes.shape}): pass a list or a 1-d array of episodes"
            )
        episodes = episodes.tolist()  # the objects themselves (the episodes), or []
    elif isinstance(episodes, SingleAgentEpisode):
        raise TypeError(f"{what} one episode ({episodes.id_!r}); wrap it in a list: [episode]")
    elif isinstance(episodes, (str, bytes)) or not isinstance(episodes, Sequence):
        raise TypeError(f"{what} {reprlib.repr(episodes)} ({type(episodes).__name__})")
    if all(issubclass(kind, SingleAgentEpisode) for kind in set(map(type, episodes))):
        return episodes  # the types in one C-level pass: thousands of episodes pass each connector
    for i, episode in enumerate(episodes):
        if not isinstance(episode, SingleAgentEpisode):
            raise TypeError(f"{what} item {i}: {reprlib.repr(episode)} ({type(episode).__name__})")
    return episodes  # isinstance took them all (a proxy whose __class__ is an episode's)
