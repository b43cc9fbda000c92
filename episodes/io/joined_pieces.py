"""``merge(..., join_pieces=True)``'s pieces: each id's pieces joined into one, an id at a time.

A continuing task written chunk by chunk for hours leaves thousands of pieces of one id, and
``load_episode`` reads and joins every one of them on each load. A copy that stores each id
as one piece makes the later loads read one piece. The pieces of an id are read and joined as
``load_episode`` joins them (in ``(t_started, t)`` order, the earlier-stored first on a tie,
with ``concat_episode``), across all sources, so the joined piece loads back as the source's
id did; only one id's pieces are held at a time.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
    ...                         len_lookback_buffer=0)
    >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 2.0)
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([ep, nxt])
    >>> [(len(e), walls[0] <= walls[1]) for e, walls in joined_pieces([path], [2])]
    [(2, True)]
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import CorruptDatasetError
from episodes.io.format import ManifestEntry
from episodes.io.quarantine import warn_quarantined
from episodes.io.reader import iter_chunks, load_chunk
from episodes.io.shard_reader import Dataset
from episodes.io.shards import is_v2
from episodes.io.v2_read import piece_walls
from episodes.io.values import concat_piece, decode_value, id_key

__all__ = ["joined_pieces"]

Walls = tuple[float | None, float | None]
# (t_started, t, source, manifest position): the order load_episode joins an id's pieces in.
_Piece = tuple[int, int, int, int]


def joined_pieces(
    sources: Sequence[str | os.PathLike[str]], stops: Sequence[int | None]
) -> Iterator[tuple[SingleAgentEpisode, Walls]]:
    """Each id of ``sources`` (v1 or v2) as one joined piece, with its wall times.

    Ids come in the order their first piece is stored (the first source first); each source
    gives its first ``stops[k]`` pieces (all for None: the pieces a caller judged). Checksums
    are verified as the pieces are read. The walls are the first ``wall_start`` and the last
    ``wall_end`` the id's pieces store, in time order (None where none stores one).

    Raises:
        CorruptDatasetError: An id's pieces do not join (as ``load_episode`` refuses them).

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "aba"])
        >>> [e.id_ for e, _ in joined_pieces([path], [2])]
        ['a', 'b']
    """
    readers: list[_Source] = []
    try:
        for src, stop in zip(sources, stops, strict=True):
            readers.append(_Source(src, stop))
        groups: dict[str, tuple[Any, list[_Piece]]] = {}  # in the order of ids' first pieces
        for k, reader in enumerate(readers):
            for i, (id_, t_started, t) in enumerate(reader.rows):
                groups.setdefault(id_key(id_), (id_, []))[1].append((t_started, t, k, i))
        for id_, pieces in groups.values():
            yield _joined(readers, id_, sorted(pieces))
    finally:  # the shards' maps and descriptors go now, not when the generator is collected
        for reader in readers:
            reader.close()


def _joined(
    readers: list[_Source], id_: Any, pieces: list[_Piece]
) -> tuple[SingleAgentEpisode, Walls]:
    starts: list[float] = []
    ends: list[float] = []
    episode: SingleAgentEpisode | None = None
    for t_started, _, k, i in pieces:
        piece, (start, end) = readers[k].read(i)
        starts += [] if start is None else [start]
        ends += [] if end is None else [end]
        if episode is None:
            episode = piece
            continue
        try:  # the pieces share an id_key, not always an equal id (NaN): concat_piece
            concat_piece(episode, piece)
        except (AssertionError, ValueError) as err:
            raise CorruptDatasetError(
                f"pieces of episode {id_!r} do not join at t={t_started} ({readers[k].path}): {err}"
            ) from err
    assert episode is not None  # every group holds a piece
    return episode, (starts[0] if starts else None, ends[-1] if ends else None)


class _Source:
    """One source's pieces: ``(id, t_started, t)`` in manifest order, each read by position."""

    def __init__(self, path: str | os.PathLike[str], stop: int | None):
        self.path = path
        self._ds: Dataset | None = None
        self._entries: list[ManifestEntry] = []
        if is_v2(Path(path)):
            warn_quarantined(path)  # as the other copies: a quarantined shard is not copied
            self._ds = Dataset(path, verify=True)
            summaries = self._ds.summaries[:stop]
            self.rows = [
                (decode_value(s.id_, blob=None, where="manifest id"), s.t_started, s.t)
                for s in summaries
            ]
        else:
            self._root, entries, _ = iter_chunks(path)
            self._entries = entries[:stop]
            self.rows = [
                (
                    decode_value(e.id_, blob=None, where=f"manifest id of {e.chunk}"),
                    e.t_started,
                    e.t,
                )
                for e in self._entries
            ]

    def close(self) -> None:
        if self._ds is not None:
            self._ds.close()

    def read(self, i: int) -> tuple[SingleAgentEpisode, Walls]:
        if self._ds is None:  # a v1 chunk stores no wall time
            return load_chunk(self._root, self._entries[i], verify=True), (None, None)
        return self._ds.episode(i), piece_walls(self._ds, i)
