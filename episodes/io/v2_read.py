"""The v1 reading functions (``read_episodes``, ``load_episode``, ``dataset_info``) for v2.

:mod:`episodes.io.reader` sends v2 datasets here, so one API reads both versions.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter, dataset_info
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[2.0],
    ...                             len_lookback_buffer=0))
    >>> info = dataset_info(path)
    >>> info.version, info.num_steps, info.episodes[0].ret
    (2, 1, 2.0)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    UnsupportedVersionError,
    stat_listed_file,
    stat_or_none,
)
from episodes.io.open_shards import AUTO, MaxOpen
from episodes.io.reader import DatasetInfo, read_flags, summaries_of
from episodes.io.shard_reader import Dataset
from episodes.io.shards import DATA_SUFFIX, INDEX_SUFFIX, V2, shard_file
from episodes.io.values import SameIds, decode_value, id_key
from episodes.spaces import space_from_dict

__all__ = [
    "dataset_info_v2",
    "load_episode_v2",
    "piece_walls",
    "pieces_with_walls",
    "read_episodes_v2",
    "v2_dataset",
]


def _ids(ds: Dataset) -> list[Any]:
    return [decode_value(s.id_, blob=None, where="manifest id") for s in ds.summaries]


def _with_ids(ds: Dataset, indices: Iterable[int], ids: Iterable[Any]) -> list[int]:
    """The pieces among ``indices`` whose id is one of ``ids`` (as ``id_key`` compares them).

    A str id is stored as itself, so a stored str is compared as a string with the str ids
    asked for: the same answer as comparing keys, without building one per piece.
    """
    wanted = list(ids)
    keys = {id_key(x) for x in wanted}
    strs = {str(x) for x in wanted if type(x) is str or isinstance(x, np.str_)}
    # (Only a str's key starts so, unless a class is named "str": then keys are compared.)
    by_str = not any(
        id_key(x).startswith("str:")
        for x in wanted
        if not (type(x) is str or isinstance(x, np.str_))
    )
    rows = ds.summaries
    out = []
    for i in indices:
        raw = rows[i].id_
        if by_str and type(raw) is str:
            if raw in strs:
                out.append(i)
        elif id_key(decode_value(raw, blob=None, where="manifest id")) in keys:
            out.append(i)
    return out


def read_episodes_v2(
    path: str | os.PathLike[str],
    *,
    ids: Iterable[Any] | None,
    start: int | None,
    stop: int | None,
    numpy: bool | None,
    verify: bool,
) -> Iterator[SingleAgentEpisode]:
    """``read_episodes`` for a v2 dataset (episodes in manifest order).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "abc"])
        >>> eps = read_episodes_v2(path, ids=["c", "a"], start=None, stop=None, numpy=None,
        ...                        verify=False)
        >>> [e.id_ for e in eps]  # manifest order, not the order of ``ids``
        ['a', 'c']
    """
    numpy, verify = read_flags(numpy, verify)
    ds = Dataset(path, verify=verify, max_open_shards=1)
    selected = list(range(len(ds)))[slice(start, stop)]
    if ids is not None:
        # Every manifest id is decoded, those outside [start, stop) too (a bad one raises).
        matched = set(_with_ids(ds, range(len(ds)), ids))
        selected = [i for i in selected if i in matched]
    same_ids = SameIds()  # one id object per NaN-holding id, so its pieces' ids are equal
    # None: every episode, so each shard's index is parsed once, whole (see iter_episodes).
    every = None if len(selected) == len(ds) else selected
    return (same_ids.of(episode) for episode in ds.iter_episodes(every, numpy=numpy))


def pieces_with_walls(
    path: str | os.PathLike[str],
    *,
    stop: int | None,
    verify: bool,
    ids: Iterable[Any] | None = None,
) -> Iterator[tuple[SingleAgentEpisode, tuple[float | None, float | None]]]:
    """The pieces ``read_episodes(path, ids=ids, stop=stop, verify=verify)`` gives, with walls.

    With ``ids``, the pieces are picked from the manifest: no other piece is decoded, and a
    shard holding none of them is not opened (nor, with ``verify``, checked).

    Each piece comes with the ``wall_start``/``wall_end`` its index entry stores (None where
    it stores none, or no finite number), so that a copy keeps them rather than computing
    them again from its own clock (see ``DatasetWriter._write``).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "abc"])
        >>> [(e.id_, walls) for e, walls in pieces_with_walls(path, stop=2, verify=True)]
        [('a', (None, None)), ('b', (None, None))]
        >>> [e.id_ for e, _ in pieces_with_walls(path, stop=None, verify=True, ids=["c"])]
        ['c']
    """
    ds = Dataset(path, verify=verify, max_open_shards=1)
    selected: Sequence[int] = range(len(range(len(ds))[slice(None, stop)]))
    if ids is not None:
        selected = _with_ids(ds, selected, ids)  # manifest rows, as read_episodes_v2 picks
    same_ids = SameIds()  # as read_episodes_v2
    every = None if len(selected) == len(ds) else selected
    for i, episode in zip(selected, ds.iter_episodes(every)):
        yield same_ids.of(episode), piece_walls(ds, i)  # its shard still open: just read


def piece_walls(ds: Dataset, i: int) -> tuple[float | None, float | None]:
    """``wall_start``/``wall_end`` of piece ``i``'s index entry (None: none, or not finite).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> piece_walls(Dataset(path), 0)
        (None, None)
    """
    shard, j = ds.locate(i)
    entry = shard.entry_of(j)
    return _wall(entry.get("wall_start")), _wall(entry.get("wall_end"))


def _wall(value: Any) -> float | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        wall = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return wall if math.isfinite(wall) else None


def load_episode_v2(
    path: str | os.PathLike[str], id_: Any, *, numpy: bool | None, verify: bool
) -> SingleAgentEpisode:
    """``load_episode`` for a v2 dataset: every piece of ``id_`` joined in time order.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 2.0)
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([nxt, ep])
        >>> load_episode_v2(path, "a", numpy=None, verify=False).get_observations()
        [0, 1, 2]
    """
    numpy, verify = read_flags(numpy, verify)
    from episodes.io.episode_loads import v2_episodes  # it imports this module

    return v2_episodes(path, [id_], numpy=numpy, verify=verify)[0]


def dataset_info_v2(path: str | os.PathLike[str]) -> DatasetInfo:
    """``dataset_info`` for a v2 dataset (manifest, file sizes, the first shard indexes: no data).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 2.0, terminated=True)
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([ep, nxt])
        >>> dataset_info_v2(path).episodes  # the two pieces summed up as one episode
        [EpisodeSummary(id_='a', num_chunks=2, length=2, ret=3.0, terminated=True, truncated=False)]
    """
    ds = Dataset(path)
    for shard in ds.shards:
        _check_files(ds.root, shard.name, DATA_SUFFIX[shard.data_format], shard.data_size)
        _check_files(ds.root, shard.name, INDEX_SUFFIX, shard.index_size)
    info = DatasetInfo(
        path=str(Path(path)),  # as given (the reader's root is absolute)
        version=V2,
        num_chunks=len(ds),
        num_steps=sum(e.length for e in ds.summaries),
        nbytes=sum(s.nbytes for s in ds.shards),
        episodes=summaries_of(list(zip(_ids(ds), ds.summaries, strict=True))),
        torn_manifest=ds.torn_manifest,
    )
    info.num_shards = len(ds.shards)
    info.metadata = ds.metadata.to_json()
    info.created = ds.header.get("created_utc")
    info.library_version = ds.header.get("library_version")
    if len(ds):
        info.observation_space, info.action_space = _first_spaces(ds)
    return info


def v2_dataset(
    path: str | os.PathLike[str], reader: str, *, max_open_shards: MaxOpen = AUTO
) -> Dataset:
    """``Dataset(path)`` for a reader made on it; a v1 dataset is refused naming ``reader``.

    Raises:
        UnsupportedVersionError: ``path`` is a format v1 dataset (or of another version).

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> EpisodeWriter(path).close()
        >>> try:
        ...     v2_dataset(path, "TransitionDataset")
        ... except UnsupportedVersionError as err:
        ...     print(str(err).split("; ")[1].split(" (")[0])
        TransitionDataset reads v2
    """
    try:
        return Dataset(path, max_open_shards=max_open_shards)
    except UnsupportedVersionError:
        root = Path(path).absolute()
        if stat_or_none(root / "format.json") is None:
            raise  # another version's: the reader's own words
        raise UnsupportedVersionError(
            f"{root} is a format v1 dataset; {reader} reads v2 (convert it with `episodes "
            "migrate`, episodes.io.migrate; EpisodeReplayBuffer.from_dataset, read_episodes "
            "and load_episode read v1 as it is)"
        ) from None


def _first_spaces(ds: Dataset) -> list[Any]:
    """The observation space of the first piece that has one, and the action space likewise.

    From the shards' indexes: a shard is opened (its index checked, its data file's size and
    kind), but no piece is decoded. Pieces without steps stored without spaces (an episode's
    end written before its steps) are passed over, as replay passes over a chunk without them;
    the first piece with steps is the last looked at, so a dataset stored without spaces opens
    one shard, not all.
    """
    out: list[Any] = [None, None]
    for i, row in enumerate(ds.summaries):
        shard, j = ds.locate(i)
        where = f"{shard.where} episode {j}"
        meta, spaces = shard.entry_of(j)["meta"], shard.spaces  # checked when the shard opened
        for k, key in enumerate(("observation_space", "action_space")):
            if out[k] is None:
                out[k] = _space_of(meta.get(key), spaces, key, where)
        if row.length or (out[0] is not None and out[1] is not None):
            break
    return out


def _space_of(value: Any, spaces: list[Any], key: str, where: str) -> Any:
    """The space an index entry's ``{"space_ref": k}`` names (None: stored without one)."""
    ref = value.get("space_ref") if isinstance(value, dict) and len(value) == 1 else None
    if type(ref) is not int or not 0 <= ref < len(spaces):
        raise CorruptDatasetError(f"{where}: bad space reference {value!r}")
    try:
        return space_from_dict(spaces[ref])
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AssertionError, RecursionError) as e:
        raise CorruptDatasetError(f"{where}: invalid {key}: {e}") from e


def _check_files(root: Path, name: str, suffix: str, size: int) -> None:
    path = shard_file(root, name, suffix)
    stat_listed_file(path, f"shard {name}: {path.name}", size)
