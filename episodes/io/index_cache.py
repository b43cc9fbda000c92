"""What repeated ``load_episode`` calls on an unchanged dataset keep between them.

A training loop calls ``load_episode(path, id_)`` a few times a step. Each call used to parse
the whole v1 manifest, or (v2) open a fresh ``Dataset``: read, hash and decode the episode's
shard index and look the id up in every manifest row. Per process, at most
:data:`MAX_DATASETS` datasets (the most recently loaded) keep that work here:

- v1: the parsed manifest and its pieces by id, kept with the manifest's bytes. Each call still
  reads the manifest and compares every byte with the kept ones (so an appended line, a cut
  torn line or a replaced manifest is parsed anew); each chunk's ``meta.json`` is checked
  against its SHA-256 as before.
- v2: the ``Dataset`` itself, with its open shards and its pieces by id. Each call still reads
  and checks the manifest (only lines new to the process are parsed); the dataset is reused
  only if the manifest lists the very same shards. An open shard is reused only if both its
  files (index and data) have the ``lstat`` (device, inode, size, mtime and ctime to the
  nanosecond) they had when it was opened, and both were last changed at least
  :data:`SETTLED_NS` before that open: a file written again changes its ctime, which no one
  can set back, but a change within the file system's timestamp granularity of the open
  could keep the same times, so a shard that recent is opened, and its index hashed, at each
  call. Otherwise the shard is opened again, its index checked against the manifest's SHA-256.

``verify=True`` reads bypass the cache (they check every byte anyway). A dataset is lent to
one call at a time (a thread that finds it lent opens its own); a read that raises drops it;
a forked child drops what its parent kept. Nothing is unpickled: what is kept is what the
readers parse.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import EpisodeWriter
    >>> path = Path(tempfile.mkdtemp())
    >>> with EpisodeWriter(path) as w:
    ...     _ = w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "aba"])
    >>> [e.chunk[-17:-9] for e in v1_pieces(path)[id_key("a")]]
    ['00000000', '00000002']
    >>> kept_datasets() >= 1
    True
"""

from __future__ import annotations

import bisect
import os
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from episodes.io.fork_lock import ForkLock
from episodes.io.format import (
    MANIFEST_FILE,
    MAX_JSON_BYTES,
    ManifestEntry,
    check_inside,
    read_regular_file,
)
from episodes.io.kept_manifests import KeptManifests
from episodes.io.open_shards import holds_data
from episodes.io.v1_manifest import manifest_entries
from episodes.io.values import decode_value, id_key

if TYPE_CHECKING:  # format v2 needs pyarrow: imported where a v2 dataset is read
    from episodes.io.shard_reader import Dataset

__all__ = [
    "MAX_DATASETS",
    "MAX_V1_BYTES",
    "SETTLED_NS",
    "LentDataset",
    "forget_datasets",
    "kept_datasets",
    "lent_dataset",
    "v1_pieces",
]

#: Datasets per format whose parsed manifest (v1) or open ``Dataset`` (v2) a process keeps.
MAX_DATASETS = 8
#: A v1 manifest larger than this is parsed at each call, not kept.
MAX_V1_BYTES = 16 << 20
#: How long before an open a shard's files must have last changed for the open to be reused
#: (3 s: above any local file system's timestamp granularity, 2 s on FAT).
SETTLED_NS = 3_000_000_000


# ------------------------------------------------------------------------------------- v1
@dataclass(frozen=True)
class _V1:
    raw: bytes  # the whole manifest, as read
    by_id: dict[str, tuple[ManifestEntry, ...]]  # built once, never changed


_v1 = KeptManifests[_V1](MAX_DATASETS)


def v1_pieces(root: Path) -> dict[str, tuple[ManifestEntry, ...]]:
    """The committed entries of ``root/manifest.jsonl`` by ``id_key``, in manifest order.

    The same entries and errors as ``read_manifest`` (and a bad id raises as reading it
    does); kept with the manifest's bytes, and reused while the manifest's bytes are the same.
    Do not change what it returns: the next call gets the same objects.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import EpisodeWriter
        >>> path = Path(tempfile.mkdtemp())
        >>> with EpisodeWriter(path) as w:
        ...     _ = w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
        >>> sorted(v1_pieces(path)), v1_pieces(path) is v1_pieces(path)
        (["str:'a'", "str:'b'"], True)
    """
    raw = read_regular_file(root / MANIFEST_FILE, MANIFEST_FILE, MAX_JSON_BYTES)
    key = str(root)
    known = _v1.get(key)
    if known is not None and known.raw == raw:
        return known.by_id
    entries, _, _ = manifest_entries(raw)
    grouped: dict[str, list[ManifestEntry]] = {}
    for entry in entries:
        id_ = decode_value(entry.id_, blob=None, where=f"manifest id of {entry.chunk}")
        grouped.setdefault(id_key(id_), []).append(entry)
    # Tuples: the cyclic GC stops walking them (a list per id would be walked at every pass).
    by_id = {k: tuple(v) for k, v in grouped.items()}
    if len(raw) <= MAX_V1_BYTES:
        _v1.put(key, _V1(raw, by_id))
    else:
        _v1.drop(key)
    return by_id


# ------------------------------------------------------------------------------------- v2
def _same(new: Any, kept: Any) -> bool:
    """Whether a manifest's parse is the kept one: the same objects when no line changed.

    Otherwise equal and of equal ``repr``: ``==`` alone takes ``1``, ``1.0`` and ``True`` for
    one another, and a row or header re-sealed so must be read (and refused) as a fresh read
    reads it.
    """
    if isinstance(new, tuple) and isinstance(kept, tuple) and len(new) == len(kept):
        if all(a is b for a, b in zip(new, kept)):
            return True
    return bool(new is kept or (new == kept and repr(new) == repr(kept)))


def _signature(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None  # the open reports it
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class LentDataset:
    """A ``Dataset`` lent to one call, with its pieces by id (once looked up).

    Attributes:
        ds: The dataset (do not close it: the lending does).
        pid: The process that opened it.
        by_id: Each ``id_key``'s pieces in manifest order, built on the first reuse.
        settled: For each open shard that may be reused, its files' signatures.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "aba"])
        >>> with lent_dataset(path) as lent:
        ...     lent.pieces(["a", "c"])
        {"str:'a'": [0, 2], "str:'c'": []}
    """

    ds: Dataset
    pid: int = field(default_factory=os.getpid)
    by_id: dict[str, tuple[int, ...]] | None = None
    settled: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    reused: bool = False
    _pending: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def pieces(self, ids: Iterable[Any]) -> dict[str, list[int]]:
        """Each id's ``id_key`` with the pieces holding it (manifest order; [] for none).

        Example: see the class.
        """
        wanted = list(ids)
        if self.by_id is None and not self.reused:
            from episodes.io.v2_read import _with_ids  # one lookup: the manifest's scan

            rows = self.ds.summaries
            out: dict[str, list[int]] = {id_key(x): [] for x in wanted}
            for i in _with_ids(self.ds, range(len(rows)), wanted):
                out[id_key(decode_value(rows[i].id_, blob=None, where="manifest id"))].append(i)
            return out
        if self.by_id is None:
            grouped: dict[str, list[int]] = {}
            for i, row in enumerate(self.ds.summaries):
                key = id_key(decode_value(row.id_, blob=None, where="manifest id"))
                grouped.setdefault(key, []).append(i)
            self.by_id = {k: tuple(v) for k, v in grouped.items()}
        return {id_key(x): list(self.by_id.get(id_key(x), ())) for x in wanted}

    def before_reading(self, pieces: Iterable[int]) -> None:
        """Closes each open shard of ``pieces`` whose files may have changed since it opened.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0]))
            >>> with lent_dataset(path) as lent:
            ...     lent.before_reading([0]); lent.ds.episode(0).id_
            'a'
        """
        ds = self.ds
        now = time.time_ns()
        for s in {bisect.bisect_right(ds._firsts, i) - 1 for i in pieces}:
            files = self._signatures(s)
            if s in ds._open and self.settled.get(s) == files:
                continue
            ds._close(s, release=True)  # opened again: its index hashed, its data file checked
            self.settled.pop(s, None)
            self._pending[s] = (files, now)

    def after_reading(self) -> None:
        """Keeps open each memory-mapped shard opened since ``before_reading`` whose files settled.

        Every other shard is closed.

        Example: see ``before_reading``.
        """
        for s, (files, opened) in self._pending.items():
            if s not in self.ds._open or None in files or files != self._signatures(s):
                continue
            if all(max(f[3], f[4]) < opened - SETTLED_NS for f in files):
                self.settled[s] = files
        self._pending.clear()
        # What the next call would open again anyway, and shards holding their data in memory
        # (Parquet, compressed Arrow), are not kept open between calls: only memory maps are.
        for s, shard in list(self.ds._open.items()):
            if s not in self.settled or holds_data(shard):
                self.ds._close(s, release=True)
                self.settled.pop(s, None)

    def _signatures(self, s: int) -> tuple[Any, ...]:
        from episodes.io.shards import DATA_SUFFIX, INDEX_SUFFIX, shard_file

        entry = self.ds.shards[s]
        root = self.ds.root
        paths = [
            shard_file(root, entry.name, suffix)
            for suffix in (INDEX_SUFFIX, DATA_SUFFIX[entry.data_format])
        ]
        for path in paths:  # as an open checks them: a directory moved out and linked back
            check_inside(root, path)  # leaves its files' lstat as it was
        return tuple(_signature(path) for path in paths)


_v2: OrderedDict[str, LentDataset] = OrderedDict()
_v2_lock = ForkLock()  # a forked child gets a fresh one


def _take(key: str) -> LentDataset | None:
    with _v2_lock:
        lent = _v2.pop(key, None)
        if lent is not None and lent.pid != os.getpid():
            _v2.clear()  # a forked child: its parent's maps and files are not its own
            return None
        return lent


def _give_back(key: str, lent: LentDataset) -> None:
    closing = []
    with _v2_lock:
        replaced = _v2.pop(key, None)
        if replaced is not None:
            closing.append(replaced)
        _v2[key] = lent
        while len(_v2) > MAX_DATASETS:
            closing.append(_v2.popitem(last=False)[1])
    for old in closing:
        if old.pid == os.getpid():
            old.ds.close()


@contextmanager
def lent_dataset(path: str | os.PathLike[str]) -> Iterator[LentDataset]:
    """The kept ``Dataset`` of ``path`` if its manifest still lists the same shards, else a new one.

    It is this call's alone until the block ends, then kept (at most :data:`MAX_DATASETS`);
    an exception in the block closes it instead. The caller calls ``before_reading`` before
    it reads pieces and ``after_reading`` after.

    Raises:
        DatasetError: (a subclass) as ``Dataset(path)`` raises.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> with lent_dataset(path) as lent:
        ...     len(lent.ds)
        1
    """
    from episodes.io.shard_reader import Dataset
    from episodes.io.shards import read_v2_manifest

    root = Path(path).absolute()
    key = str(root)
    lent = _take(key)
    if lent is not None:
        try:
            header, shards, _, _ = read_v2_manifest(root)
        except BaseException:
            lent.ds.close()
            raise
        if not (_same(tuple(shards), lent.ds.shards) and _same(header, lent.ds.header)):
            lent.ds.close()
            lent = None
        else:
            lent.reused = True
    if lent is None:
        lent = LentDataset(Dataset(root))
    try:
        yield lent
    except BaseException:
        lent.ds.close()
        raise
    _give_back(key, lent)


def kept_datasets() -> int:
    """How many datasets (both formats together) this process keeps for ``load_episode``.

    Example:
        >>> forget_datasets(); kept_datasets()
        0
    """
    with _v2_lock:
        v2 = sum(1 for lent in _v2.values() if lent.pid == os.getpid())
    return len(_v1._kept) + v2  # (a read of its size needs no lock)


def forget_datasets() -> None:
    """Drops (and closes) every dataset kept for ``load_episode``.

    Example:
        >>> forget_datasets(); kept_datasets()
        0
    """
    _v1.drop()
    with _v2_lock:
        kept = list(_v2.values())
        _v2.clear()
    for lent in kept:
        if lent.pid == os.getpid():
            lent.ds.close()
