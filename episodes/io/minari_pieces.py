"""The episodes an export to Minari writes: pieces joined, in the order the dataset lists them.

A Minari dataset numbers its episodes 0, 1, ... (our ids have no place there), so the order
they are written in is the only link back to the source: it is the order ``dataset_info``
(and ``load_episode``'s grouping) lists episodes, each where its first piece was written,
not the order their last pieces complete them in. The export holds every episode's Minari
buffers until it writes them anyway, so they are put in that order then: no second read.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> a = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
    ...                        len_lookback_buffer=0)
    >>> a_end = a.cut(); a_end.add_env_step(2, 1, 1.0, terminated=True)
    >>> b = SingleAgentEpisode("b", observations=[5, 6], actions=[1], rewards=[0.0],
    ...                        terminated=True, len_lookback_buffer=0)
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([a, b, a_end])  # "b" completes first, "a" was begun first
    >>> [(rank, e.id_, len(e)) for rank, e in whole_episodes(path)]
    [(1, 'b', 1), (0, 'a', 2)]
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import CorruptDatasetError
from episodes.io.reader import dataset_info, read_episodes
from episodes.io.values import concat_piece, id_key

__all__ = ["whole_episodes"]


def whole_episodes(src: str | os.PathLike[str]) -> Iterator[tuple[int, SingleAgentEpisode]]:
    """``(rank, episode)`` for each episode of ``src``, pieces joined, as its last piece is read.

    ``rank`` is the episode's place in ``dataset_info(src).episodes`` (first pieces' order);
    pieces are held until their episode is complete, and every checksum is verified.

    Raises:
        CorruptDatasetError: The pieces of an episode do not join.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> [(rank, e.id_) for rank, e in whole_episodes(path)]
        [(0, 'a')]
    """
    pieces_of = {id_key(e.id_): e.num_chunks for e in dataset_info(src).episodes}
    rank = {key: r for r, key in enumerate(pieces_of)}
    pending: dict[str, list[SingleAgentEpisode]] = {}
    for piece in read_episodes(src, verify=True):  # no damaged data into another format
        key = id_key(piece.id_)
        pending.setdefault(key, []).append(piece)
        if len(pending[key]) == pieces_of.get(key, 1):
            # (t_started, t), as load_episode: a piece without steps goes first where it is.
            parts = sorted(pending.pop(key), key=lambda p: (p.t_started, p.t))
            episode = parts[0]
            for part in parts[1:]:
                try:  # one id_key, not always an equal id (NaN): concat_piece
                    concat_piece(episode, part)
                except (AssertionError, ValueError) as err:
                    raise CorruptDatasetError(
                        f"pieces of episode {piece.id_!r} do not join at t={part.t_started}: {err}"
                    ) from err
            yield rank.get(key, len(rank)), episode
