"""DatasetWriter: appends episodes to a format v2 dataset in large shards, crash-safely.

Episodes are buffered in memory until about ``shard_bytes`` of data is pending (or the
episodes' columns change type), then written as one shard: the data file (one Arrow record
batch, or Parquet) and the index are written under temporary names and fsynced, renamed,
the directory is fsynced, and only then is one line appended to ``manifest.jsonl`` under an
``flock`` (so several processes may write to one dataset at once) and fsynced. A writer
killed at any moment leaves every committed shard readable and nothing half-written visible.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import read_episodes
    >>> path = tempfile.mkdtemp() + "/data"
    >>> ep = SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0])
    >>> with DatasetWriter(path, metadata=DatasetMetadata(env_id="Toy-v0")) as writer:
    ...     writer.write(ep)
    >>> [e == ep for e in read_episodes(path)]
    [True]
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import time
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from episodes.episode import SingleAgentEpisode
from episodes.io.copy_arena import CopyArena
from episodes.io.errors import DatasetError, NotADatasetError, UnsupportedVersionError
from episodes.io.format import (
    FORMAT_NAME,
    MANIFEST_FILE,
    TMP_PREFIX,
    append_line,
    fsync_dir,
    piece_return,
)
from episodes.io.metadata import DatasetMetadata
from episodes.io.shard_codec import EncodedEpisode, encode_rows
from episodes.io.shards import (
    DATA_SUFFIX,
    INDEX_SUFFIX,
    SHARD_NAME,
    SHARDS_DIR,
    V2,
    EpisodeRow,
    ShardEntry,
    is_v2,
    read_v2_manifest,
    seal_line,
)

__all__ = ["DEFAULT_SHARD_BYTES", "DatasetWriter"]

DEFAULT_SHARD_BYTES = 64 << 20
_PARALLEL_BYTES = 4 << 20
_CRC_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episodes-shard-crc")


class DatasetWriter:
    """Writes episodes into a v2 dataset (created if needed, appended to otherwise).

    Several writers, in one or several processes, may append to one dataset at the same
    time; readers see only committed shards. Episodes written but not yet flushed are lost
    if the process dies: call :meth:`flush` to commit what is buffered.

    Args:
        path: The dataset directory.
        metadata: Describes the dataset; stored when the dataset is created (ignored when
            appending to an existing one).
        shard_bytes: Buffered bytes at which a shard is written: every column plus 8 KiB per
            episode, about the memory the buffer holds (episodes are never split across shards).
        data_format: ``"arrow"`` (Arrow IPC file: memory-mapped, zero-copy reads, the default)
            or ``"parquet"``.
        compression: ``None`` or ``"zstd"`` (compressed Arrow shards are no longer zero-copy).
        sync: fsync files and directories.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> with DatasetWriter(tempfile.mkdtemp(), shard_bytes=1) as w:
        ...     w.write_many([SingleAgentEpisode(observations=[0])] * 2)
        ...     len(w.committed)
        2
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        metadata: DatasetMetadata | None = None,
        shard_bytes: int = DEFAULT_SHARD_BYTES,
        data_format: str = "arrow",
        compression: str | None = None,
        sync: bool = True,
    ):
        if data_format not in DATA_SUFFIX:
            raise ValueError(f"data_format must be one of {sorted(DATA_SUFFIX)}")
        if compression not in (None, "zstd"):
            raise ValueError("compression must be None or 'zstd'")
        if shard_bytes < 1:
            raise ValueError("shard_bytes must be >= 1")
        self.path = Path(path)
        self._format = data_format
        self._compression = compression
        self._sync = sync
        self._target = shard_bytes
        self._pending: list[EncodedEpisode] = []
        self._pending_bytes = 0
        self._arena = CopyArena()  # copies of the buffered episodes' rows, reused per shard
        self._spaces: list[Any] = []
        self._lookup: dict[str, int] = {}
        self._schema: pa.Schema | None = None
        self.committed: list[str] = []
        self._dir_fd: int | None = None
        self._manifest_fd: int | None = None
        header = self._make_header(metadata or DatasetMetadata())
        self._open(header)

    # --------------------------------------------------------------------------- lifecycle
    @staticmethod
    def _make_header(metadata: DatasetMetadata) -> dict[str, Any]:
        from episodes import __version__

        return {
            "format": FORMAT_NAME,
            "version": V2,
            "created": time.time(),
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "library_version": __version__,
            "metadata": metadata.to_json(),
        }

    def _open(self, header: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / "format.json").exists():
            raise UnsupportedVersionError(
                f"{self.path} is a format v1 dataset; DatasetWriter writes v2 (convert it with "
                "`episodes migrate`, or append with EpisodeWriter)"
            )
        manifest = self.path / MANIFEST_FILE
        if not manifest.exists():
            # A writer starting at the same moment may create the manifest (and shards/)
            # between the check above and this listing: both are ours.
            extra = {p.name for p in self.path.iterdir()} - {SHARDS_DIR, MANIFEST_FILE}
            if any(not name.startswith(TMP_PREFIX) for name in extra):
                raise NotADatasetError(
                    f"{self.path} is not empty and not an episodes dataset (found "
                    f"{sorted(extra)[:5]}); choose a new or empty directory"
                )
            self._create_manifest(manifest, header)
        if not is_v2(self.path):
            raise NotADatasetError(f"{self.path} is not a format v2 dataset")
        read_v2_manifest(self.path)  # refuses a corrupt or unsupported dataset early
        shards = self.path / SHARDS_DIR
        shards.mkdir(exist_ok=True)
        self._dir_fd = os.open(shards, os.O_RDONLY)
        try:
            self._recover_if_alone()
            self._manifest_fd = os.open(manifest, os.O_RDWR | os.O_APPEND)
        except BaseException:
            self.close()
            raise

    def _create_manifest(self, manifest: Path, header: dict[str, Any]) -> None:
        line = seal_line(header)  # before any file is made: a header it refuses leaves none
        for _ in range(8):
            tmp = self.path / f"{TMP_PREFIX}{secrets.token_hex(8)}-{MANIFEST_FILE}"
            with open(tmp, "wb") as f:
                f.write(line)
                self._fsync(f.fileno())
            try:
                os.link(tmp, manifest)  # atomic, and fails if another writer created it first
            except FileExistsError:
                pass
            except FileNotFoundError:
                # A writer that created the manifest first and believes itself alone removed
                # our temporary file as a leftover: the manifest exists now, or we try again.
                if not manifest.exists():
                    continue
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            break
        (self.path / SHARDS_DIR).mkdir(exist_ok=True)
        if self._sync:
            fsync_dir(self.path)

    def _recover_if_alone(self) -> None:
        """Removes files of writers that died, if no other writer is active.

        Every open writer holds a shared flock on ``shards/``; whoever gets it exclusively
        is alone, so unlisted shard files can only be leftovers.
        """
        assert self._dir_fd is not None
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fcntl.flock(self._dir_fd, fcntl.LOCK_SH)
            return
        try:
            _, entries, good, torn = read_v2_manifest(self.path)
            if torn:
                with open(self.path / MANIFEST_FILE, "r+b") as f:
                    f.truncate(good)
                    self._fsync(f.fileno())
            listed = {e.name for e in entries}
            for child in (self.path / SHARDS_DIR).iterdir():
                stem = child.name.split(".", 1)[0]
                orphan = child.name.startswith(TMP_PREFIX) or (
                    SHARD_NAME.match(stem) and stem not in listed
                )
                if orphan and child.is_file() and not child.is_symlink():
                    child.unlink()
            for child in self.path.iterdir():
                if child.name.startswith(TMP_PREFIX) and child.is_file():
                    child.unlink()
        finally:
            fcntl.flock(self._dir_fd, fcntl.LOCK_SH)

    def close(self) -> None:
        """Commits buffered episodes and releases the dataset (idempotent).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> w = DatasetWriter(tempfile.mkdtemp())
            >>> w.write(SingleAgentEpisode(observations=[0]))
            >>> len(w.committed), w.close(), w.close(), len(w.committed)
            (0, None, None, 1)
        """
        try:
            if self._manifest_fd is not None and self._pending:
                self.flush()
        finally:
            fds = [self._manifest_fd, self._dir_fd]
            self._manifest_fd = self._dir_fd = None
            self._arena = CopyArena()  # its blocks go (buffered copies keep theirs alive)
            for fd in fds:  # closing the fd also drops its flock
                if fd is not None:
                    # Committed lines were fsync'd: a failing close loses nothing, and must
                    # not leave the other fd (the lock) open for the process's life.
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._pending.clear()  # a failed block commits nothing more
            self._pending_bytes = 0
        self.close()

    # ----------------------------------------------------------------------------- writing
    def write(self, episode: SingleAgentEpisode) -> None:
        """Buffers one episode (encoded and checked now); commits a shard when it is full.

        Raises:
            UnstorableValueError: A value cannot be stored; nothing is buffered.
            OSError: Committing the full shard failed; this episode is not buffered (retry
                the write), the ones before it still are.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> w = DatasetWriter(tempfile.mkdtemp())
            >>> w.write(SingleAgentEpisode(observations=[0])); w.close(); len(w.committed)
            1
        """
        if self._manifest_fd is None:
            raise DatasetError(f"the writer for {self.path} is closed")
        spaces, lookup = list(self._spaces), dict(self._lookup)
        encoded = encode_rows(episode, spaces, lookup, copy=self._arena.copy)
        encoded.ret = piece_return(episode)
        schema = pa.schema([(k, v.type) for k, v in encoded.columns.items()])
        if self._pending and self._schema is not None and not schema.equals(self._schema):
            self.flush()  # a shard holds one schema; changed column types start a new one
            spaces, lookup = [], {}
            encoded = encode_rows(episode, spaces, lookup, copy=self._arena.copy)
            encoded.ret = piece_return(episode)
        self._spaces, self._lookup, self._schema = spaces, lookup, schema
        self._pending.append(encoded)
        self._pending_bytes += encoded.nbytes
        if self._pending_bytes >= self._target:
            try:
                self.flush()
            except BaseException:
                # The failed commit put every episode back; this call's goes out again, so a
                # caller who retries write() does not store it twice.
                self._pending.pop()
                self._pending_bytes -= encoded.nbytes
                raise

    def write_many(self, episodes: Iterable[SingleAgentEpisode]) -> None:
        """Writes several episodes in order (see :meth:`write`).

        Example:
            >>> import tempfile
            >>> from episodes.io import read_episodes
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many(SingleAgentEpisode(str(i), observations=[i]) for i in range(3))
            >>> [e.id_ for e in read_episodes(path)]
            ['0', '1', '2']
        """
        for episode in episodes:
            self.write(episode)

    def flush(self) -> str | None:
        """Commits the buffered episodes as one shard; returns its name (None if empty).

        Example:
            >>> import tempfile
            >>> DatasetWriter(tempfile.mkdtemp()).flush() is None
            True
        """
        if not self._pending:
            return None
        if self._manifest_fd is None:
            raise DatasetError(f"the writer for {self.path} is closed")
        saved = (self._pending, self._spaces, self._lookup, self._schema, self._pending_bytes)
        self._pending, self._spaces, self._lookup, self._schema = [], [], {}, None
        self._pending_bytes = 0
        name = secrets.token_hex(8)
        try:
            entry = self._write_shard(name, saved[0], saved[1])
            self._append(seal_line(entry.to_json()))
        except BaseException:
            # Nothing was committed: the episodes stay buffered for a retry (a shard left
            # behind is unlisted, and removed by the next writer that opens alone).
            self._pending, self._spaces, self._lookup, self._schema = saved[:4]
            self._pending_bytes = saved[4]
            raise
        self.committed.append(name)
        self._arena.release()  # the shard is written: its copies are no longer read
        return name

    def _write_shard(
        self, name: str, pending: list[EncodedEpisode], spaces: list[Any]
    ) -> ShardEntry:
        shards = self.path / SHARDS_DIR
        suffix = DATA_SUFFIX[self._format]
        names = list(pending[0].columns)
        # One record batch per episode: nothing is concatenated (copied) before writing, and
        # a reader finds an episode's rows inside one batch.
        batches = [
            pa.RecordBatch.from_arrays([e.columns[k] for k in names], names=names) for e in pending
        ]
        tmp_data = shards / f"{TMP_PREFIX}{name}{suffix}"
        tmp_index = shards / f"{TMP_PREFIX}{name}{INDEX_SUFFIX}"
        try:
            size, crc = self._write_data(tmp_data, batches)
            start = 0
            episodes = []
            for e in pending:
                episodes.append({**e.entry, "rows": [start, e.rows]})
                start += e.rows
            index = {
                "format": FORMAT_NAME,
                "version": V2,
                "data": {
                    "file": f"{name}{suffix}",
                    "format": self._format,
                    "compression": self._compression,
                    "size": size,
                    "crc32": crc,
                    "rows": sum(b.num_rows for b in batches),
                },
                "spaces": spaces,
                "episodes": episodes,
            }
            raw = json.dumps(index, allow_nan=False).encode("utf-8")
            with open(tmp_index, "wb") as f:
                f.write(raw)
                self._fsync(f.fileno())
            os.rename(tmp_data, shards / f"{name}{suffix}")
            os.rename(tmp_index, shards / f"{name}{INDEX_SUFFIX}")
        except BaseException:
            for p in (tmp_data, tmp_index):
                p.unlink(missing_ok=True)
            raise
        if self._sync:
            fsync_dir(shards)
        rows = tuple(
            EpisodeRow(
                e.entry["meta"]["id"],
                e.entry["meta"]["t_started"],
                e.entry["meta"]["t"],
                e.ret,
                e.entry["meta"]["is_terminated"],
                e.entry["meta"]["is_truncated"],
            )
            for e in pending
        )
        return ShardEntry(name, self._format, hashlib.sha256(raw).hexdigest(), len(raw), size, rows)

    def _write_data(self, path: Path, batches: list[pa.RecordBatch]) -> tuple[int, int]:
        with open(path, "wb") as f:
            sink = _CrcFile(f)
            stream = pa.PythonFile(sink, mode="w")
            if self._format == "arrow":
                options = pa.ipc.IpcWriteOptions(compression=self._compression)
                with pa.ipc.new_file(stream, batches[0].schema, options=options) as writer:
                    for batch in batches:
                        writer.write_batch(batch)
            else:
                import pyarrow.parquet as pq

                pq.write_table(
                    pa.Table.from_batches(batches),
                    stream,
                    compression=self._compression or "none",
                    row_group_size=1 << 16,
                )
            stream.flush()
            f.flush()
            self._fsync(f.fileno())
            return sink.size, sink.crc

    def _append(self, line: bytes) -> None:
        fd = self._manifest_fd
        assert fd is not None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            if end and os.pread(fd, 1, end - 1) != b"\n":
                # A writer died mid-append: its torn line goes before ours is added.
                data = os.pread(fd, end, 0)
                os.ftruncate(fd, data.rfind(b"\n") + 1)
            append_line(fd, line, sync=self._sync)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _fsync(self, fd: int) -> None:
        if self._sync:
            os.fsync(fd)


class _CrcFile:
    """A write-only file that computes the CRC-32 and size of what passes through."""

    def __init__(self, f: Any):
        self._f = f
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if len(view) >= _PARALLEL_BYTES:
            # The checksum runs on a second thread while this one writes the same bytes
            # (zlib and file writes both release the GIL); both end before we return, as
            # the caller may reuse the buffer.
            pending = _CRC_POOL.submit(zlib.crc32, view, self.crc)
            self._f.write(view)
            self.crc = pending.result()
        else:
            self.crc = zlib.crc32(view, self.crc)
            self._f.write(view)
        self.size += len(view)
        return len(view)

    def flush(self) -> None:
        self._f.flush()

    def tell(self) -> int:
        return self.size

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True
