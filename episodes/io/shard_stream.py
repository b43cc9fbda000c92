"""The data file of a shard being written: record batches appended as episodes arrive.

``DatasetWriter`` writes each episode into its shard's Arrow file when the episode is written,
so it neither copies nor holds the rows until the shard is committed. If the file cannot be
written (a full disk), the batches already in it are read back into memory, the file is
removed, and the writer keeps those episodes buffered for a retry.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"x": pa.array([1, 2, 3])})
    >>> stream = ShardStream(Path(tempfile.mkdtemp()) / "s.arrow", batch.schema, sync=False)
    >>> stream.append(batch); stream.append(batch)
    >>> [b.num_rows for b in stream.recover()], stream.path.exists()
    ([3, 3], False)
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from episodes.io.checksums import CrcFile
from episodes.io.parquet_lists import loosen_fixed_lists

__all__ = ["ShardStream", "WrittenFile", "write_episodes", "write_parquet"]

# Arrow's IPC file format is a magic number padded to 8 bytes, then the stream format.
_STREAM_OFFSET = 8


class ShardStream:
    """An Arrow IPC file written one record batch at a time.

    Args:
        path: The (temporary) file to create.
        schema: The schema of every batch.
        compression: Arrow IPC buffer compression (``None`` or ``"zstd"``).
        sync: fsync the file when it is finished.
    """

    def __init__(
        self, path: Path, schema: pa.Schema, *, compression: str | None = None, sync: bool = True
    ):
        self.path = path
        self.batches = 0
        self._sync = sync
        self._end = 0  # bytes of whole batches that reached the OS
        self._file: Any = open(path, "wb")  # noqa: SIM115 - closed by finish/discard
        self._sink = CrcFile(self._file)
        options = pa.ipc.IpcWriteOptions(compression=compression)
        self._writer = pa.ipc.new_file(pa.PythonFile(self._sink, mode="w"), schema, options=options)

    def append(self, batch: pa.RecordBatch) -> None:
        """Writes one batch through to the OS (its bytes no longer need the caller's arrays)."""
        self._writer.write_batch(batch)
        self._file.flush()
        self.batches += 1
        self._end = self._sink.size

    def finish(self) -> tuple[int, int]:
        """Writes the footer, syncs and closes the file; returns its size and CRC-32."""
        self._writer.close()
        self._file.flush()
        if self._sync:
            os.fsync(self._file.fileno())
        self._file.close()
        return self._sink.size, self._sink.crc

    def recover(self, *, remove: bool = True) -> list[pa.RecordBatch]:
        """The batches written so far, read back into memory from ``path`` (then removed).

        Args:
            remove: Remove the file; a commit that failed after renaming it into place keeps
                it (the manifest may list it), as an unlisted leftover otherwise.
        """
        self.discard(unlink=False)
        batches: list[pa.RecordBatch] = []
        try:
            if self.batches:
                with open(self.path, "rb") as f:
                    data = pa.py_buffer(f.read(self._end))
                reader = pa.ipc.open_stream(data.slice(_STREAM_OFFSET))
                batches = [reader.read_next_batch() for _ in range(self.batches)]
        finally:
            if remove:
                # Batches read are kept even if the file stays (a writer opening alone
                # removes it later).
                with contextlib.suppress(OSError):
                    self.path.unlink(missing_ok=True)
        return batches

    def discard(self, unlink: bool = True) -> None:
        """Closes the file without finishing it (and removes it)."""
        with contextlib.suppress(Exception):
            self._file.close()
        if unlink:
            self.path.unlink(missing_ok=True)


class WrittenFile(NamedTuple):
    """A data file written whole (Parquet), with its size and CRC-32.

    Example:
        >>> WrittenFile(Path("s.parquet"), 10, 7).finish()
        (10, 7)
    """

    path: Path
    size: int
    crc: int

    def finish(self) -> tuple[int, int]:
        """Its size and CRC-32 (it was synced when written)."""
        return self.size, self.crc

    def discard(self) -> None:
        """Removes the file."""
        self.path.unlink(missing_ok=True)


def write_episodes(
    path: Path,
    columns: list[dict[str, pa.Array]],
    data_format: str,
    *,
    compression: str | None,
    sync: bool,
) -> ShardStream | WrittenFile:
    """Writes episodes' columns as a shard's data file (removed again if that fails).

    One record batch per episode: nothing is concatenated (copied) before writing, and a
    reader finds an episode's rows inside one batch.

    Args:
        path: The (temporary) file to create.
        columns: Per episode, its columns (the same names and types in every episode).
        data_format: ``"arrow"`` (a :class:`ShardStream`, still to be finished) or
            ``"parquet"`` (written whole).
        compression: ``None`` or ``"zstd"``.
        sync: fsync the file (an Arrow one when it is finished).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "s.arrow"
        >>> cols = [{"x": pa.array([1, 2])}, {"x": pa.array([3])}]
        >>> stream = write_episodes(path, cols, "arrow", compression=None, sync=False)
        >>> stream.batches, stream.discard()
        (2, None)
    """
    names = list(columns[0])
    batches = [pa.RecordBatch.from_arrays([c[k] for k in names], names=names) for c in columns]
    if data_format != "arrow":
        return write_parquet(path, batches, compression=compression, sync=sync)
    stream = ShardStream(path, batches[0].schema, compression=compression, sync=sync)
    try:
        for batch in batches:
            stream.append(batch)
    except BaseException:
        stream.discard()
        raise
    return stream


def write_parquet(
    path: Path, batches: list[pa.RecordBatch], *, compression: str | None, sync: bool
) -> WrittenFile:
    """Writes ``batches`` as one Parquet file (removed again if that fails).

    Example:
        >>> import tempfile
        >>> batch = pa.record_batch({"x": pa.array([1, 2])})
        >>> path = Path(tempfile.mkdtemp()) / "s.parquet"
        >>> write_parquet(path, [batch], compression=None, sync=False).size == path.stat().st_size
        True
    """
    import pyarrow.parquet as pq

    try:
        with open(path, "wb") as f:
            sink = CrcFile(f)
            pq.write_table(
                loosen_fixed_lists(pa.Table.from_batches(batches)),
                pa.PythonFile(sink, mode="w"),
                compression=compression or "none",
                row_group_size=1 << 16,
            )
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return WrittenFile(path, sink.size, sink.crc)
