"""The warning for rows that read past a chunk's lookback into steps its episode had.

A connector row reads items before itself: ``FrameStack(n)`` the ``n - 1`` previous
observations, ``PrevActionsPrevRewards(n_a, n_r)`` the previous actions and rewards. Items
before the episode's first step do not exist and are filled; items before a chunk's lookback
but after its episode's start did exist, and a chunk cut (or sampled) with too little lookback
fills them just the same, as if the episode started there. The rows cannot tell the two apart,
so the connectors warn when the second happens.

Example:
    >>> import warnings
    >>> from episodes import SingleAgentEpisode
    >>> chunk = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 0],
    ...                            rewards=[0.0, 0.0], t_started=5, len_lookback_buffer=1)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_short_lookback([chunk], lambda ep: 3, "observations", "FrameStack(4)", 0.0)
    True
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    FrameStack(4): episode ... keeps 1 step of observations lookback before t=5, but its ...
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from episodes.episode import SingleAgentEpisode

__all__ = ["ShortLookbackWarning", "warn_short_lookback"]


class ShortLookbackWarning(RuntimeWarning):
    """A connector filled items before a chunk's lookback that its episode had.

    Keep at least as much lookback as the connector reads before a row:
    ``EnvRunner(len_lookback_buffer=...)``, a replay buffer's ``sample(lookback=...)``,
    ``cut(len_lookback_buffer=...)``.

    Example:
        >>> issubclass(ShortLookbackWarning, RuntimeWarning)
        True
    """


def warn_short_lookback(
    episodes: Sequence[SingleAgentEpisode],
    reach: Callable[[SingleAgentEpisode], int],
    column: str,
    who: str,
    fill: Any,
) -> bool:
    """Warns (:class:`ShortLookbackWarning`) at the first episode whose rows read lost items.

    ``reach(episode)`` is how many items before the chunk's ``ts = 0`` its first row reads
    from ``column`` (``"observations"``, ``"actions"`` or ``"rewards"``); ``who`` names the
    connector and ``fill`` what it fills with. An episode that keeps that many items of
    lookback, or whose chunk starts no later than its lookback reaches (its episode had no
    more steps before), reads nothing lost. One warning per call at most: the first such
    episode is named. Returns whether it warned.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> fresh = SingleAgentEpisode(observations=[0.0], len_lookback_buffer=0)
        >>> warn_short_lookback([fresh], lambda ep: 3, "observations", "FrameStack(4)", 0.0)
        False
    """
    for episode in episodes:
        needed = reach(episode)
        if needed <= 0:
            continue
        kept = getattr(episode, column).lookback
        # The episode had t_started items of each column before the chunk's ts = 0.
        earlier = episode.t_started
        if needed > kept and earlier > kept:
            lost = min(needed, earlier) - kept
            warnings.warn(
                ShortLookbackWarning(
                    f"{who}: episode {episode.id_!r} keeps {kept} step{'s' * (kept != 1)} of "
                    f"{column} lookback before t={earlier}, but its first row reads {needed} "
                    f"before it: {lost} of the episode's {column} were filled with {fill!r} as "
                    "if it started there. "
                    f"Keep at least {needed} steps of lookback (EnvRunner(len_lookback_buffer"
                    "=...), a replay buffer's sample(lookback=...), "
                    "cut(len_lookback_buffer=...))"
                ),
                stacklevel=3,
            )
            return True
    return False
