"""Reading format v2 datasets: random access by episode and by step range.

:class:`Dataset` reads the manifest once; an episode's shard is opened on first use (its
index checked against the manifest's SHA-256, its data file memory-mapped) and kept in a
small LRU cache, so getting episode ``i`` or steps ``[a, b)`` of it costs O(1) file reads.
Arrow shards are memory-mapped: step reads are read-only numpy views, no copies, and each
record batch is fetched and checked when a read first reaches it
(:mod:`episodes.io.shard_table`); a Parquet shard is read whole into memory when it is opened,
and stays there while it is open (up to ``max_open_shards`` of them).
Every problem raises a ``DatasetError`` subclass.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[5, 6],
    ...                                rewards=[1.0, 2.0], len_lookback_buffer=0))
    >>> ds = Dataset(path)
    >>> len(ds), ds.episode(0).id_, ds.steps(0, 1, 2)["actions"].tolist()
    (1, 'a', [6])
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import os
import stat
import sys
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_int
from episodes.io.arrow_leaves import leaf_from_arrow
from episodes.io.data_file import check_data_file, open_data
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    DatasetIOError,
    NotADatasetError,
    UnsupportedVersionError,
    reraisable,
    stat_or_none,
    without_frames,
)
from episodes.io.format import check_inside, not_a_dataset, read_regular_file
from episodes.io.leaf_maps import map_copy_on_write, may_map
from episodes.io.metadata import DatasetMetadata
from episodes.io.open_shards import AUTO, MaxOpen, OpenLimits, check_max_open
from episodes.io.pinned import BoundedCache, ByteBudget, pinned_arrays, plan_views
from episodes.io.reader import read_flags
from episodes.io.relist_hint import with_relist_hint
from episodes.io.shard_codec import EXTRAS, column_of, decode_rows
from episodes.io.shard_columns import plan_columns
from episodes.io.shard_index import read_index
from episodes.io.shard_table import ShardTable
from episodes.io.shards import (
    DATA_SUFFIX,
    INDEX_SUFFIX,
    EpisodeRow,
    ShardEntry,
    is_v2,
    piece_ends,
    read_v2_manifest,
    shard_file,
)
from episodes.io.step_bounds import step_bound

__all__ = ["Dataset", "Shard"]

MAX_INDEX_BYTES = 1 << 30
MMAP_THRESHOLD = 1 << 20  # leaves of at least 1 MiB stay memory-mapped (copy-on-write)
# MADV_POPULATE_READ (Linux 5.14+; Python names no constant): maps a leaf's cached pages in one
# call instead of one page fault per 4 KiB (or per fault-around batch) when they are touched.
_POPULATE_READ = 22
_CAN_POPULATE = sys.platform.startswith("linux") and hasattr(mmap.mmap, "madvise")
# Column plans (about 1.7 KB each for CartPole pieces) and leaf views kept per open shard.
# Random reads come back to the pieces they planned (256 made a warm random pass over a
# 1000-piece shard 17x slower); a pass in order never does, and caching all of its plans made
# the cyclic GC walk them again and again, so reads in piece order are not cached at all.
_CACHED_PLANS = 4096
_CACHED_VIEWS = 1024
# Decompressed bytes (zstd batches) a dataset's caches may keep alive (episodes.io.pinned).
_CACHED_BYTES = 256 << 20


class Shard:
    """One opened shard: its checked index and its (memory-mapped) table.

    ``parts`` is the data file's :class:`~episodes.io.shard_table.ShardTable` (a batch is
    read and checked when first used, every one at once with ``verify``); ``index`` holds the
    index's fields, its ``episodes`` entries parsed when read (:mod:`episodes.io.shard_index`).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[3], rewards=[1.0]))
        >>> shard = Shard(Path(path), Dataset(path).shards[0])
        >>> len(shard.parts), shard.index["data"]["rows"], shard.where.startswith("shard ")
        (1, 2, True)
    """

    def __init__(
        self,
        root: Path,
        entry: ShardEntry,
        *,
        verify: bool = False,
        whole_index: bool = False,
        budget: ByteBudget | None = None,
    ):
        self.entry = entry
        self.where = f"shard {entry.name}"
        index_path = shard_file(root, entry.name, INDEX_SUFFIX)
        check_inside(root, index_path)
        raw = read_regular_file(index_path, f"{self.where} index", MAX_INDEX_BYTES)
        if len(raw) != entry.index_size or hashlib.sha256(raw).hexdigest() != entry.index_sha256:
            raise CorruptDatasetError(
                f"{self.where}: index does not match its manifest checksum (modified or corrupted)"
            )
        # Each entry is checked against the manifest now and parsed again when read (kept
        # parsed for a pass over every episode: ``whole_index``).
        self.index, firsts, counts = read_index(raw, entry, self.where, whole=whole_index)
        self.spaces: list[Any] = self.index["spaces"]
        data_path = shard_file(root, entry.name, DATA_SUFFIX[entry.data_format])
        check_inside(root, data_path)
        crc = self.index["data"]["crc32"] if verify else None
        check_data_file(data_path, entry.data_size, self.where, crc)
        self.path = data_path
        #: The data file's record batches, each read and checked when first used.
        self.parts = ShardTable(
            data_path,
            entry.data_format,
            entry.data_size,
            self.index["data"]["rows"],
            firsts,
            counts,
            self.where,
            full=verify,  # a verifying read takes every byte: every batch is checked now
        )
        self._base = self.parts.base
        budget = ByteBudget(_CACHED_BYTES) if budget is None else budget  # the dataset's
        self._views = BoundedCache(_CACHED_VIEWS, budget)
        self._plans = BoundedCache(_CACHED_PLANS, budget)
        self._last_planned = -1  # the piece planned last: reads in order skip the cache

    def close(self) -> None:
        """Drops the caches and closes the data file (see ``ShardTable.close``); idempotent.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[3],
            ...                                rewards=[1.0], len_lookback_buffer=0))
            >>> shard, _ = Dataset(path).locate(0)
            >>> shard.close(); shard.close(); shard.parts.closed
            True
        """
        self._views.clear()
        self._plans.clear()
        self.parts.close()

    def part_of(self, j: int) -> tuple[int, int]:
        """``(record batch number, first row in it)`` of the shard's episode ``j``.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(1)
            >>> shard.part_of(j)
            (1, 0)
        """
        return self.parts.locate(j)

    def own(self, view: np.ndarray, *, populate: bool = False) -> np.ndarray:
        """A writable array with ``view``'s contents for the episode to own.

        A large leaf of an uncompressed, memory-mapped shard becomes a copy-on-write memory
        map of the same file bytes: nothing is copied, writes stay in memory and the file never
        changes (as v1 chunks do). Anything else is copied. ``populate`` (for a reader about
        to go through every item) maps the leaf's cached pages at once; otherwise nothing is
        read until used.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(0)
            >>> view = shard.view(shard.entry_of(j)["leaves"]["obs.0.npy"], 0)
            >>> view.flags.writeable, shard.own(view).flags.writeable, shard.own(view).tolist()
            (False, True, [0, 1])
        """
        if self._base is None or view.nbytes < MMAP_THRESHOLD or not view.flags.c_contiguous:
            return np.array(view)
        offset = view.__array_interface__["data"][0] - self._base
        if offset < 0 or offset + view.nbytes > self.entry.data_size or not may_map():
            # Not inside the file's map (a decompressed buffer), or too many maps alive: the
            # bytes are read from the shard's own map, which needs no descriptor.
            return np.array(view)
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        try:
            fd = open_data(self.path, self.entry.data_size, self.where)
        except DatasetIOError:  # out of descriptors: read instead, as above
            return np.array(view)
        try:
            mapped = map_copy_on_write(fd, start, offset + view.nbytes - start)
        except ValueError as err:  # the file is shorter than checked: it changed
            raise CorruptDatasetError(f"{self.where}: cannot map {self.path.name}: {err}") from err
        finally:
            os.close(fd)
        if mapped is None:
            return np.array(view)
        if populate and _CAN_POPULATE:
            try:
                mapped.madvise(_POPULATE_READ)
            except OSError:
                pass  # an older kernel (EINVAL), a file cut short since (EFAULT): fault in
        return np.frombuffer(mapped, view.dtype, view.size, offset - start).reshape(view.shape)

    def columns(self, j: int) -> dict[str, Any]:
        """The checked column plans of the shard's episode ``j`` (cached; see shard_columns).

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(1)
            >>> plans = shard.columns(j)
            >>> sorted(plans)[:3], plans["observations"].size, plans is shard.columns(j)
            (['actions', 'extra_model_outputs', 'infos'], 2, True)
        """
        plans = self._plans.get(j)
        if plans is None:
            plans = plan_columns(self, j)
            if j != self._last_planned + 1:  # not the next piece of a pass in order
                self._plans.put(j, plans, pinned_arrays(self, plan_views(plans)))
            self._last_planned = j
        return plans

    def entry_of(self, j: int) -> dict[str, Any]:
        """The index entry of the shard's episode ``j``.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(1)
            >>> shard.entry_of(j)["meta"]["id"], shard.entry_of(j)["rows"]  # rows: [first, count]
            ('b', [2, 2])
        """
        entry: dict[str, Any] = self.index["episodes"][j]
        return entry

    def view(self, info: dict[str, Any], k: int) -> np.ndarray:
        """A numpy view of one leaf column over all of record batch ``k`` (padding included).

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(0)
            >>> view = shard.view(shard.entry_of(j)["leaves"]["act.0.npy"], 0)
            >>> view.shape, int(view[0])  # one action, padded to the episode's two rows
            ((2,), 3)
        """
        key = (k, tuple(info["path"]), info["dtype"], tuple(info["shape"]))
        view = self._views.get(key)
        if view is None:
            column = column_of(self.parts[k], info["path"], self.where)
            full = {**info, "count": len(column)}
            view = leaf_from_arrow(column, full, 0, len(column), nulls_ok=True, where=self.where)
            self._views.put(key, view, pinned_arrays(self, (view,)))
        return view


class Dataset:
    """Random access to the committed episodes of a v2 dataset.

    Args:
        path: The dataset directory.
        verify: Check every shard data file's CRC-32 when it is opened.
        max_open_shards: Shards kept open at once: ``"auto"``, as many as are cheap to keep
            (:mod:`episodes.io.open_shards`), or an int >= 1.

    Raises:
        DatasetError: (a subclass) for a missing, corrupt, unsafe or unsupported dataset.
        ValueError: ``max_open_shards`` is not ``"auto"`` nor an int >= 1 (0, a float, None).

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
        ...                                      rewards=[1.0]) for x in "ab"])
        >>> ds = Dataset(path)
        >>> len(ds), len(ds.shards), [row.id_ for row in ds.summaries]
        (2, 1, ['a', 'b'])
    """

    _closed = False  # set by close() (a class default: a pickle of an older build lacks it)

    def __init__(
        self, path: str | os.PathLike[str], *, verify: bool = False, max_open_shards: MaxOpen = AUTO
    ):
        check_max_open(max_open_shards)  # before any file is read
        _, verify = read_flags(None, verify)
        # Absolute: shards open lazily, maybe after the caller changed directory.
        self.root = Path(path).absolute()
        # No permission to look (an I/O error) is DatasetIOError naming the path, not "none".
        st = stat_or_none(self.root)
        if st is None or not stat.S_ISDIR(st.st_mode):
            raise NotADatasetError(f"{self.root} does not exist or is not a directory")
        if stat_or_none(self.root / "format.json") is not None:
            raise UnsupportedVersionError(
                f"{self.root} is a format v1 dataset; Dataset reads v2 (read it with "
                "read_episodes / load_episode, or convert it with `episodes migrate`)"
            )
        if not is_v2(self.root):  # the other readers' rule, and then their error
            raise NotADatasetError(not_a_dataset(self.root))
        self.header, shards, _, self.torn_manifest = read_v2_manifest(self.root)
        self.metadata = DatasetMetadata.from_json(self.header["metadata"], "manifest header")
        self._verify = verify
        # Set while iter_episodes goes through every episode: shards opened then keep their
        # index parsed (a random read keeps it as text and parses the entry it reads).
        self._passing = False
        self._limits = OpenLimits(max_open_shards)
        self._open: OrderedDict[int, Shard] = OrderedDict()
        self._budget = ByteBudget(_CACHED_BYTES)  # shared by the open shards' caches
        self._failed: dict[int, DatasetError] = {}
        self._ends: list[tuple[bool, bool]] | None = None  # piece_ends, on first use
        #: Shards closed to stay within ``max_open_shards`` (views into them keep them mapped).
        self.evictions = 0
        # Tuples: the reads below index them, so an edit in place would misplace every read.
        self.shards: tuple[ShardEntry, ...] = tuple(shards)
        self.summaries: tuple[EpisodeRow, ...] = tuple(e for s in self.shards for e in s.episodes)
        # Where each shard's pieces start in manifest order (bisected, not a pair per piece).
        self._firsts = list(accumulate((len(s.episodes) for s in self.shards[:-1]), initial=0))

    def __len__(self) -> int:
        return len(self.summaries)

    def close(self) -> None:
        """Closes the open shards' data files and memory maps; later reads raise.

        Idempotent (``with`` closes it too); ``steps``'s views stay valid, keeping their map
        alive. A read afterwards is a ``DatasetError``; ``len`` and ``summaries`` stay.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[3],
            ...                                rewards=[1.0], len_lookback_buffer=0))
            >>> with Dataset(path) as ds:
            ...     actions = ds.steps(0, 0, 1)["actions"]
            >>> actions.tolist(), len(ds), ds.open_shards()
            ([3], 1, [])
            >>> ds.episode(0)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            episodes.io.errors.DatasetError: the Dataset of ... is closed: open a new Dataset
        """
        self._closed = True
        for s in list(self._open):
            self._close(s, release=True)

    def _check_open(self) -> None:
        if self._closed:
            raise DatasetError(f"the Dataset of {self.root} is closed: open a new Dataset")

    def __enter__(self) -> Dataset:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_open"], state["_limits"] = OrderedDict(), self._limits.fresh()  # maps stay here
        state["_budget"] = ByteBudget(_CACHED_BYTES)
        return state

    def _index(self, i: int) -> int:
        """``i`` as a position in ``0..len(self)-1`` (negative from the end), or an error."""
        self._check_open()  # every read comes here first
        i = as_int(i, what="episode index")  # True is no episode 1, nor 1.0
        if not -len(self) <= i < len(self):
            raise IndexError(f"episode index {i} out of range for {len(self)} episodes")
        return i + len(self) if i < 0 else i

    def locate(self, i: int) -> tuple[Shard, int]:
        """The opened shard holding episode ``i`` and the episode's position in it.

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
            ...                                      rewards=[1.0]) for x in "ab"])
            >>> ds = Dataset(path)
            >>> (shard, j), (same, _) = ds.locate(-1), ds.locate(0)
            >>> j, shard is same  # the shard is opened once, then served from the cache
            (1, True)
        """
        i = self._index(i)
        s = bisect.bisect_right(self._firsts, i) - 1
        j = i - self._firsts[s]
        shard = self._open.get(s)
        if shard is None:
            failed = self._failed.get(s)
            if failed is not None:  # a damaged shard is read and refused once, not per piece
                raise reraisable(failed)
            try:
                shard = Shard(
                    self.root,
                    self.shards[s],
                    verify=self._verify,
                    whole_index=self._passing,
                    budget=self._budget,
                )
            except CorruptDatasetError as err:  # damage stays; a DatasetIOError may pass
                hinted = with_relist_hint(err, self.root)  # a moved shard is "missing" here
                # Kept without frames: they hold the refused shard (its map, its descriptor).
                self._failed[s] = without_frames(reraisable(hinted))
                if hinted is not err:
                    raise hinted from err
                raise
            self._open[s] = shard
            self._limits.opened(shard)
            while (victim := self._limits.victim(self._open)) is not None:
                self._close(victim)
                self.evictions += 1
        else:
            self._open.move_to_end(s)
        return shard, j

    def _close(self, s: int, *, release: bool = False) -> None:
        shard = self._open.pop(s, None)
        if shard is not None:  # what its caches pin no read can reach again: out of the budget
            self._limits.closed(shard)
            shard._views.clear()
            shard._plans.clear()
            if release:  # close(): its file too (an evicted one may still serve a plan held)
                shard.close()

    def open_shards(self) -> list[Shard]:
        """The shards open now (at most ``max_open_shards``, the most recently used last).

        Example:
            >>> import tempfile
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path, shard_bytes=1) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
            >>> ds = Dataset(path, max_open_shards=1)
            >>> first, _ = ds.locate(0); _ = ds.locate(1)
            >>> first in ds.open_shards(), ds.evictions
            (False, 1)
        """
        return list(self._open.values())

    def episode(self, i: int, *, numpy: bool | None = None) -> SingleAgentEpisode:
        """Episode (piece) ``i`` in manifest order, as stored (or converted by ``numpy``).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0]))
            >>> Dataset(path).episode(-1).id_
            'a'
        """
        numpy, _ = read_flags(numpy, False)
        return self._episode(i, numpy, populate=False)

    def iter_episodes(
        self, indices: Iterable[int] | None = None, *, numpy: bool | None = None
    ) -> Iterator[SingleAgentEpisode]:
        """Episodes ``indices`` (default: all, in manifest order), read for going through.

        The same episodes as :meth:`episode`, but each large leaf's pages are mapped in one
        call when the episode is built (instead of one page fault at a time as they are
        touched), for a reader that goes through every step; iterating the dataset does this.
        Going through all of them (``indices`` None), each shard's index is parsed whole when
        the shard opens, instead of parsing an entry again for each episode read, and the shard
        is closed when the pass goes beyond it (a pass never comes back to it), or ends: a pass
        keeps one shard's whole index at a time, as ``read_episodes`` does.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "abc"])
            >>> [e.id_ for e in Dataset(path).iter_episodes([2, 0])]
            ['c', 'a']
        """
        numpy, _ = read_flags(numpy, False)  # now, not at the first next()
        if indices is None:
            return self._iter_episodes(None, numpy)
        try:  # now too; a generator passed is not advanced (iter returns it)
            if isinstance(indices, (str, bytes)):
                raise TypeError
            them = iter(indices)
        except TypeError:
            raise TypeError(
                "indices must be None or an iterable of episode indices, got "
                f"{type(indices).__name__} ({indices!r})"
            ) from None
        return self._iter_episodes(them, numpy)

    def _iter_episodes(
        self, indices: Iterable[int] | None, numpy: bool | None
    ) -> Iterator[SingleAgentEpisode]:
        if indices is not None:
            for i in indices:
                yield self._episode(i, numpy, populate=True)
            return
        ahead = 1  # the next shard the pass enters
        for i in range(len(self)):
            while ahead < len(self._firsts) and self._firsts[ahead] <= i:
                self._close(ahead - 1)  # passed: closed, its whole index with it
                ahead += 1
            self._passing = True
            try:
                episode = self._episode(i, numpy, populate=True)
            finally:
                self._passing = False  # not while the caller holds the generator
            yield episode
        self._close(ahead - 1)

    def _episode(self, i: int, numpy: bool | None, populate: bool) -> SingleAgentEpisode:
        shard, j = self.locate(i)
        entry = shard.entry_of(j)
        where = f"{shard.where} episode {j}"
        k, first = shard.part_of(j)
        episode = decode_rows(
            entry,
            shard.parts[k],
            first,
            spaces=shard.spaces,
            where=where,
            numpy=numpy,
            copy=(lambda view: shard.own(view, populate=True)) if populate else shard.own,
            table_where=shard.where,
        )
        summary = self.summaries[i]
        if (episode.t_started, episode.t) != (summary.t_started, summary.t):
            raise CorruptDatasetError(f"{where}: t_started/t disagree with the manifest")
        return episode

    def __iter__(self) -> Iterator[SingleAgentEpisode]:
        return self.iter_episodes()

    def steps(self, i: int, start: int | None, stop: int | None) -> dict[str, Any]:
        """Steps ``[start, stop)`` of episode ``i`` (lookback not counted), read directly.

        Bounds read as in ``episode[a:b]`` (None: the start or end; negative: from the end),
        but a range not within the episode is an ``IndexError``, not cut to fit; ``True`` or
        ``1.0`` is a ``TypeError``.

        Returns a dict: ``observations`` (``stop - start + 1`` items: the one each step starts
        from plus the last next observation), ``actions``, ``rewards`` and
        ``extra_model_outputs`` (``stop - start`` items each), ``terminated`` and
        ``truncated`` (whether the range ends the episode that way, also where a later piece
        without steps ended it: see ``piece_ends``). Array columns come back batched (numpy
        views; nested items as dicts/tuples of arrays); JSON-stored columns as lists. Infos
        are left out (read the episode for them). An episode not reset yet (no
        observations) gives no observations.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[5, 6],
            ...                                rewards=[1.0, 2.0], terminated=True,
            ...                                len_lookback_buffer=0))
            >>> s = Dataset(path).steps(0, 0, 2)
            >>> s["observations"].tolist(), s["rewards"].tolist(), s["terminated"]
            ([0, 1, 2], [1.0, 2.0], True)
        """
        i = self._index(i)  # out of range: the same IndexError as episode()
        length = self.summaries[i].length
        first, last = (
            step_bound(start, "start", length, 0),
            step_bound(stop, "stop", length, length),
        )
        if not 0 <= first <= last <= length:
            raise IndexError(f"step range [{start}, {stop}) outside the episode's [0, {length}]")
        start, stop = first, last
        summary = self.summaries[i]
        shard, j = self.locate(i)  # opened (and another shard maybe evicted) once all is checked
        plans = shard.columns(j)
        out: dict[str, Any] = {}
        for name, plan in plans.items():
            if name not in ("infos", EXTRAS):
                # The observation after the range (none in an episode not reset yet).
                extra = 1 if name == "observations" and plan.size else 0
                out[name] = plan.take(start, stop + extra)
        out[EXTRAS] = {key: plan.take(start, stop) for key, plan in plans[EXTRAS].items()}
        if self._ends is None:
            self._ends = piece_ends(self.summaries)
        ends = stop == summary.length
        out["terminated"] = ends and self._ends[i][0]
        out["truncated"] = ends and self._ends[i][1]
        return out
