"""The one observation space and one action space a dataset's pieces hold.

A dataset describes one env: ``dataset_info`` reports the spaces of its first piece that has
each, and the batch readers (``EpisodeReplayBuffer.from_dataset``, ``TransitionDataset``,
``SequenceDataset``) stack every piece's steps in one shape and nesting; ``merge``
refuses sources of other spaces. :class:`DatasetSpaces` holds the first spaces seen and says
how a later piece's differ (``episodes validate`` notes such pieces). A piece stored
without a space (an episode's end stored without steps, episodes made without spaces) is
compared with nothing and fixes nothing.

Example:
    >>> import gymnasium as gym
    >>> from episodes import SingleAgentEpisode
    >>> box, disc = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)
    >>> seen = DatasetSpaces()
    >>> seen.difference(SingleAgentEpisode("a", observation_space=box), "piece 0") is None
    True
    >>> other = SingleAgentEpisode("b", observation_space=gym.spaces.Dict({"x": box}))
    >>> print(seen.difference(other, "piece 1").split(":")[0])
    piece 1 (episode 'b')
"""

from __future__ import annotations

from typing import Any

from episodes.episode import SingleAgentEpisode
from episodes.structs import short_repr

__all__ = ["ADVICE", "DatasetSpaces"]

_KINDS = ("observation", "action")


#: What to do about a piece of other spaces.
ADVICE = (
    "a dataset holds one observation and one action space (dataset_info reports them, the "
    "replay buffer and torch datasets stack every piece's steps in one shape and nesting, "
    "merge refuses sources of other spaces): store episodes of other spaces in another dataset"
)
_NAMED = 5  # pieces a note names besides the first that differs


class DatasetSpaces:
    """The spaces of the first pieces that have them, and the later pieces whose spaces differ.

    Spaces are compared as gymnasium compares them (``==``: type, shape, dtype, bounds, Dict
    keys, ...), as ``merge`` compares its sources'.

    Example:
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> seen = DatasetSpaces()
        >>> for n in (2, 2, 3, 4):
        ...     seen.add(SingleAgentEpisode(action_space=gym.spaces.Discrete(n)), f"piece {n}")
        >>> print(seen.note().split(";")[0])  # doctest: +NORMALIZE_WHITESPACE
        piece 3 (episode ...): its action space Discrete(3) is not the dataset's Discrete(2)
        (that of piece 2, the first piece with one)
        >>> print(seen.note().split("; ")[1])
        1 more piece holds other spaces too (piece 4)
    """

    def __init__(self) -> None:
        self._first: dict[str, tuple[Any, str]] = {}
        self._found: list[str] = []  # the first difference, then the names of the others
        self._others = 0

    def difference(self, episode: SingleAgentEpisode, where: str) -> str | None:
        """Why ``episode`` (a piece named ``where``) does not fit the spaces seen (None: it does).

        A space of a kind not seen yet becomes the dataset's (that of ``where``), as it does
        for :func:`~episodes.io.dataset_info`.

        Example:
            >>> import gymnasium as gym
            >>> from episodes import SingleAgentEpisode
            >>> seen = DatasetSpaces()
            >>> seen.difference(SingleAgentEpisode(), "piece 0") is None  # no spaces: fits
            True
        """
        found = self._what(episode, where)
        return None if found is None else f"{found}; {ADVICE}"

    def add(self, episode: SingleAgentEpisode, where: str) -> None:
        """Notes ``episode`` (a piece named ``where``) for :meth:`note`.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> seen = DatasetSpaces(); seen.add(SingleAgentEpisode(), "piece 0")
            >>> seen.note() is None
            True
        """
        found = self._what(episode, where)
        if found is not None:
            self._others += bool(self._found)
            if len(self._found) <= _NAMED:
                self._found.append(found if not self._found else where)

    def note(self) -> str | None:
        """One line on the pieces added whose spaces differ (None: none does).

        It names the first such piece, its spaces and the dataset's, then how many more
        pieces differ (the first few named), then what to do.

        Example:
            >>> DatasetSpaces().note() is None
            True
        """
        if not self._found:
            return None
        first, names = self._found[0], self._found[1:]
        if not self._others:
            return f"{first}; {ADVICE}"
        shown = ", ".join(names) + (", ..." if self._others > len(names) else "")
        many = "pieces hold" if self._others > 1 else "piece holds"
        return f"{first}; {self._others} more {many} other spaces too ({shown}); {ADVICE}"

    def _what(self, episode: SingleAgentEpisode, where: str) -> str | None:
        found = []
        for kind in _KINDS:
            space = getattr(episode, f"{kind}_space", None)
            if space is None:
                continue
            first, first_where = self._first.setdefault(kind, (space, where))
            if not _same_space(first, space):
                found.append(
                    f"its {kind} space {short_repr(space, 200)} is not the dataset's "
                    f"{short_repr(first, 200)} (that of {first_where}, the first piece with one)"
                )
        if not found:
            return None
        return f"{where} (episode {short_repr(episode.id_)}): {' and '.join(found)}"


def _same_space(first: Any, space: Any) -> bool:
    """Gymnasium's ``==``; a comparison that fails (an odd subclass) counts as different."""
    try:
        return bool(first == space)
    except Exception:  # noqa: BLE001 - a space that cannot be compared is no match
        return False
