"""DatasetWriter: appends episodes to a format v2 dataset in large shards, crash-safely.

Episodes gather in a shard until about ``shard_bytes`` of data is pending (or the episodes'
columns change type), then the shard is committed. An Arrow shard's data file (one record
batch per episode) is written under a temporary name as each episode arrives, so nothing is
held in memory; Parquet episodes are buffered and written at once. The data file is
fsynced, the index written under a temporary name and fsynced, both are renamed,
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
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa

from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag, as_int
from episodes.io.copy_arena import CopyArena
from episodes.io.dataset_dir import make_dataset_dir, open_shards_dir
from episodes.io.errors import (
    DatasetError,
    DatasetIOError,
    NotADatasetError,
    UnsupportedVersionError,
    try_flock,
)
from episodes.io.format import FORMAT_NAME, MANIFEST_FILE, TMP_PREFIX, append_line, piece_return
from episodes.io.held_fds import HeldFds
from episodes.io.manifest_lines import chained_line
from episodes.io.metadata import DatasetMetadata, given_metadata
from episodes.io.new_manifest import create_manifest
from episodes.io.not_copyable import WriterFiles
from episodes.io.quarantine import remove_leftovers
from episodes.io.shard_codec import EncodedEpisode, encode_rows
from episodes.io.shard_commit import cut_back, publish_shard, unpublish_shard
from episodes.io.shard_stream import ShardStream, WrittenFile, write_episodes
from episodes.io.shards import (
    DATA_SUFFIX,
    SHARDS_DIR,
    V2,
    ShardEntry,
    is_v2,
    mend_tail,
    read_v2_manifest,
    temp_data_file,
)
from episodes.io.writer import TAKEN, write_each

__all__ = ["DEFAULT_SHARD_BYTES", "DatasetWriter"]

DEFAULT_SHARD_BYTES = 64 << 20


def _written_before_return(rows: np.ndarray) -> np.ndarray:
    """The "copy" of a streamed episode's rows: none, they reach the file inside write()."""
    return rows


class DatasetWriter(WriterFiles):
    """Writes episodes into a v2 dataset (created if needed, appended to otherwise).

    Several writers, in one or several processes, may append to one dataset at the same
    time; readers see only committed shards. Episodes written but not yet flushed are lost
    if the process dies, and dropped when an exception (Ctrl-C too) leaves the ``with``
    block: call :meth:`flush` in the block to commit what is pending.

    Args:
        path: The dataset directory.
        metadata: Describes the dataset; stored when the dataset is created (ignored when
            appending to an existing one).
        shard_bytes: Pending bytes at which a shard is committed: every column plus 8 KiB per
            episode (episodes are never split across shards). Parquet holds them in memory
            until then; Arrow has written them to the shard's file and holds the index only.
        data_format: ``"arrow"`` (Arrow IPC file: memory-mapped, zero-copy reads, the default)
            or ``"parquet"``.
        compression: ``None`` or ``"zstd"`` (compressed Arrow shards are no longer zero-copy).
        sync: fsync files and directories.
        clean: A writer that opens alone (no other writer holds the dataset) cleans what dead
            writers left: temporary files and a torn manifest line go; shard files no manifest
            line lists are moved to ``unlisted/shards/`` (lost lines leave committed shards
            unlisted: ``episodes relist`` lists them again). That lists ``shards/``, so each
            open costs time linear in the shards. False skips it (a Ray sink cleans once
            before its write tasks, which then open with False); leftovers only take space,
            as readers and commits ignore them.

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
        clean: bool = True,
    ):
        if data_format not in DATA_SUFFIX:
            raise ValueError(f"data_format must be one of {sorted(DATA_SUFFIX)}")
        if compression not in (None, "zstd"):
            raise ValueError("compression must be None or 'zstd'")
        shard_bytes, sync = as_int(shard_bytes, what="shard_bytes"), as_flag(sync, "sync")
        self._clean = as_flag(clean, "clean")
        if shard_bytes < 1:  # an int: a NaN target would never be reached
            raise ValueError("shard_bytes must be >= 1")
        given_metadata(metadata)  # a dict is refused, saying how to make one
        # Absolute now: files are made later, and a chdir in between must not send them to
        # another directory while the manifest held open is this one's.
        self.path = Path(path).absolute()
        self._format, self._compression, self._sync = data_format, compression, sync
        self._target = shard_bytes
        self._pending: list[EncodedEpisode] = []
        self._pending_bytes = 0
        self._arena = CopyArena()  # copies of the buffered episodes' rows, reused per shard
        self._stream: ShardStream | None = None  # the Arrow shard being written
        self._stream_name = ""
        self._spaces: list[Any] = []
        self._lookup: dict[str, int] = {}
        self._schema: pa.Schema | None = None
        self.committed: list[str] = []
        self._line_in = False  # the shard being committed is in the manifest
        self._line_out = False  # ...or surely not: its failed append was cut back
        self._dir_fd: int | None = None
        self._manifest_fd: int | None = None
        self._held = HeldFds(self, f"DatasetWriter({str(self.path)!r})")
        self._opener = os.getpid()  # the process whose writer this is (see _refuse)
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
        make_dataset_dir(self.path)
        if (self.path / "format.json").exists():
            raise UnsupportedVersionError(
                f"{self.path} is a format v1 dataset; DatasetWriter writes v2 (convert it with "
                "`episodes migrate`, or append with EpisodeWriter)"
            )
        manifest = self.path / MANIFEST_FILE
        if manifest.is_symlink():  # as a symlinked shards/ below (readers: UnsafeDataError)
            raise NotADatasetError(f"{manifest} is a symlink: refusing to write through it")
        if not manifest.exists():
            # A writer starting at the same moment may create the manifest (and shards/)
            # between the check above and this listing: both are ours.
            extra = {p.name for p in self.path.iterdir()} - {SHARDS_DIR, MANIFEST_FILE}
            if any(not name.startswith(TMP_PREFIX) for name in extra):
                raise NotADatasetError(
                    f"{self.path} is not empty and not an episodes dataset (found "
                    f"{sorted(extra)[:5]}); choose a new or empty directory"
                )
            create_manifest(self.path, header, sync=self._sync)
        if not is_v2(self.path):
            raise NotADatasetError(f"{self.path} is not a format v2 dataset")
        read_v2_manifest(self.path)  # refuses a corrupt or unsupported dataset early
        shards = self.path / SHARDS_DIR
        shards.mkdir(exist_ok=True)
        self._dir_fd = self._held.add(open_shards_dir(shards))
        try:
            if self._clean:
                self._recover_if_alone()
            else:  # held all the same: a writer that opens alone must leave our files alone
                try_flock(self._dir_fd, fcntl.LOCK_SH, self.path)
            fd = os.open(manifest, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
            self._manifest_fd = self._held.add(fd)
        except FileNotFoundError as error:  # taken back by a failed record's writer meanwhile
            self.close()
            raise NotADatasetError(f"{self.path} was removed while being opened") from error
        except BaseException:
            self.close()
            raise

    def _recover_if_alone(self) -> None:
        """Cleans up after writers that died, if no other writer is active.

        Every open writer holds a shared flock on ``shards/``; whoever gets it exclusively
        is alone, so no unlisted shard file is being committed: each is quarantined.
        """
        assert self._dir_fd is not None
        if try_flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, self.path) is not None:
            fcntl.flock(self._dir_fd, fcntl.LOCK_SH)  # another writer holds it: not alone
            return
        try:
            remove_leftovers(self.path, sync=self._sync)
        finally:
            fcntl.flock(self._dir_fd, fcntl.LOCK_SH)

    def close(self) -> None:
        """Commits buffered episodes and releases the dataset (idempotent).

        As a Python file's ``close``: the dataset is released (descriptors, lock) whatever
        happens, and a later ``close()`` does nothing. To retry a commit that failed on a full
        disk, call :meth:`flush`, which keeps the writer and its episodes on failure. In a forked
        child it only closes the child's copies: the episodes, files and lock are the parent's.

        Raises:
            DatasetIOError: The commit failed (a full disk): the message names how many
                buffered episodes were not stored; the error is chained as its cause.
            DatasetError: The commit failed and its Arrow file could not be read back.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> w = DatasetWriter(tempfile.mkdtemp())
            >>> w.write(SingleAgentEpisode(observations=[0]))
            >>> len(w.committed), w.close(), w.close(), len(w.committed)
            (0, None, None, 1)
        """
        if os.getpid() != self._opener:
            self._drop_pending()  # the parent's: the child commits and removes nothing
            self._release()
            return
        try:
            if self._manifest_fd is not None and self._pending:
                self.flush()
        except OSError as error:
            lost = len(self._pending)
            self._drop_pending()
            if not lost or isinstance(error, DatasetError):
                raise
            raise DatasetIOError(
                f"{self.path}: the final commit failed ({error}); {lost} buffered episodes "
                "were not stored (flush() keeps them for a retry)"
            ) from error
        finally:
            # Closed: nothing buffered can be retried, nor an unbuffered episode's open shard.
            self._drop_pending()
            self._release()

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0
        stream, self._stream = self._stream, None
        if stream is not None:
            # Left behind, it goes when a writer opens alone; a forked child's is the parent's.
            with contextlib.suppress(OSError):
                stream.discard(unlink=os.getpid() == self._opener)

    def _release(self) -> None:
        fds = [self._manifest_fd, self._dir_fd]
        self._manifest_fd = self._dir_fd = None
        self._arena = CopyArena()  # its blocks go (buffered copies keep theirs alive)
        for fd in fds:
            self._held.forget(fd)
            # Unlocked first, a forked child's copy of the descriptor would keep the flock;
            # by the opener only: a child closing its copy must not unlock the parent's.
            if fd is not None and os.getpid() == self._opener:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
            if fd is not None:
                # Committed lines were fsync'd: a failing close loses nothing.
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._drop_pending()  # a failed block commits nothing more; its error is the one
        self.close()

    # ----------------------------------------------------------------------------- writing
    def write(self, episode: SingleAgentEpisode) -> None:
        """Adds one episode (encoded and checked now) to the shard; commits it when full.

        An Arrow shard takes the episode into its file before this returns; Parquet copies
        its rows. Either way, changing the episode afterwards does not change what is stored.

        Raises:
            UnstorableValueError: A value cannot be stored; nothing is buffered.
            OSError: Writing the episode or committing the full shard failed (a full disk);
                this episode is not buffered (retry the write), the shard's earlier ones
                still are (read back into memory from the shard's file).
            DatasetError: The shard's file could not even be read back: its episodes since
                the last commit are lost (the writer goes on with a new shard).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> w = DatasetWriter(tempfile.mkdtemp())
            >>> w.write(SingleAgentEpisode(observations=[0])); w.close(); len(w.committed)
            1
        """
        self._write(episode, None)

    def _write(
        self, episode: SingleAgentEpisode, wall: tuple[float | None, float | None] | None
    ) -> None:
        """``write``; ``wall`` (internal: the copy tools keep a source's) as in ``encode_rows``."""
        if self._manifest_fd is None or os.getpid() != self._opener:
            self._refuse()
        self._drop_unowned()
        spaces, lookup = list(self._spaces), dict(self._lookup)
        # An Arrow shard takes each episode into its file now, so its rows are neither copied
        # nor held; after a failed commit the shard's episodes wait in memory, copied.
        streaming = self._format == "arrow" and (self._stream is not None or not self._pending)
        copy = _written_before_return if streaming else self._arena.copy
        encoded = encode_rows(episode, spaces, lookup, copy=copy, wall=wall)
        batch = encoded.batch()  # its schema is the episode's (building one more cost as much)
        schema = batch.schema
        if self._pending and self._schema is not None and not schema.equals(self._schema):
            self.flush()  # a shard holds one schema; changed column types start a new one
            spaces, lookup = [], {}
            streaming = self._format == "arrow"
            copy = _written_before_return if streaming else self._arena.copy
            encoded = encode_rows(episode, spaces, lookup, copy=copy, wall=wall)
            batch = encoded.batch()
        encoded.ret = piece_return(episode)
        if streaming:
            self._stream_episode(encoded, batch)
        self._spaces, self._lookup, self._schema = spaces, lookup, schema
        self._pending.append(encoded)
        self._pending_bytes += encoded.nbytes
        if self._pending_bytes >= self._target:
            try:
                self.flush()
            except BaseException:
                # The failed commit put every episode back; this call's goes out again, so a
                # caller who retries write() does not store it twice.
                if self._pending and self._pending[-1] is encoded:  # not when all were lost
                    self._pending.pop()
                    self._pending_bytes -= encoded.nbytes
                raise

    def _refuse(self) -> None:
        closed = self._closed_error()
        raise closed or DatasetError(  # a commit from both processes would store episodes twice
            f"a forked child cannot use the DatasetWriter for {self.path} of process "
            f"{self._opener} (its episodes, files and lock): open a new DatasetWriter there"
        )

    def _stream_episode(self, encoded: EncodedEpisode, batch: pa.RecordBatch) -> None:
        schema = batch.schema
        if self._stream is None:
            name = secrets.token_hex(8)
            path = temp_data_file(self.path / SHARDS_DIR, name, self._format)
            stream = ShardStream(path, schema, compression=self._compression, sync=self._sync)
            self._stream, self._stream_name = stream, name
        try:
            self._stream.append(batch)
        except BaseException:
            self._unstream()  # the shard's earlier episodes stay buffered; this one is not
            raise
        encoded.columns = {}  # in the file now

    def _drop_unowned(self) -> None:
        """Moves the shard into memory if its file holds an episode that was not buffered.

        An interrupt (Ctrl-C) after an episode reached the file but before it was buffered
        leaves one, last in the file: the shard must not be committed, or grow, with it.
        """
        if self._stream is not None and self._stream.batches > len(self._pending):
            self._unstream()  # the buffered episodes take the first batches; the rest goes

    def _unstream(self, published: bool = False) -> None:
        """Moves the open shard's episodes from its file back into memory.

        The file is removed, unless the commit failed after it was renamed into place.
        """
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            batches = stream.recover(remove=not published)
        except BaseException as exc:
            with contextlib.suppress(OSError):  # the DatasetError below is what matters
                stream.discard(unlink=not published)
            lost, self._pending, self._pending_bytes = len(self._pending), [], 0
            raise DatasetError(
                f"a shard's file could not be written or read back: its {lost} episodes written "
                "since the last commit are lost"
            ) from exc
        for encoded, batch in zip(self._pending, batches, strict=False):
            encoded.columns = dict(zip(batch.schema.names, batch.columns, strict=True))

    def write_many(self, episodes: Iterable[SingleAgentEpisode]) -> None:
        """Writes several episodes in order, as that many :meth:`write` calls.

        Not all-or-nothing: a refused episode raises :meth:`write`'s error (same type) naming
        it (:func:`~episodes.io.writer.write_each`); those before it were buffered as by
        :meth:`write` (a ``with`` block this error leaves drops them), those after it not.

        Example:
            >>> import tempfile
            >>> from episodes.io import read_episodes
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write_many(SingleAgentEpisode(str(i), observations=[i]) for i in range(3))
            >>> [e.id_ for e in read_episodes(path)]
            ['0', '1', '2']
        """
        write_each(self.write, episodes, TAKEN)

    def flush(self) -> str | None:
        """Commits the buffered episodes as one shard; returns its name (None if empty).

        Raises:
            OSError: The shard could not be written (a full disk); its episodes stay
                buffered for a retry.
            DatasetError: ...nor its Arrow file read back: its episodes are lost.

        Example:
            >>> import tempfile
            >>> w = DatasetWriter(tempfile.mkdtemp())
            >>> w.flush() is None, w.close()
            (True, None)
        """
        if not self._pending:
            return None
        if self._manifest_fd is None or os.getpid() != self._opener:
            self._refuse()
        self._drop_unowned()
        saved = (self._pending, self._spaces, self._lookup, self._schema, self._pending_bytes)
        streamed = self._stream
        name = self._stream_name if streamed is not None else secrets.token_hex(8)
        self._pending, self._spaces, self._lookup, self._schema = [], [], {}, None
        self._pending_bytes, self._stream = 0, None
        data: ShardStream | WrittenFile | None = streamed
        published = self._line_in = self._line_out = False
        try:
            if data is None:
                data = self._write_memory(name, saved[0])
            entry = self._publish(name, data, saved[0], saved[1])
            published = True
            self._append(entry.to_json())
        except BaseException:
            if self._line_in:
                # Interrupted (Ctrl-C) once the line was in: the shard is committed, and its
                # episodes must not stay buffered, or a retry would store them twice.
                self.committed.append(name)
                self._arena.release()
                raise
            # Nothing was committed: the episodes stay buffered for a retry (a shard left
            # behind is unlisted, and quarantined by the next writer that opens alone).
            self._pending, self._spaces, self._lookup, self._schema = saved[:4]
            self._pending_bytes, self._stream = saved[4], streamed
            if streamed is None and data is not None and not published:
                data.discard()  # written from memory, where the episodes still are
            self._unstream(published)
            if self._line_out:  # no line lists them: on a full disk, they would fill it more
                unpublish_shard(self.path / SHARDS_DIR, name, self._format)
            raise
        self.committed.append(name)
        self._arena.release()  # the shard is written: its copies are no longer read
        return name

    def _write_memory(self, name: str, pending: list[EncodedEpisode]) -> ShardStream | WrittenFile:
        """Writes buffered episodes as the data file (an Arrow one still to be finished)."""
        path = temp_data_file(self.path / SHARDS_DIR, name, self._format)
        columns, compression = [e.columns for e in pending], self._compression
        return write_episodes(path, columns, self._format, compression=compression, sync=self._sync)

    def _publish(
        self,
        name: str,
        data: ShardStream | WrittenFile,
        pending: list[EncodedEpisode],
        spaces: list[Any],
    ) -> ShardEntry:
        """Finishes the data file, writes the index, and renames both into place."""
        shards, fmt = self.path / SHARDS_DIR, self._format
        return publish_shard(
            shards, name, data, pending, spaces, fmt, self._compression, sync=self._sync
        )

    def _append(self, obj: dict[str, Any]) -> None:
        fd = self._manifest_fd
        assert fd is not None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            mend_tail(fd, sync=False)  # a killed writer's torn line goes; append_line syncs
            end = os.lseek(fd, 0, os.SEEK_END)
            try:  # under the lock: the line another writer appended last is the one it follows
                append_line(fd, chained_line(fd, obj), sync=self._sync)
            except OSError:  # a full disk: append_line cut the manifest back, if it could
                self._line_out = cut_back(fd, end, sync=self._sync)
                raise
            self._line_in = True  # committed, whatever is raised from here on
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _fsync(self, fd: int) -> None:
        if self._sync:
            os.fsync(fd)
