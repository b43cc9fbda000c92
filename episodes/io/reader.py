"""Reading datasets: stream episodes, load one episode by id, summarise a dataset.

Reading never unpickles and never runs code from the files: ``.npy`` headers are parsed by
numpy's literal-only parser, object dtypes are refused before any data is read, JSON is parsed
with :mod:`json`, and every path is checked to stay inside the dataset. Large arrays are
memory-mapped copy-on-write (the file never changes; writes stay in memory), a bounded number
at once (:mod:`episodes.io.leaf_maps`). Every problem raises a
:class:`~episodes.io.errors.DatasetError`.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import EpisodeWriter
    >>> path = tempfile.mkdtemp()
    >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[2.0],
    ...                         len_lookback_buffer=0)
    >>> with EpisodeWriter(path) as w:
    ...     _ = w.write(ep)
    >>> load_episode(path, "a") == ep, dataset_info(path).num_steps
    (True, 1)
"""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsIndex

import gymnasium as gym
import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag, as_int
from episodes.io.encoding import decode_episode
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    EpisodeNotFoundError,
    UnsafeDataError,
    stat_or_none,
)
from episodes.io.format import (
    FILE_NAME,
    FORMAT_VERSION,
    MAX_META_BYTES,
    META_FILE,
    ManifestEntry,
    check_format,
    check_inside,
    chunk_path,
    parse_json,
    read_regular_file,
)
from episodes.io.npy_read import load_array
from episodes.io.relist_hint import hinted_reads, raise_hinted
from episodes.io.shards import is_v2
from episodes.io.v1_manifest import read_manifest
from episodes.io.values import (
    SameIds,
    decode_value,
    id_key,
)
from episodes.spaces import space_from_dict
from episodes.structs import short_repr

__all__ = [
    "DatasetInfo",
    "EpisodeSummary",
    "dataset_info",
    "iter_chunks",
    "load_chunk",
    "load_episode",
    "printable",
    "read_episodes",
    "read_flags",
]

PathLike = str | os.PathLike[str]
_FILE_KEYS = ("size", "crc32", "hcrc32")


def iter_chunks(path: PathLike) -> tuple[Path, list[ManifestEntry], bool]:
    """Checks the dataset and returns ``(root, committed manifest entries, torn_tail)``.

    Example:
        >>> iter_chunks("/nonexistent")
        Traceback (most recent call last):
        ...
        episodes.io.errors.NotADatasetError: /nonexistent does not exist
    """
    # Absolute: chunks are read lazily, after the caller may have changed directory.
    root = Path(path).absolute()
    check_format(root)
    entries, _, torn = read_manifest(root)
    return root, entries, torn


def printable(value: object) -> str:
    r"""``str(value)`` with control characters escaped: a dataset's string in one safe line.

    Example:
        >>> print(printable("CartPole-v1\x1b[2K\nok"))
        CartPole-v1\x1b[2K\nok
    """
    return "".join(ascii(c)[1:-1] if unicodedata.category(c)[0] == "C" else c for c in str(value))


def read_flags(numpy: Any, verify: Any) -> tuple[bool | None, bool]:
    """The readers' ``numpy`` (None, True or False) and ``verify`` (a bool), checked.

    Numpy booleans pass, as plain bools. Called before anything is read.

    Raises:
        TypeError: either is anything else (``"no"`` would convert, ``[]`` would not).

    Example:
        >>> read_flags(None, np.True_)
        (None, True)
        >>> read_flags("no", False)
        Traceback (most recent call last):
        ...
        TypeError: numpy must be None, True or False, got str ('no')
    """
    if numpy is not None and not isinstance(numpy, (bool, np.bool_)):
        raise TypeError(
            f"numpy must be None, True or False, got {type(numpy).__name__} ({numpy!r})"
        )
    return None if numpy is None else as_flag(numpy, "numpy"), as_flag(verify, "verify")


def read_episodes(
    path: PathLike,
    *,
    ids: Iterable[Any] | None = None,
    start: SupportsIndex | None = None,
    stop: SupportsIndex | None = None,
    numpy: bool | None = None,
    verify: bool = False,
) -> Iterator[SingleAgentEpisode]:
    """Streams the committed chunks of a dataset as episodes, one at a time.

    The manifest is read once, when this is called; chunks committed later are not seen.

    Args:
        path: The dataset directory.
        ids: Only chunks of these episode ids.
        start: First chunk (manifest order, Python slice semantics), applied before ``ids``.
        stop: End of the chunk range (exclusive).
        numpy: ``None`` returns each chunk as stored; ``True`` numpy'd; ``False`` list mode.
        verify: Also check every file's CRC-32 (reads all data; off by default).

    Raises:
        DatasetError: (a subclass) for a missing, corrupt, unsafe or unsupported dataset.
            Dataset-level problems raise here; a bad chunk raises when it is reached.
        TypeError: ``ids`` is one string (a collection of ids is meant), ``start`` or
            ``stop`` is no int (``True`` or ``1.0`` too, as ``Dataset.episode`` refuses them),
            ``numpy`` is not None, True or False, or ``verify`` is no bool.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write_many(SingleAgentEpisode(str(i), observations=[i]) for i in range(4))
        >>> [ep.id_ for ep in read_episodes(path, start=1, stop=3)]
        ['1', '2']
    """
    # Iterated, "e1" would ask for ids "e" and "1"; an int id is not iterable at all. (A
    # tuple is a collection of ids here, as a list is.)
    if isinstance(ids, (str, bytes)) or (ids is not None and not hasattr(ids, "__iter__")):
        raise TypeError(
            f"ids must be a collection of ids, got the single id {ids!r}: pass [{ids!r}]"
        )
    start, stop = (
        None if x is None else as_int(x, what=n) for x, n in ((start, "start"), (stop, "stop"))
    )
    numpy, verify = read_flags(numpy, verify)
    if is_v2(Path(path)):
        from episodes.io.v2_read import read_episodes_v2

        try:
            episodes = read_episodes_v2(
                path, ids=ids, start=start, stop=stop, numpy=numpy, verify=verify
            )
        except (CorruptDatasetError, EpisodeNotFoundError) as err:
            raise_hinted(err, path)
            raise
        return hinted_reads(episodes, path)
    root, entries, _ = iter_chunks(path)
    selected = entries[slice(start, stop)]
    if ids is not None:
        wanted = {id_key(x) for x in ids}
        selected = [e for e in selected if id_key(_entry_id(e)) in wanted]
    return _stream(root, selected, numpy, verify)


def _stream(
    root: Path, entries: list[ManifestEntry], numpy: bool | None, verify: bool
) -> Iterator[SingleAgentEpisode]:
    same_ids = SameIds()
    for entry in entries:
        yield same_ids.of(load_chunk(root, entry, numpy=numpy, verify=verify))


def load_episode(
    path: PathLike, id_: Any, *, numpy: bool | None = None, verify: bool = False
) -> SingleAgentEpisode:
    """Loads every chunk of episode ``id_`` and joins them with ``concat_episode``.

    Raises:
        EpisodeNotFoundError: No committed chunk has this id.
        CorruptDatasetError: The chunks do not join (gaps, overlaps, a done chunk in between).
        TypeError: ``numpy`` is not None, True or False, or ``verify`` is no bool.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> ep = SingleAgentEpisode("e"); ep.add_env_reset(0); ep.add_env_step(1, 0, 1.0)
        >>> nxt = ep.cut(); nxt.add_env_step(2, 1, 1.0)
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write_many([ep, nxt])
        >>> len(load_episode(path, "e"))
        2
    """
    numpy, verify = read_flags(numpy, verify)
    # One code path with load_episodes: the same pieces, joins and errors for one id or many.
    from episodes.io.episode_loads import load_episodes

    return load_episodes(path, [id_], numpy=numpy, verify=verify)[0]


def _entry_id(entry: ManifestEntry) -> Any:
    return decode_value(entry.id_, blob=None, where=f"manifest id of {entry.chunk}")


# ------------------------------------------------------------------------------ one chunk
def load_chunk(
    root: Path, entry: ManifestEntry, *, numpy: bool | None = None, verify: bool = False
) -> SingleAgentEpisode:
    """Loads and checks one committed chunk (see :func:`read_episodes` for the arguments).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write(SingleAgentEpisode("x", observations=[0]))
        >>> root, entries, _ = iter_chunks(path)
        >>> load_chunk(root, entries[0], verify=True).id_
        'x'
    """
    numpy, verify = read_flags(numpy, verify)
    where = entry.chunk
    chunk_dir, meta, _ = _read_meta(root, entry)
    files = _files_table(meta, where)
    loaded: dict[str, np.ndarray] = {}

    def load(name: str) -> np.ndarray:
        if name not in loaded:
            loaded[name] = load_array(root, chunk_dir, name, files, verify, where)
        return loaded[name]

    if verify:
        for name in files:
            load(name)
    episode = decode_episode(meta, load, where=where, numpy=numpy)
    if episode.t_started != entry.t_started or episode.t != entry.t:
        raise CorruptDatasetError(f"{where}: t_started/t disagree with the manifest")
    # A v1 manifest line has no checksum of its own: what it says is checked against the chunk.
    if (episode.is_terminated, episode.is_truncated) != (entry.terminated, entry.truncated):
        raise CorruptDatasetError(f"{where}: terminated/truncated disagree with the manifest")
    if id_key(episode.id_) != id_key(_entry_id(entry)):  # NaN ids are equal here
        raise CorruptDatasetError(f"{where}: episode id disagrees with the manifest")
    return episode


def chunk_nbytes(root: Path, entry: ManifestEntry) -> int:
    """The bytes of a chunk's files as its ``meta.json`` records them (what ``nbytes`` says).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write(SingleAgentEpisode("x", observations=[0]))
        >>> root, entries, _ = iter_chunks(path)
        >>> chunk_nbytes(root, entries[0]) == entries[0].nbytes
        True
    """
    _, meta, size = _read_meta(root, entry)
    return size + sum(info["size"] for info in _files_table(meta, entry.chunk).values())


def read_chunk_meta(root: Path, entry: ManifestEntry) -> tuple[Path, Any]:
    """Reads a committed chunk's ``meta.json``, checked against the manifest's SHA-256.

    Returns:
        ``(chunk directory, parsed meta)``; the meta's fields are not checked yet.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write(SingleAgentEpisode("x", observations=[0]))
        >>> root, entries, _ = iter_chunks(path)
        >>> read_chunk_meta(root, entries[0])[1]["id"]
        'x'
    """
    chunk_dir, meta, _ = _read_meta(root, entry)
    return chunk_dir, meta


def _is_dir(path: Path) -> bool:
    """``path.is_dir()``, but no permission (or an I/O error) is ``DatasetIOError``."""
    st = stat_or_none(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def _read_meta(root: Path, entry: ManifestEntry) -> tuple[Path, Any, int]:
    where = entry.chunk
    chunk_dir = chunk_path(root, entry.chunk)
    if not _is_dir(chunk_dir):
        raise CorruptDatasetError(f"{where}: listed in the manifest but missing on disk")
    meta_path = chunk_dir / META_FILE
    check_inside(root, meta_path)
    raw = read_regular_file(meta_path, f"{where}/{META_FILE}", MAX_META_BYTES)
    if hashlib.sha256(raw).hexdigest() != entry.meta_sha256:
        raise CorruptDatasetError(
            f"{where}/{META_FILE} does not match its manifest checksum (modified or corrupted)"
        )
    return chunk_dir, parse_json(raw, f"{where}/{META_FILE}"), len(raw)


def _files_table(meta: Any, where: str) -> dict[str, dict[str, int]]:
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict):
        raise CorruptDatasetError(f"{where}/{META_FILE} has no 'files' table")
    for name, info in files.items():
        if not FILE_NAME.match(name):
            raise UnsafeDataError(f"{where}: file name {name!r} is not a plain .npy name")
        # crc32 is null for a chunk written with checksums=False.
        # hcrc32 (the header's CRC-32) is absent in chunks written before it existed.
        ok = isinstance(info, dict) and all(
            (k != "size" and v is None)
            or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
            for k, v in ((k, info.get(k, None if k == "hcrc32" else -1)) for k in _FILE_KEYS)
        )
        if not ok:
            raise CorruptDatasetError(f"{where}: malformed 'files' entry for {name}")
    return files


# ---------------------------------------------------------------------------- dataset info
@dataclass
class EpisodeSummary:
    """One episode of a dataset (all its chunks), from the manifest alone.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> ep = SingleAgentEpisode(
        ...     "a", observations=[0, 1], actions=[1], rewards=[2.0], terminated=True,
        ...     len_lookback_buffer=0,
        ... )
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path) as writer:
        ...     _ = writer.write(ep)
        >>> dataset_info(path).episodes
        [EpisodeSummary(id_='a', num_chunks=1, length=1, ret=2.0, terminated=True, truncated=False)]
    """

    id_: Any
    num_chunks: int
    length: int
    ret: float
    terminated: bool
    truncated: bool


@dataclass
class DatasetInfo:
    """Summary of a dataset, computed from the manifest (and a few files for the spaces).

    The spaces come from the first chunk's ``meta.json`` (v1) or, in v2, each from the first
    piece that has one, looking no further than the first piece with steps (shard indexes).

    Attributes:
        path: The dataset directory.
        version: The format version.
        num_chunks: Committed chunks.
        num_steps: Steps over all chunks (lookback excluded).
        nbytes: Bytes of all committed chunk files (v1) or shard files (v2).
        episodes: One summary per episode id, in order of first appearance.
        observation_space: As above (None for an empty dataset).
        action_space: As above.
        torn_manifest: Whether a torn final manifest line (a killed writer) was ignored.
        num_shards: Shards (format v2; 0 for v1).
        metadata: What the dataset is (env, seeds, policy...; v2, None for v1).
        created: Creation time, UTC ISO 8601 (v2).
        library_version: Version of the library that created the dataset (v2).

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[1, 0],
        ...                                rewards=[1.0, 0.5], len_lookback_buffer=0))
        >>> info = dataset_info(path)
        >>> info.version, info.num_chunks, info.num_steps, info.num_shards, info.episodes[0].ret
        (2, 1, 2, 1, 1.5)
    """

    path: str
    version: int
    num_chunks: int
    num_steps: int
    nbytes: int
    episodes: list[EpisodeSummary] = field(default_factory=list)
    observation_space: gym.Space[Any] | None = None
    action_space: gym.Space[Any] | None = None
    torn_manifest: bool = False
    num_shards: int = 0
    metadata: dict[str, Any] | None = None
    created: str | None = None
    library_version: str | None = None

    def __repr__(self) -> str:
        # A summary: one EpisodeSummary per episode would be MBs for a large dataset.
        return (
            f"DatasetInfo(path={short_repr(self.path)}, version={self.version}, "
            f"num_episodes={len(self.episodes)}, num_chunks={self.num_chunks}, "
            f"num_steps={self.num_steps}, nbytes={self.nbytes}, num_shards={self.num_shards}, "
            f"observation_space={short_repr(self.observation_space, 120)}, "
            f"action_space={short_repr(self.action_space, 120)}, "
            f"torn_manifest={self.torn_manifest}, metadata={short_repr(self.metadata, 120)})"
        )

    @property
    def num_episodes(self) -> int:
        """Number of distinct episode ids.

        Example:
            >>> first = EpisodeSummary("a", 2, 3, 1.0, False, False)
            >>> second = EpisodeSummary("b", 1, 1, 0.0, True, False)
            >>> DatasetInfo("d", 1, 3, 4, 0, [first, second]).num_episodes
            2
        """
        return len(self.episodes)

    @property
    def num_done(self) -> int:
        """Episodes whose last chunk is terminated or truncated.

        Example:
            >>> done = EpisodeSummary("a", 1, 1, 0.0, True, False)
            >>> running = EpisodeSummary("b", 1, 1, 0.0, False, False)
            >>> DatasetInfo("d", 1, 2, 2, 0, [done, running]).num_done
            1
        """
        return sum(e.terminated or e.truncated for e in self.episodes)


def summaries_of(pieces: Iterable[tuple[Any, Any]]) -> list[EpisodeSummary]:
    """One summary per episode of ``(decoded id, manifest row)`` pieces, in first-seen order.

    Ids are grouped as :func:`load_episode` groups them (equal ids, whatever their JSON form);
    the flags are those of the piece the joined episode ends with: the latest
    ``(t_started, t)``, the later piece in the manifest on a tie (``load_episode``'s order).

    Example:
        >>> from episodes.io.shards import EpisodeRow
        >>> end = EpisodeRow("a", 3, 3, 0.0, True, False)  # no steps; written first
        >>> start = EpisodeRow("a", 0, 3, 2.0, False, False)
        >>> summaries_of([(row.id_, row) for row in (end, start)])
        [EpisodeSummary(id_='a', num_chunks=2, length=3, ret=2.0, terminated=True, truncated=False)]
    """
    by_id: dict[Any, EpisodeSummary] = {}
    last: dict[Any, tuple[int, int, int]] = {}
    for i, (id_, row) in enumerate(pieces):
        key = id_key(id_)
        summary = by_id.get(key)
        if summary is None:
            summary = by_id[key] = EpisodeSummary(id_, 0, 0, 0.0, False, False)
        summary.num_chunks += 1
        summary.length += row.t - row.t_started
        summary.ret += row.ret
        order = (row.t_started, row.t, i)
        if key not in last or order > last[key]:
            last[key] = order
            summary.terminated, summary.truncated = row.terminated, row.truncated
    return list(by_id.values())


def dataset_info(path: PathLike) -> DatasetInfo:
    """Summarises a dataset: chunk/episode/step counts, per-episode returns and lengths, spaces.

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> EpisodeWriter(path).close()
        >>> dataset_info(path).num_chunks
        0
    """
    if is_v2(Path(path)):
        from episodes.io.v2_read import dataset_info_v2

        try:
            return dataset_info_v2(path)
        except CorruptDatasetError as err:
            raise_hinted(err, path)
            raise
    root, entries, torn = iter_chunks(path)
    info = DatasetInfo(
        path=str(Path(path)),  # as given (root is absolute)
        version=FORMAT_VERSION,
        num_chunks=len(entries),
        num_steps=sum(e.length for e in entries),
        nbytes=sum(e.nbytes for e in entries),
        episodes=summaries_of([(_entry_id(e), e) for e in entries]),
        torn_manifest=torn,
    )
    for entry in entries:
        # A chunk deleted from disk is damage even when only the manifest is summarised.
        if not _is_dir(chunk_path(root, entry.chunk)):
            raise CorruptDatasetError(f"{entry.chunk}: listed in the manifest but missing on disk")
    if entries:
        _, meta = read_chunk_meta(root, entries[0])
        if not isinstance(meta, dict):
            raise CorruptDatasetError(f"{entries[0].chunk}/{META_FILE} must hold an object")
        info.observation_space = _space(meta.get("observation_space"), entries[0].chunk)
        info.action_space = _space(meta.get("action_space"), entries[0].chunk)
    return info


def _space(value: Any, where: str) -> gym.Space[Any] | None:
    try:
        return space_from_dict(value)
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, AssertionError, RecursionError) as err:
        raise CorruptDatasetError(f"{where}/{META_FILE} holds an invalid space: {err}") from err
