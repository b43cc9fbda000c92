"""Loading many episodes by id at once: the dataset's own work done once, not once per id.

:func:`load_episodes` gives what ``[load_episode(path, i) for i in ids]`` gives, episode for
episode, but reads the manifest once, matches every id in one pass over it, and (format v2)
opens each shard once, reading the pieces in the order they are stored. ``load_episode`` is
``load_episodes`` of one id, so the two share their rules: pieces joined in ``(t_started, t)``
order, ids compared by :func:`~episodes.io.values.id_key`, the same errors.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "abc"])
    >>> [ep.id_ for ep in load_episodes(path, ["c", "a", "c"])]
    ['c', 'a', 'c']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from episodes.episode import SingleAgentEpisode
from episodes.io.encoding import numpy_episode
from episodes.io.errors import CorruptDatasetError, EpisodeNotFoundError
from episodes.io.format import ManifestEntry, check_format
from episodes.io.index_cache import LentDataset, lent_dataset, v1_pieces
from episodes.io.piece_dtypes import widen_pieces
from episodes.io.reader import load_chunk, read_flags
from episodes.io.relist_hint import raise_hinted
from episodes.io.shards import is_v2
from episodes.io.values import concat_piece, id_key

if TYPE_CHECKING:  # format v2 needs pyarrow: imported where a v2 dataset is read
    from episodes.io.shard_reader import Dataset

__all__ = ["load_episodes", "v1_episodes", "v2_episodes"]


def load_episodes(
    path: str | os.PathLike[str],
    ids: Iterable[Any],
    *,
    numpy: bool | None = None,
    verify: bool = False,
) -> list[SingleAgentEpisode]:
    """Loads the episodes ``ids`` (v1 or v2), each joined as ``load_episode`` joins it.

    Returns one episode per id, in the order of ``ids``: the same as
    ``[load_episode(path, i, numpy=numpy, verify=verify) for i in ids]``, but the manifest is
    read once and, in format v2, each shard opened once (the pieces are read in the order they
    are stored, whatever the order of ``ids``). An id given twice gives two episodes that
    share nothing, as two ``load_episode`` calls do. Every id is looked up before any piece
    is read, so an unknown one raises before anything is loaded. Time grows with the
    manifest (read once) and the pieces of the ids asked for, not with their product.

    Args:
        path: The dataset directory.
        ids: The episode ids (a list, tuple or other iterable of ids; read once). Matched
            as ``load_episode`` matches one: by value and type, a numpy scalar as the Python
            value it holds, an id holding a NaN found.
        numpy: ``None`` joins the pieces as stored; ``True`` numpys each joined episode;
            ``False`` list mode.
        verify: Also check the CRC-32 of every file read.

    Raises:
        EpisodeNotFoundError: An id has no committed piece (the first such id in ``ids``).
        CorruptDatasetError: The pieces of an id do not join, or a piece is damaged (of
            several such ids, the one whose first piece is stored first raises in v2).
        DatasetError: (a subclass) for a missing, corrupt, unsafe or unsupported dataset.
        TypeError: ``ids`` is one string, a 0-d array or not iterable (pass ``[id_]``),
            ``numpy`` is not None, True or False, or ``verify`` is no bool.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, load_episode
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 2.0, terminated=True)
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([nxt, SingleAgentEpisode("b", observations=[5]), ep])
        >>> eps = load_episodes(path, ["a", "b"])
        >>> [len(e) for e in eps], eps[0].get_observations(), eps[0] == load_episode(path, "a")
        ([2, 0], [0, 1, 2], True)
        >>> load_episodes(path, "a")
        Traceback (most recent call last):
        ...
        TypeError: ids must be a collection of ids, got the single id 'a': pass ['a']
    """
    # Iterated, "e1" would ask for ids "e" and "1"; an int id is not iterable at all.
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(
            f"ids must be a collection of ids, got the single id {ids!r}: pass [{ids!r}]"
        )
    if getattr(ids, "ndim", None) == 0:  # a 0-d array or tensor: __iter__ that raises
        one = ids.item() if hasattr(ids, "item") else ids
        raise TypeError(
            f"ids must be a collection of ids, got a 0-d array holding the single id {one!r}: "
            f"pass [{one!r}]"
        )
    numpy, verify = read_flags(numpy, verify)
    wanted = list(ids)
    if is_v2(Path(path)):
        try:
            return v2_episodes(path, wanted, numpy=numpy, verify=verify)
        except (CorruptDatasetError, EpisodeNotFoundError) as err:
            raise_hinted(err, path)
            raise
    return v1_episodes(path, wanted, numpy=numpy, verify=verify)


def v1_episodes(
    path: str | os.PathLike[str], ids: list[Any], *, numpy: bool | None, verify: bool
) -> list[SingleAgentEpisode]:
    """:func:`load_episodes` for a format v1 dataset (no hint about ``unlisted/``).

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
        >>> [e.id_ for e in v1_episodes(path, ["b", "a"], numpy=None, verify=False)]
        ['b', 'a']
    """
    # Absolute: chunks are read lazily, after the caller may have changed directory.
    root = Path(path).absolute()
    check_format(root)
    # Parsed once while the manifest's bytes stay the same (episodes.io.index_cache).
    by_id = v1_pieces(root)
    for id_ in ids:
        if not by_id.get(id_key(id_)):
            raise EpisodeNotFoundError(f"{root} holds no episode with id {id_!r}")
    return [_v1_joined(root, id_, list(by_id[id_key(id_)]), numpy, verify) for id_ in ids]


def _v1_joined(
    root: Path, id_: Any, entries: list[ManifestEntry], numpy: bool | None, verify: bool
) -> SingleAgentEpisode:
    # (t_started, t): a piece without steps goes before the one that starts where it is.
    mine = sorted(entries, key=lambda e: (e.t_started, e.t))
    # numpy=True numpys the joined episode, not each piece: a piece's own dtypes (int rewards
    # before a piece of float ones) would refuse steps the whole episode's column takes.
    as_stored = None if numpy else numpy
    pieces: Iterator[SingleAgentEpisode] = (
        load_chunk(root, entry, numpy=as_stored, verify=verify) for entry in mine
    )
    if numpy:  # each column in the dtype the whole episode's values take: all read first
        pieces = iter(widen_pieces(list(pieces)))
    episode = next(pieces)
    for entry, chunk in zip(mine[1:], pieces, strict=True):
        try:  # the pieces share an id_key, not always an equal id (NaN): concat_piece
            concat_piece(episode, chunk)
        except (AssertionError, ValueError) as err:
            raise CorruptDatasetError(
                f"chunks of episode {id_!r} do not join at t={entry.t_started} "
                f"({entry.chunk}): {err}"
            ) from err
    return numpy_episode(episode, f"{root}: episode {id_!r}") if numpy else episode


def v2_episodes(
    path: str | os.PathLike[str], ids: list[Any], *, numpy: bool | None, verify: bool
) -> list[SingleAgentEpisode]:
    """:func:`load_episodes` for a format v2 dataset (no hint about ``unlisted/``).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
        >>> [e.id_ for e in v2_episodes(path, ["b", "a"], numpy=None, verify=False)]
        ['b', 'a']
    """
    from episodes.io.shard_reader import Dataset

    if verify:  # every byte is checked anyway: nothing to keep
        with Dataset(path, verify=True) as ds:
            return _v2_read(path, LentDataset(ds), ids, numpy)
    # The same Dataset, its shards open, while nothing changed (episodes.io.index_cache).
    with lent_dataset(path) as lent:
        return _v2_read(path, lent, ids, numpy)


def _v2_read(
    path: str | os.PathLike[str], lent: LentDataset, ids: list[Any], numpy: bool | None
) -> list[SingleAgentEpisode]:
    ds = lent.ds
    groups = lent.pieces(ids)
    for id_ in ids:
        if not groups[id_key(id_)]:
            raise EpisodeNotFoundError(f"{path} holds no episode with id {id_!r}")
    out: list[SingleAgentEpisode | None] = [None] * len(ids)
    lent.before_reading(i for id_ in ids for i in groups[id_key(id_)])
    # In storage order (of each episode's first piece): a shard is opened once, however
    # many shards there are and in whatever order the ids come.
    firsts = [groups[id_key(id_)][0] for id_ in ids]
    for k in sorted(range(len(ids)), key=firsts.__getitem__):
        out[k] = _v2_joined(ds, ids[k], groups[id_key(ids[k])], numpy)
    lent.after_reading()
    return [episode for episode in out if episode is not None]


def _v2_joined(ds: Dataset, id_: Any, pieces: list[int], numpy: bool | None) -> SingleAgentEpisode:
    rows = ds.summaries
    # (t_started, t): a piece without steps goes before the one that starts where it is.
    mine = sorted(pieces, key=lambda i: (rows[i].t_started, rows[i].t))
    # numpy=True numpys the joined episode, not each piece (see _v1_joined).
    as_stored = None if numpy else numpy
    read: Iterator[SingleAgentEpisode] = (ds.episode(i, numpy=as_stored) for i in mine)
    if numpy:  # each column in the dtype the whole episode's values take: all read first
        read = iter(widen_pieces(list(read)))
    episode = next(read)
    for i, piece in zip(mine[1:], read, strict=True):
        try:  # the pieces share an id_key, not always an equal id (NaN): concat_piece
            concat_piece(episode, piece)
        except (AssertionError, ValueError) as err:
            raise CorruptDatasetError(
                f"pieces of episode {id_!r} do not join at t={rows[i].t_started}: {err}"
            ) from err
    return numpy_episode(episode, f"{ds.root}: episode {id_!r}") if numpy else episode
