"""The record batches of one shard's data file, each read and checked when a read first needs it.

Opening an Arrow shard memory-maps its data file and reads the footer only. Record batch ``k``
is fetched, every buffer of it checked to lie inside the file and the batch validated in full
(offsets, lengths, UTF-8) the first time a read needs it, then cached: reading one episode of
a shard costs the same for a shard of ten episodes as for one of 100k. The writer stores one
record batch per episode piece, so piece ``j`` is read from batch ``j`` when the file holds as
many batches as the index lists pieces and batch ``j`` holds exactly the piece's rows; any
other layout (a file rewritten by another tool) is mapped the general way, by reading and
checking every batch once and locating each piece's first row. ``full=True`` (a ``verify``
read) fetches and checks every batch when the table is opened, as that read takes every byte
anyway. A Parquet file is read whole, as one table, when it is opened.

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from episodes.io.errors import CorruptDatasetError, DatasetError, read_failure

__all__ = ["ShardTable"]


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
        full: Fetch and check every batch now, not as reads need them.

    Raises:
        CorruptDatasetError: The file is not a readable table, or (when checked now) a batch
            is damaged or the rows do not add up.
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
        self._batches: dict[int, Any] = {}
        self._damage: dict[int, CorruptDatasetError] = {}
        self._offsets: list[int] | None = None  # first row of every batch, once all are read
        with self._reading():
            if data_format == "arrow":
                mapped = pa.memory_map(str(path))
                self.base = mapped.read_buffer(1).address if size else None
                mapped.seek(0)
                # One batch at a time, each small: pyarrow's thread pool for decompressing
                # a zstd batch cost more than it saved (a full pass 1.35x slower with it).
                options = pa.ipc.IpcReadOptions(use_threads=False)
                self._reader = pa.ipc.open_file(mapped, options=options)
                self._count = self._reader.num_record_batches
            else:
                import pyarrow.parquet as pq

                self._batches[0] = pq.read_table(str(path)).combine_chunks()
                self._batches[0].validate(full=True)
                self._count = 1
        # One batch per piece is the writer's layout: anything else is located by reading all.
        if full or data_format != "arrow" or not self._count or self._count != len(counts):
            self._read_all()

    def __len__(self) -> int:
        return self._count

    @property
    def fetched(self) -> int:
        """Batches read and checked so far.

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
        return len(self._batches)

    def __getitem__(self, k: int) -> Any:
        """Record batch ``k`` (Parquet: the table), checked the first time it is read."""
        batch = self._batches.get(k)
        if batch is not None:
            return batch
        if not 0 <= k < self._count:
            raise IndexError(f"record batch {k} out of range for {self._count}")
        damage = self._damage.get(k)
        if damage is not None:  # a damaged batch is read and refused once
            raise damage
        try:
            with self._reading():
                batch = self._reader.get_batch(k)
                if self.base is not None:
                    self._check_inside(batch)
                # Offsets, lengths and UTF-8 checked before any value is read: a damaged or
                # forged file (checksums recomputed) must raise, not crash Arrow's C++.
                batch.validate(full=True)
        except CorruptDatasetError as err:
            self._damage[k] = err
            raise
        self._batches[k] = batch
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
            if self[j].num_rows == count:
                return j, 0
            self._read_all()  # not the writer's layout after all
        assert self._offsets is not None
        k = bisect.bisect_right(self._offsets, start) - 1
        local = start - self._offsets[k]
        if local + count > self[k].num_rows:
            raise CorruptDatasetError(f"{self.where}: episode {j} straddles record batches")
        return k, local

    def _read_all(self) -> None:
        """Reads and checks every batch; the rows must add up to the index's."""
        offsets = [0]
        for k in range(self._count):
            offsets.append(offsets[-1] + self[k].num_rows)
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
        for column in batch.columns:
            for buffer in column.buffers():
                if (
                    buffer is not None
                    and buffer.size
                    and buffer.parent is not None
                    and not (low <= buffer.address and buffer.address + buffer.size <= high)
                ):
                    raise CorruptDatasetError(
                        f"{self.where}: {self.path.name} points outside itself (damaged)"
                    )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turns what pyarrow raises while reading into the library's errors."""
        try:
            yield
        except DatasetError:
            raise
        except OSError as err:  # with an errno: the system's (EMFILE...); without: pyarrow's
            raise read_failure(err, f"{self.where}: {self.path.name}") from err
        except (pa.ArrowException, ValueError) as err:
            raise CorruptDatasetError(f"{self.where}: cannot read {self.path.name}: {err}") from err
