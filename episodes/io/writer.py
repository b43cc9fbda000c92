"""EpisodeWriter: appends episodes to a dataset directory, crash-safely.

Each episode becomes one chunk: its files are written under a temporary name inside
``chunks/``, fsynced, the directory is renamed to its final name, and only then is one line
appended (and fsynced) to ``manifest.jsonl``. A writer killed at any moment therefore leaves
every earlier chunk readable and nothing half-written visible; the next writer removes the
leftovers and carries on.

:func:`removed_if_failed` takes back what a failed write (``episodes record``) made, in
either format, unless another writer still has the dataset open.

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import read_episodes
    >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[1.0])
    >>> path = tempfile.mkdtemp() + "/data"
    >>> with EpisodeWriter(path) as writer:
    ...     _ = writer.write(ep)
    >>> [e == ep for e in read_episodes(path)]
    [True]
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import itertools
import json
import os
import secrets
import shutil
import stat
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag
from episodes.io.checksums import PARALLEL_BYTES, crc_pool
from episodes.io.clock_meta import check_clocks
from episodes.io.dataset_dir import make_dataset_dir
from episodes.io.encoding import encode_episode
from episodes.io.errors import (
    DatasetError,
    DatasetLockedError,
    NotADatasetError,
    UnstorableValueError,
    try_flock,
)
from episodes.io.format import (
    CHUNKS_DIR,
    FORMAT_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    LOCK_FILE,
    MANIFEST_FILE,
    META_FILE,
    TMP_PREFIX,
    ManifestEntry,
    append_line,
    check_format,
    fsync_dir,
    piece_return,
    write_json_atomic,
)
from episodes.io.held_fds import HeldFds
from episodes.io.not_copyable import WriterFiles
from episodes.io.reader import dataset_info
from episodes.io.shards import SHARDS_DIR
from episodes.io.v1_manifest import listed_chunks
from episodes.structs import short_repr

__all__ = [
    "FRESH_NAMES",
    "TAKEN",
    "EpisodeWriter",
    "removed_if_failed",
    "take_back",
    "write_each",
]

#: What a directory may hold for ``EpisodeWriter`` to start (or restart) a dataset in it: the
#: names its own first steps make, which a writer killed before ``format.json`` leaves.
FRESH_NAMES = {CHUNKS_DIR, MANIFEST_FILE, LOCK_FILE, f"{TMP_PREFIX}{FORMAT_FILE}"}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _refuse_symlinks(path: Path) -> None:
    """Refuses a dataset whose ``chunks/``, manifest, format file or lock is a symlink.

    The writer removes leftovers in ``chunks/`` and appends to the manifest: through a link,
    it would delete or change another directory's files.

    Raises:
        NotADatasetError: One of them is a symlink.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp())
        >>> (path / CHUNKS_DIR).symlink_to(tempfile.mkdtemp())
        >>> try:
        ...     _refuse_symlinks(path)
        ... except NotADatasetError as err:
        ...     print(str(err).split("; ")[0].endswith("chunks is a symlink"))
        True
    """
    for name in (CHUNKS_DIR, MANIFEST_FILE, FORMAT_FILE, LOCK_FILE):
        if (path / name).is_symlink():
            raise NotADatasetError(
                f"{path / name} is a symlink; refused (a writer would change the files it "
                "points to)"
            )


class EpisodeWriter(WriterFiles):
    """Writes episodes into a dataset directory (created if needed, appended to otherwise).

    One writer at a time holds a dataset (an ``flock`` on ``DATASET/.lock``). Use it as a
    context manager, or call :meth:`close`.

    Args:
        path: The dataset directory.
        sync: fsync files and directories (keep True unless losing data on a crash is fine).
        checksums: record a CRC-32 of every array, checked by ``verify=True`` and
            ``episodes validate``. The checksum costs about as much memory traffic as the
            write itself; turn it off for raw write speed when corruption checks are not needed.

    Raises:
        NotADatasetError: ``path`` exists, is not empty, and is not a dataset, or is a file
            or lies under one.
        DatasetLockedError: Another writer holds the dataset.
        DatasetIOError: The filesystem has no file locks (``flock``), which the writer needs.
        DatasetError: The existing dataset is of an unsupported version or corrupt.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> with EpisodeWriter(tempfile.mkdtemp()) as w:
        ...     names = w.write_many([SingleAgentEpisode(observations=[0])] * 2)
        >>> len(names)
        2
    """

    def __init__(self, path: str | os.PathLike[str], *, sync: bool = True, checksums: bool = True):
        self.path = Path(path).absolute()  # as DatasetWriter's: a later chdir must not move it
        self._sync = as_flag(sync, "sync")
        self._checksums = as_flag(checksums, "checksums")
        self._lock_fd: int | None = None
        self._manifest_fd: int | None = None
        self._held = HeldFds(self, f"EpisodeWriter({str(self.path)!r})")
        self._opener = os.getpid()  # a forked child closing its copy must not unlock ours
        make_dataset_dir(self.path)
        _refuse_symlinks(self.path)
        fresh = not (self.path / FORMAT_FILE).exists()
        manifest = self.path / MANIFEST_FILE
        if fresh and manifest.is_file() and manifest.stat().st_size:
            raise NotADatasetError(
                f"{self.path} holds a manifest but no {FORMAT_FILE} (a format v2 dataset?); "
                "EpisodeWriter writes format v1 only, use DatasetWriter"
            )
        if fresh:
            extra = {p.name for p in self.path.iterdir()} - FRESH_NAMES
            if extra:
                raise NotADatasetError(
                    f"{self.path} is not empty and not an episodes dataset (found "
                    f"{sorted(extra)[:5]}); choose a new or empty directory"
                )
        self._lock()
        try:
            if fresh:
                self._create()
            check_format(self.path)
            self._recover()
        except BaseException:
            self.close()
            raise

    # --------------------------------------------------------------------------- lifecycle
    def _lock(self) -> None:
        made = not os.path.lexists(self.path / LOCK_FILE)
        try:
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            raise NotADatasetError(f"{self.path / LOCK_FILE} is a symlink (refused)") from err
        try:
            held = try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, self.path)
        except BaseException:  # no file locks there (DatasetIOError): the lock file we made goes
            os.close(fd)
            if made:
                with contextlib.suppress(OSError):
                    os.unlink(self.path / LOCK_FILE)
            raise
        if held is not None:
            os.close(fd)
            raise DatasetLockedError(f"{self.path} is being written by another writer") from held
        self._lock_fd = self._held.add(fd)

    def _create(self) -> None:
        (self.path / CHUNKS_DIR).mkdir(exist_ok=True)
        manifest = self.path / MANIFEST_FILE
        if not manifest.exists():
            with open(manifest, "wb") as f:
                os.fsync(f.fileno())
        fsync_dir(self.path)
        info = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
        write_json_atomic(self.path / FORMAT_FILE, info)

    def _recover(self) -> None:
        """Drops a torn manifest tail and chunk directories no manifest line lists."""
        # Only the lines appended since this process last opened a writer here are parsed.
        listed = listed_chunks(self.path)
        manifest = self.path / MANIFEST_FILE
        if listed.torn:
            with open(manifest, "r+b") as f:
                f.truncate(listed.good)
                os.fsync(f.fileno())
        chunks = self.path / CHUNKS_DIR
        chunks.mkdir(exist_ok=True)
        # Listed through a descriptor that cannot be a link: the leftovers removed below must
        # be this dataset's, never those of a directory chunks/ points to.
        try:
            chunks_fd = os.open(chunks, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        except OSError as err:
            if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise NotADatasetError(f"{chunks} is a symlink or not a directory (refused)") from err
        try:
            for name in listed.leftovers(os.listdir(chunks_fd)):
                if stat.S_ISDIR(os.stat(name, dir_fd=chunks_fd, follow_symlinks=False).st_mode):
                    shutil.rmtree(chunks / name)
        finally:
            os.close(chunks_fd)
        self._seq = listed.next_seq
        self._manifest_fd = self._held.add(os.open(manifest, os.O_WRONLY | os.O_APPEND | _NOFOLLOW))

    def close(self) -> None:
        """Releases the dataset (idempotent): another writer may open it afterwards.

        Example:
            >>> import tempfile
            >>> path = tempfile.mkdtemp()
            >>> writer = EpisodeWriter(path)
            >>> writer.close(); writer.close()
            >>> EpisodeWriter(path).close()
        """
        manifest_fd, self._manifest_fd = self._manifest_fd, None
        lock_fd, self._lock_fd = self._lock_fd, None
        self._held.forget(manifest_fd)
        self._held.forget(lock_fd)
        try:
            if manifest_fd is not None:
                os.close(manifest_fd)
        finally:  # a failing close must not keep the dataset locked for the process's life
            if lock_fd is not None:
                try:
                    if os.getpid() == self._opener:
                        fcntl.flock(lock_fd, fcntl.LOCK_UN)
                finally:
                    os.close(lock_fd)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------- writing
    def write(self, episode: SingleAgentEpisode) -> str:
        """Commits one episode chunk; returns its relative path (``chunks/NAME``).

        Everything is encoded and checked first: an unstorable value raises
        :class:`~episodes.io.errors.UnstorableValueError` and nothing is written. A writer
        belongs to the process that opened it: in a forked child ``write`` raises
        :class:`~episodes.io.errors.DatasetError` (the lock is the parent's).

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> with EpisodeWriter(tempfile.mkdtemp()) as w:
            ...     w.write(SingleAgentEpisode(observations=[0])).startswith("chunks/")
            True
        """
        if self._manifest_fd is None:  # what _closed_error gives (a `with` block raises it too)
            raise DatasetError(f"the writer for {self.path} is closed")
        if os.getpid() != self._opener:  # its lock is the parent's: a second, unlocked writer
            raise DatasetError(
                f"a forked child cannot use the EpisodeWriter for {self.path} of process "
                f"{self._opener} (its files and lock): open a new EpisodeWriter there"
            )
        meta, arrays = encode_episode(episode)
        check_clocks(meta, episode.id_)  # json.dumps below would refuse them, raw
        name = f"{self._seq:08d}-{secrets.token_hex(4)}"
        chunks = self.path / CHUNKS_DIR
        tmp = chunks / f"{TMP_PREFIX}{name}"
        tmp.mkdir()
        try:
            files: dict[str, Any] = {}
            for file_name, array in arrays.items():
                files[file_name] = self._write_array(tmp / file_name, array)
            meta["files"] = files
            meta_bytes = json.dumps(meta, allow_nan=False).encode("utf-8")
            with open(tmp / META_FILE, "wb") as f:
                f.write(meta_bytes)
                self._fsync(f.fileno())
            if self._sync:
                fsync_dir(tmp)
            os.rename(tmp, chunks / name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self._sync:
            fsync_dir(chunks)
        entry = ManifestEntry(
            chunk=f"{CHUNKS_DIR}/{name}",
            id_=meta["id"],
            t_started=meta["t_started"],
            t=meta["t"],
            ret=piece_return(episode),
            terminated=meta["is_terminated"],
            truncated=meta["is_truncated"],
            meta_sha256=hashlib.sha256(meta_bytes).hexdigest(),
            nbytes=len(meta_bytes) + sum(f["size"] for f in files.values()),
        )
        line = (json.dumps(entry.to_json()) + "\n").encode("utf-8")
        append_line(self._manifest_fd, line, sync=self._sync)
        self._seq += 1
        return entry.chunk

    def write_many(self, episodes: Iterable[SingleAgentEpisode]) -> list[str]:
        """Commits several episodes, one chunk each, in order; returns their paths.

        Not all-or-nothing: a refused episode raises :meth:`write`'s error (same type) naming
        it (:func:`write_each`); the episodes before it stay stored, those after it are not.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> with EpisodeWriter(tempfile.mkdtemp()) as w:
            ...     len(w.write_many(SingleAgentEpisode(observations=[i]) for i in range(3)))
            3
        """
        return write_each(self.write, episodes, "stored")

    def _fsync(self, fd: int) -> None:
        if self._sync:
            os.fsync(fd)

    def _write_array(self, path: Path, array: np.ndarray) -> dict[str, int | None]:
        array = np.ascontiguousarray(array)
        with open(path, "wb") as f:
            header = _npy_header(array)
            f.write(header)
            data = memoryview(array.reshape(-1).view(np.uint8).data)
            crc: int | None = None
            if not self._checksums:
                for start in range(0, len(data), _WRITE_SLICE):
                    f.write(data[start : start + _WRITE_SLICE])
            elif len(data) >= PARALLEL_BYTES:
                # The checksum runs on a second thread over the same bytes while this one
                # writes them (zlib and file writes both release the GIL).
                pending = crc_pool().submit(_crc32_slices, data)
                for start in range(0, len(data), _WRITE_SLICE):
                    f.write(data[start : start + _WRITE_SLICE])
                crc = pending.result()
            else:
                f.write(data)
                crc = zlib.crc32(data)
            f.flush()
            self._fsync(f.fileno())
            size = f.tell()
        # The header's CRC-32 is recorded even without data checksums: it is tiny, and a
        # flipped bit in the dtype or shape would otherwise reinterpret every byte silently.
        return {"size": size, "crc32": crc, "hcrc32": zlib.crc32(header)}


_T = TypeVar("_T")

#: What ``DatasetWriter.write_many``'s refusal says of the call's episodes before it.
TAKEN = (
    "taken (buffered: the next flush or close commits them, a `with` block this error leaves "
    "drops them; a shard that filled on the way is committed already)"
)

#: What ``write_many`` names with the episode refused: its writer's refusals of a value.
_REFUSALS = (UnstorableValueError, TypeError, ValueError)


def write_each(write: Callable[[Any], _T], episodes: Iterable[Any], done: str) -> list[_T]:
    """``write`` of each episode in order (``write_many``); a refusal names the episode refused.

    The refusal (an ``UnstorableValueError``, a plain ``TypeError`` or ``ValueError``) comes
    back as a new one of its class: the episode's place in the call (from 0) and id, the
    writer's words, and how many of the call's episodes came before it (``done``: what became
    of them). Other errors (a full disk) are raised as they are.

    Example:
        >>> def write(ep):
        ...     if ep == "b":
        ...         raise UnstorableValueError("infos[1]: a set cannot be stored")
        >>> write_each(write, ["a", "b", "c"], "written")
        Traceback (most recent call last):
        episodes.io.errors.UnstorableValueError: write_many: episode 1 of the call (no id, \
counted from 0) was refused: infos[1]: a set cannot be stored; the 1 episode of the call before \
it was written, those after it were not
    """
    results: list[_T] = []
    for position, episode in enumerate(episodes):
        try:
            results.append(write(episode))
        except _REFUSALS as err:
            if type(err) not in _REFUSALS:  # a subclass: its own words and attributes
                raise
            id_ = getattr(episode, "id_", ...)
            named = "no id" if id_ is ... else f"id {short_repr(id_)}"
            before = (
                f"the {position} episode{'s' if position != 1 else ''} of the call before it "
                f"{'were' if position != 1 else 'was'} {done}"
                if position
                else f"no episode of the call was {done}"
            )
            raise type(err)(
                f"write_many: episode {position} of the call ({named}, counted from 0) was "
                f"refused: {err}; {before}, those after it were not"
            ) from err
    return results


def _npy_header(array: np.ndarray) -> bytes:
    header = np.lib.format.header_data_from_array_1_0(array)
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buf, header)
    except ValueError:  # a header too long for format 1.0
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue()


_WRITE_SLICE = 1 << 20


def _crc32_slices(data: memoryview) -> int:
    crc = 0
    for start in range(0, len(data), _WRITE_SLICE):
        crc = zlib.crc32(data[start : start + _WRITE_SLICE], crc)
    return crc


# ------------------------------------------------------- a failed write, taken back
@contextlib.contextmanager
def removed_if_failed(path: str | os.PathLike[str]) -> Iterator[None]:
    """Takes back what the block made at ``path`` if it fails with no episode stored there.

    That is the files a writer makes at ``path`` (:func:`take_back`), then ``path`` and each
    parent of it that did not exist when the block began, if left empty: what another
    process put there meanwhile stays, and so do the directories holding it. A block that
    fails after some episode was committed at ``path`` (by it or by another writer), or
    while another writer still has the dataset open (it holds a flock on ``shards/`` or
    ``.lock``), leaves everything in place; so does one given a ``path`` that held anything.

    Example:
        >>> import contextlib, tempfile
        >>> from episodes.io import DatasetWriter
        >>> root = tempfile.mkdtemp()
        >>> with contextlib.suppress(KeyError), removed_if_failed(root + "/new/ds"):
        ...     DatasetWriter(root + "/new/ds").close()
        ...     raise KeyError("the env failed")
        >>> os.listdir(root)
        []
    """
    root = Path(path).absolute()  # as the writers': a chdir in the block must not move it
    made = list(itertools.takewhile(lambda p: not os.path.lexists(p), [root, *root.parents]))
    was_empty = not made and root.is_dir() and not any(root.iterdir())
    try:
        yield
    except BaseException:
        locks = _alone_in(root) if made or was_empty else None
        try:
            if locks is not None and not _holds_episodes(root):
                take_back(root, made)  # the block's own error is the one to see
        finally:
            for fd in locks or ():
                os.close(fd)
        raise


#: The names a writer of either format makes in a dataset's directory, besides its
#: temporary files (``TMP_PREFIX``).
_OWN_NAMES = {MANIFEST_FILE, SHARDS_DIR, CHUNKS_DIR, LOCK_FILE, FORMAT_FILE}


def take_back(root: Path, made: Iterable[Path]) -> None:
    """Removes what writers made at ``root``, then each of ``made`` left empty, in order.

    What writers make: the manifest, ``shards/``, v1's ``chunks/``, ``.lock`` and
    ``format.json``, and temporary files (``.tmp-*``); anything else in ``root`` stays, and
    so does each directory of ``made`` (``root`` and the parents a call made for it, deepest
    first) that still holds something. Failures are ignored: what cannot go stays.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> top = Path(tempfile.mkdtemp()); DatasetWriter(top / "a" / "ds").close()
        >>> _ = (top / "a" / "theirs").write_text("kept")
        >>> take_back(top / "a" / "ds", [top / "a" / "ds", top / "a"]); os.listdir(top / "a")
        ['theirs']
    """
    with contextlib.suppress(OSError):
        for entry in list(os.scandir(root)):
            if entry.name in _OWN_NAMES or entry.name.startswith(TMP_PREFIX):
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.unlink(entry.path)
    for directory in made:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _alone_in(root: Path) -> list[int] | None:
    """Exclusive flocks on ``shards/`` and ``.lock``, or None if a writer holds one (or a link).

    Open v2 writers hold a shared flock on ``shards/``, a v1 writer an exclusive one on
    ``.lock``: while the returned descriptors are open, no writer has the dataset open.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter
        >>> root = Path(tempfile.mkdtemp())
        >>> with DatasetWriter(root):
        ...     print(_alone_in(root))
        None
        >>> fds = _alone_in(root); len(fds); [os.close(fd) for fd in fds] and None
        1
    """
    fds: list[int] = []
    try:
        for name in (SHARDS_DIR, LOCK_FILE):
            with contextlib.suppress(FileNotFoundError):
                fds.append(os.open(root / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)))
                fcntl.flock(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a writer holds it, or a symlink (ELOOP)
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _holds_episodes(path: str | os.PathLike[str]) -> bool:
    try:
        return dataset_info(path).num_chunks > 0
    except (DatasetError, OSError):
        return False  # no dataset was started there
