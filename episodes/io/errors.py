"""Error types of the on-disk dataset format.

Every problem found while reading a dataset raises a :class:`DatasetError` subclass, so callers
can catch one type for files that are missing, damaged, unsafe or from an unknown format
version. Values that cannot be stored safely are refused at write time with
:class:`UnstorableValueError` (also a ``TypeError``), before anything touches the disk.

Example:
    >>> issubclass(CorruptDatasetError, DatasetError)
    True
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import TypeVar

__all__ = [
    "CorruptDatasetError",
    "DatasetError",
    "DatasetIOError",
    "DatasetLockedError",
    "EpisodeNotFoundError",
    "LOCK_HELD",
    "NO_LINKS",
    "NotADatasetError",
    "UnsafeDataError",
    "UnstorableValueError",
    "UnsupportedVersionError",
    "links_unsupported",
    "read_failure",
    "reraisable",
    "stat_listed_file",
    "stat_or_none",
    "try_flock",
    "without_frames",
]

_E = TypeVar("_E", bound=BaseException)


class DatasetError(Exception):
    """Base type of every dataset error (read and write).

    Example:
        >>> from episodes.io import dataset_info
        >>> try:
        ...     dataset_info("/nonexistent/dataset")
        ... except DatasetError as err:
        ...     print(type(err).__name__)
        NotADatasetError
    """


class NotADatasetError(DatasetError):
    """The path does not exist or is not an episodes dataset directory.

    Example:
        >>> import tempfile
        >>> from episodes.io import dataset_info
        >>> try:
        ...     dataset_info(tempfile.mkdtemp())  # an empty directory
        ... except NotADatasetError:
        ...     print("not a dataset")
        not a dataset
    """


class UnsupportedVersionError(DatasetError):
    """The dataset (or one of its files) declares a format version this library cannot read.

    Also a v2 dataset whose Arrow-stored arrays were written on a machine of the other byte
    order: reading across byte orders is not supported.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter, EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> EpisodeWriter(path).close()  # a format v1 dataset
        >>> try:
        ...     DatasetWriter(path)
        ... except UnsupportedVersionError:
        ...     print("v1: use EpisodeWriter or migrate")
        v1: use EpisodeWriter or migrate
    """


class CorruptDatasetError(DatasetError):
    """A file is missing, truncated, malformed, or disagrees with its checksum or metadata.

    Example:
        >>> import os, tempfile
        >>> from pathlib import Path
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, read_episodes
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0]))
        >>> os.truncate(next(Path(path, "shards").glob("*.arrow")), 100)  # damage the shard
        >>> try:
        ...     list(read_episodes(path))
        ... except CorruptDatasetError:
        ...     print("truncated shard")
        truncated shard
    """


class UnsafeDataError(CorruptDatasetError):
    """A file could run code when loaded (pickles, object arrays) or points outside the dataset.

    Such files are refused without being loaded.

    Example:
        >>> issubclass(UnsafeDataError, CorruptDatasetError)
        True
    """


class DatasetIOError(DatasetError, OSError):
    """The system failed a read (out of file descriptors or memory, an I/O error, no permission).

    Nothing is known to be wrong with the dataset: the same read may succeed later, so such a
    failure is never remembered as damage. Also an ``OSError`` (its ``errno`` is the system's).
    A writer raises it too where the filesystem lacks what it needs: file locks
    (:func:`try_flock`), or hard links for a new v2 dataset (:func:`links_unsupported`).

    Example:
        >>> import errno
        >>> err = DatasetIOError(errno.EMFILE, "cannot read shard x: Too many open files")
        >>> isinstance(err, OSError), err.errno == errno.EMFILE
        (True, True)
    """


def read_failure(err: OSError, what: str) -> DatasetError:
    """The error to raise for an ``OSError`` met while reading ``what``.

    A missing file (or a path through a non-directory) is damage, and so is an ``OSError``
    without an errno (pyarrow raises those for a damaged Parquet file); a symlink is unsafe.
    Any other errno (``EMFILE``, ``ENOMEM``, ``EIO``, ``EACCES``...) is about this process or
    machine, not the data: :class:`DatasetIOError`, which readers do not remember as damage.

    Example:
        >>> import errno
        >>> type(read_failure(OSError(errno.EMFILE, "Too many open files"), "x")).__name__
        'DatasetIOError'
        >>> type(read_failure(FileNotFoundError(errno.ENOENT, "No such file"), "x")).__name__
        'CorruptDatasetError'
    """
    if err.errno in (errno.ENOENT, errno.ENOTDIR):
        return CorruptDatasetError(f"{what} is missing")
    if err.errno in (errno.ELOOP, errno.EMLINK):  # what O_NOFOLLOW reports for a symlink
        return UnsafeDataError(f"{what} is a symlink (refused)")
    if err.errno is None:
        return CorruptDatasetError(f"cannot read {what}: {err}")
    return DatasetIOError(err.errno, f"cannot read {what}: {err.strerror or err}")


#: The errnos of a failed ``flock`` that mean another process holds the lock (``EACCES``:
#: where ``flock`` is emulated with ``fcntl`` locks). Any other means no file locks there.
LOCK_HELD = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})

#: The errnos of a failed ``link`` of a file just made (one link, ours) that mean the
#: filesystem makes no hard links: ``EPERM`` (Linux's FAT and exFAT), ``ENOTSUP`` (macOS),
#: ``ENOSYS`` (FUSE), ``EMLINK`` (at most one link per file). ``EEXIST`` is not among them.
NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK})


def try_flock(fd: int, operation: int, path: str | os.PathLike[str]) -> OSError | None:
    """``fcntl.flock(fd, operation)``: None once taken, the ``OSError`` if another holds it.

    A lock held elsewhere is only returned for a non-blocking ``operation`` (``LOCK_NB``), and
    raised otherwise. Any other failure means ``path``'s filesystem has no file locks (Lustre
    mounted ``noflock``: ``ENOSYS``; NFS without a lock manager: ``ENOLCK``).

    Raises:
        DatasetIOError: The filesystem has no file locks, which the writers need to stay
            crash-safe; the ``OSError`` chained, its ``errno`` kept.

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp()
        >>> fd, other = os.open(path, os.O_RDONLY), os.open(path, os.O_RDONLY)
        >>> try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, path) is None
        True
        >>> type(try_flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB, path)).__name__
        'BlockingIOError'
        >>> os.close(fd); os.close(other)
    """
    try:
        fcntl.flock(fd, operation)
    except OSError as err:
        if err.errno in LOCK_HELD:
            if operation & fcntl.LOCK_NB:
                return err
            raise
        raise DatasetIOError(
            err.errno,
            f"cannot lock {path} ({err.strerror or err}): its filesystem does not support "
            "file locks (flock), which the dataset writers need to stay crash-safe; write "
            "the dataset on another filesystem",
        ) from err
    return None


def links_unsupported(err: OSError, path: str | os.PathLike[str]) -> DatasetIOError:
    """The error to raise where linking a file into ``path`` failed with an errno of NO_LINKS.

    Example:
        >>> str(links_unsupported(PermissionError(errno.EPERM, "Not permitted"), "/mnt/ds"))
        ... # doctest: +ELLIPSIS
        '[Errno 1] /mnt/ds: its filesystem does not support hard links (Not permitted), ...'
    """
    return DatasetIOError(
        err.errno,
        f"{path}: its filesystem does not support hard links ({err.strerror or err}), which "
        "a new format v2 dataset needs to appear atomically; write format v1 there "
        "(EpisodeWriter, `episodes record --format 1`) or use another filesystem",
    )


def without_frames(err: _E) -> _E:
    """``err`` with its traceback and those of its causes dropped, for keeping it.

    A kept traceback keeps the locals of every frame it passed alive (a half-opened shard's
    memory map and file descriptor, a decompressed batch) for as long as the error is kept.

    Example:
        >>> try:
        ...     raise CorruptDatasetError("damaged") from ValueError("bad byte")
        ... except CorruptDatasetError as caught:
        ...     kept = without_frames(caught)
        >>> kept.__traceback__, kept.__cause__.__traceback__, str(kept)
        (None, None, 'damaged')
    """
    pending: list[BaseException | None] = [err]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        pending += [current.__cause__, current.__context__]
    return err


def reraisable(err: _E) -> _E:
    """A copy of a kept error to raise again (same type, message and cause).

    Raising the kept error itself would add each raise's frames to its traceback, and keep
    them alive, for as long as it is kept.

    Example:
        >>> kept = without_frames(CorruptDatasetError("shard x: damaged"))
        >>> copy = reraisable(kept)
        >>> type(copy).__name__, str(copy), copy is kept
        ('CorruptDatasetError', 'shard x: damaged', False)
    """
    copy = type(err)(*err.args)
    copy.__dict__.update(err.__dict__)
    copy.__cause__ = err.__cause__
    copy.__suppress_context__ = True
    return copy


def stat_listed_file(path: Path, label: str, size: int) -> os.stat_result:
    """``lstat`` of a file a dataset lists with ``size`` bytes, checked before it is read.

    Raises:
        CorruptDatasetError: It is missing, or of another size (truncated or altered).
        UnsafeDataError: It is not a regular file (a symlink, a device, a directory).
        DatasetIOError: The system failed the ``lstat`` (no permission, an I/O error).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "leaf.npy"; _ = path.write_bytes(b"abc")
        >>> stat_listed_file(path, "chunk/leaf.npy", 3).st_size
        3
        >>> stat_listed_file(path, "chunk/leaf.npy", 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        episodes.io.errors.CorruptDatasetError: chunk/leaf.npy is 3 bytes, expected 4 ...
    """
    try:
        st = os.lstat(path)
    except OSError as err:  # no permission, an I/O error: DatasetIOError naming the path
        missing = err.errno in (errno.ENOENT, errno.ENOTDIR)
        raise read_failure(err, label if missing else f"{label} ({path})") from err
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeDataError(f"{label} is not a regular file (symlinks are refused)")
    if st.st_size != size:
        raise CorruptDatasetError(
            f"{label} is {st.st_size} bytes, expected {size} (truncated or altered)"
        )
    return st


def stat_or_none(path: Path, *, follow: bool = True) -> os.stat_result | None:
    """``stat`` (``lstat`` if not ``follow``) of ``path``, or None where nothing is there.

    What ``Path.exists`` and ``is_dir`` ask, without taking a failed look for an answer: a
    path that is missing (or runs through a non-directory, or a symlink loop) is None; no
    permission or an I/O error is :class:`DatasetIOError` naming the path, never "no dataset".

    Example:
        >>> stat_or_none(Path("/nonexistent/format.json")) is None
        True
        >>> import stat, tempfile
        >>> stat.S_ISDIR(stat_or_none(Path(tempfile.mkdtemp())).st_mode)
        True
    """
    try:
        return os.stat(path, follow_symlinks=follow)
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
            return None
        raise DatasetIOError(err.errno, f"cannot look at {path}: {err.strerror or err}") from err


class EpisodeNotFoundError(DatasetError):
    """No committed chunk carries the requested episode id.

    Example:
        >>> import tempfile
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.io import DatasetWriter, load_episode
        >>> path = tempfile.mkdtemp()
        >>> with DatasetWriter(path) as w:
        ...     w.write(SingleAgentEpisode("a", observations=[0]))
        >>> try:
        ...     load_episode(path, "b")
        ... except EpisodeNotFoundError:
        ...     print("no episode 'b'")
        no episode 'b'
    """


class DatasetLockedError(DatasetError):
    """Another writer holds the dataset's lock.

    Example:
        >>> import tempfile
        >>> from episodes.io import EpisodeWriter
        >>> path = tempfile.mkdtemp()
        >>> with EpisodeWriter(path):
        ...     try:
        ...         EpisodeWriter(path)
        ...     except DatasetLockedError:
        ...         print("locked")
        locked
    """


class UnstorableValueError(DatasetError, TypeError):
    """A value cannot be stored safely (refused at write time, nothing is written).

    Example:
        >>> issubclass(UnstorableValueError, TypeError)
        True
    """
