"""The record batches of one shard's data file, each read and checked when a read first needs it.

Opening an Arrow shard memory-maps its data file and reads the footer only. Record batch ``k``
is fetched, every buffer of it checked to lie inside the file and the batch validated in full
(offsets, lengths, UTF-8) the first time a read needs it; reading one episode of a shard costs
the same for a shard of ten episodes as for one of 100k. Each piece is found by its first row:
where every batch starts is read once from the batches' message headers
(:mod:`episodes.io.ipc_rows`, no batch body read), so the writer's layout (one batch per piece)
and any other (a file rewritten by another tool) are read alike, from the rows the index lists.
Only the last few batches fetched are kept (a zstd batch is decompressed memory); one fetched
again is not checked again. The file's schema must hold plain Arrow types only, no extension
type (:mod:`episodes.io.arrow_types`): checked when the file is opened, before any batch is.
``full=True`` (a ``verify`` read) fetches and checks every batch when the table is opened, as
that read takes every byte anyway. A Parquet file is read whole, as one table, when it is
opened.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import Dataset, DatasetWriter
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:
    ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
    ...                                      rewards=[1.0]) for x in "abc"])
    >>> table = Dataset(path).locate(0)[0].parts  # the shard is open, no batch read yet
    >>> len(table), table.fetched, table.locate(2), table.fetched, table[2].num_rows
    (3, 0, (2, 0), 1, 2)
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from episodes.io.arrow_types import check_plain_schema, extension_refused
from episodes.io.errors import (
    CorruptDatasetError,
    DatasetError,
    read_failure,
    reraisable,
    without_frames,
)
from episodes.io.ipc_rows import batch_rows
from episodes.io.parquet_lists import restore_fixed_lists
from episodes.io.stored_schema import (
    ipc_file_extension,
    parquet_file_extension,
    parquet_read_options,
)

__all__ = ["ShardTable"]

# Record batches kept per open shard, the most recently fetched: a read uses its own batch only
# (a zstd batch is decompressed memory, kept for as long as it is cached).
_CACHED_BATCHES = 4


class ShardTable:
    """The record batches (Arrow) or the one table (Parquet) of a shard's data file.

    Args:
        path: The data file (its size and type checked by the caller).
        data_format: ``"arrow"`` or ``"parquet"``.
        size: The file's size in bytes (as the manifest says).
        rows: The rows the index says the file holds.
        firsts: The first row of every piece, in row order (checked to tile ``rows``).
        counts: The rows of every piece.
        where: Names the shard in error messages.
        full: Fetch and check every batch now, not as reads need them (each kept until a
            read takes it).

    Raises:
        CorruptDatasetError: The file is not a readable table, its schema names an extension
            type, or (when checked now) a batch is damaged or the rows do not add up.
        DatasetIOError: The system failed a read.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import Dataset, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write_many([SingleAgentEpisode(x, observations=[0, 1], actions=[3],
        ...                                      rewards=[1.0]) for x in "ab"])
        >>> shard, _ = Dataset(path).locate(0)
        >>> table = ShardTable(shard.path, "arrow", shard.entry.data_size, 4, [0, 2], [2, 2],
        ...                    "shard x", full=True)
        >>> table.fetched, table.locate(1)
        (2, (1, 0))
    """

    def __init__(
        self,
        path: Path,
        data_format: str,
        size: int,
        rows: int,
        firsts: Sequence[int],
        counts: Sequence[int],
        where: str,
        *,
        full: bool = False,
    ):
        self.path, self.where, self._size, self._rows = path, where, size, rows
        self._firsts, self._counts = firsts, counts
        #: The memory map's first byte's address (None: not mapped, or an empty file).
        self.base: int | None = None
        self._reader: Any = None
        self._table: Any = None  # Parquet: the whole file
        self._bytes: np.ndarray | None = None  # Arrow: the mapped file, for batch_rows
        self._batches: OrderedDict[int, Any] = OrderedDict()  # the last ones fetched
        # ``full``: every batch, checked at open, kept until a read takes it (a verifying pass
        # then fetches, and decompresses, each once).
        self._pending: dict[int, Any] = {}
        self._checked = bytearray()  # 1 for each batch fetched and checked once
        self._fetched = 0
        self._damage: dict[int, CorruptDatasetError] = {}
        self._offsets: list[int] | None = None  # first row of every batch, on first use
        self._source: Any = None  # Arrow: the memory-mapped file, closed by close()
        self.closed = False
        mapped = None
        # The path as the system names it: a directory named in no valid UTF-8 (b"runs-\xff",
        # which the writer writes to) would fail pyarrow's UTF-8 encoding of a str, not a read.
        raw_path = os.fsencode(path)
        try:
            with self._reading():
                if data_format == "arrow":
                    mapped = pa.memory_map(raw_path)
                    self._bytes = np.frombuffer(mapped.read_buffer(size), np.uint8)
                    self.base = self._bytes.__array_interface__["data"][0] if size else None
                    mapped.seek(0)
                    # Before pyarrow builds the schema: building an extension type runs the
                    # code registered under its name on the file's bytes.
                    found = ipc_file_extension(self._bytes)
                    if found is not None:
                        raise extension_refused(found, where)
                    # One batch at a time, each small: pyarrow's thread pool for decompressing
                    # a zstd batch cost more than it saved (a full pass 1.35x slower with it).
                    options = pa.ipc.IpcReadOptions(use_threads=False)
                    self._reader = pa.ipc.open_file(mapped, options=options)
                    self._source = mapped
                    # Plain types only, before any batch is read (every batch has this schema).
                    check_plain_schema(self._reader.schema, where)
                    self._count = self._reader.num_record_batches
                else:
                    import pyarrow.parquet as pq

                    with pa.OSFile(raw_path) as source:
                        found = parquet_file_extension(source, size)
                        if found is not None:
                            raise extension_refused(found, where)
                        table = pq.read_table(source, **parquet_read_options())
                        self._table = restore_fixed_lists(table).combine_chunks()
                    check_plain_schema(self._table.schema, where)
                    self._table.validate(full=True)
                    self._count = 1
            self._checked = bytearray(self._count)
            if self._table is not None:
                self._read_all()
            elif full:
                self._pending = {k: self[k] for k in range(self._count)}
                self._set_offsets([batch.num_rows for batch in self._pending.values()])
        except BaseException:
            # A refused file is closed now: the error may be kept (a Dataset remembers
            # damage), and nothing of it should hold the descriptor or the map.
            self._reader = self._bytes = self._table = None
            self._batches.clear()
            self._pending.clear()
            if mapped is not None:
                mapped.close()
            raise

    def __len__(self) -> int:
        return self._count

    def close(self) -> None:
        """Closes the data file and drops the batches kept; a later read is a ``DatasetError``.

        Arrays already read from the file's memory map stay valid: each keeps the map alive
        (pyarrow unmaps it when the last buffer viewing it goes). Closing twice does nothing.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import Dataset, DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[3],
            ...                                rewards=[1.0], len_lookback_buffer=0))
            >>> table = Dataset(path).locate(0)[0].parts
            >>> column = table[0].column("observations"); table.close(); table.close()
            >>> column.to_pylist(), table.closed  # read from the map, which it keeps alive
            ([0, 1], True)
        """
        source, self.closed = self._source, True
        self._reader = self._bytes = self._table = self._source = None
        self._batches.clear()
        self._pending.clear()
        if source is not None:
            source.close()

    @property
    def fetched(self) -> int:
        """Batches read and checked so far (each once; only the last few stay in memory).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import Dataset, DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
            >>> shard, _ = Dataset(path).locate(1)
            >>> shard.parts.fetched
            0
        """
        return self._fetched

    def __getitem__(self, k: int) -> Any:
        """Record batch ``k`` (Parquet: the table), checked the first time it is read."""
        if self._table is not None and k == 0:
            return self._table
        batch = self._batches.get(k)
        if batch is not None:
            self._batches.move_to_end(k)
            return batch
        batch = self._pending.pop(k, None)
        if batch is not None:
            return self._cache(k, batch)
        if self.closed:
            raise DatasetError(f"{self.where}: {self.path.name} is closed (its dataset was)")
        if not 0 <= k < self._count:
            raise IndexError(f"record batch {k} out of range for {self._count}")
        damage = self._damage.get(k)
        if damage is not None:  # a damaged batch is read and refused once
            raise reraisable(damage)
        try:
            with self._reading():
                batch = self._reader.get_batch(k)
                if not self._checked[k]:  # once: fetched again, it is the same batch
                    if self.base is not None:
                        self._check_inside(batch)
                    # Offsets, lengths and UTF-8 checked before any value is read: a damaged
                    # or forged file (checksums recomputed) must raise, not crash Arrow's C++.
                    batch.validate(full=True)
        except CorruptDatasetError as err:
            self._damage[k] = without_frames(reraisable(err))  # kept: holds no batch
            raise
        if not self._checked[k]:
            self._checked[k] = 1
            self._fetched += 1
        return self._cache(k, batch)

    def _cache(self, k: int, batch: Any) -> Any:
        self._batches[k] = batch
        if len(self._batches) > _CACHED_BATCHES:
            self._batches.popitem(last=False)
        return batch

    def locate(self, j: int) -> tuple[int, int]:
        """``(batch number, first row in it)`` of piece ``j``.

        Raises:
            CorruptDatasetError: The piece's rows are not all in one batch.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import Dataset, DatasetWriter
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many([SingleAgentEpisode(x, observations=[0]) for x in "ab"])
            >>> shard, j = Dataset(path).locate(1)
            >>> shard.parts.locate(j)
            (1, 0)
        """
        start, count = self._firsts[j], self._counts[j]
        if self._offsets is None:
            if self.closed:
                raise DatasetError(f"{self.where}: {self.path.name} is closed (its dataset was)")
            assert self._bytes is not None  # a Parquet table has its offsets from the start
            lengths = batch_rows(self._bytes, self._count)
            if lengths is None:  # not laid out as Arrow writes: read every batch instead
                self._read_all()
            else:
                self._set_offsets(lengths.tolist())
        assert self._offsets is not None
        k = bisect.bisect_right(self._offsets, start) - 1
        local = start - self._offsets[k]
        end = self._offsets[k + 1] if k + 1 < self._count else self._rows
        if self[k].num_rows != end - self._offsets[k]:
            raise CorruptDatasetError(
                f"{self.where}: record batch {k} of {self.path.name} holds other rows than its "
                "header says"
            )
        if local + count > end - self._offsets[k]:
            raise CorruptDatasetError(f"{self.where}: episode {j} straddles record batches")
        return k, local

    def _read_all(self) -> None:
        """Reads and checks every batch; the rows must add up to the index's."""
        self._set_offsets([self[k].num_rows for k in range(self._count)])

    def _set_offsets(self, lengths: list[int]) -> None:
        offsets = [0]
        for n in lengths:
            offsets.append(offsets[-1] + n)
        if offsets[-1] != self._rows or not self._count:
            raise CorruptDatasetError(
                f"{self.where}: {self.path.name} holds the wrong number of rows"
            )
        self._offsets = offsets[:-1]

    def _check_inside(self, batch: Any) -> None:
        """Every buffer sliced from the memory map lies inside the data file.

        Buffers with a parent are slices of the map; decompressed ones (zstd) have none.
        """
        assert self.base is not None
        low, high = self.base, self.base + self._size
        try:  # every column's buffers in one call, without boxing each column (~7 us a batch)
            buffers = batch.to_struct_array().buffers()
        except (pa.ArrowException, ValueError):  # columns of other lengths: validate says so
            buffers = [buffer for column in batch.columns for buffer in column.buffers()]
        for buffer in buffers:
            if (
                buffer is not None
                and buffer.size
                and buffer.parent is not None
                and not (low <= buffer.address and buffer.address + buffer.size <= high)
            ):
                raise CorruptDatasetError(
                    f"{self.where}: {self.path.name} points outside itself (damaged)"
                )

    def _reading(self) -> _Reading:
        """Turns what pyarrow raises while reading into the library's errors."""
        return _Reading(self)


class _Reading:
    """``ShardTable._reading``'s context (a class: ``contextmanager``'s cost 2 us a batch)."""

    def __init__(self, table: ShardTable):
        self.table = table

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, err: BaseException | None, traceback: Any) -> Literal[False]:
        if err is None or isinstance(err, DatasetError):
            return False
        table = self.table
        if isinstance(err, OSError):  # with an errno: the system's (EMFILE...); without: pyarrow's
            raise read_failure(err, f"{table.where}: {table.path.name}") from err
        if isinstance(err, (pa.ArrowException, ValueError)):
            raise CorruptDatasetError(
                f"{table.where}: cannot read {table.path.name}: {err}"
            ) from err
        return False
