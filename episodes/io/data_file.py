"""A shard's data file, checked before it is read or mapped: a regular file of the listed size.

:class:`~episodes.io.shard_reader.Shard` checks the file by its path when it opens the shard
(its CRC-32 too for a verifying read) and again through the descriptor each time it opens it
to map a leaf: a file swapped in since (a symlink, a FIFO, one of another size) is refused,
not read or mapped.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "x.arrow"
    >>> _ = path.write_bytes(b"abc")
    >>> fd = open_data(path, 3, "shard x"); os.close(fd)
    >>> open_data(path, 4, "shard x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    episodes.io.errors.CorruptDatasetError: shard x: x.arrow is 3 bytes, expected 4 (...)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from episodes.io.checksums import crc_of_file
from episodes.io.errors import CorruptDatasetError, UnsafeDataError, read_failure

__all__ = ["check_data_file", "check_data_stat", "open_data"]

# A FIFO swapped in for the data file opens at once (and is then refused) instead of blocking.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def check_data_stat(st: os.stat_result, path: Path, size: int, where: str) -> None:
    """Refuses a data file that is no regular file (``UnsafeDataError``) or not ``size`` bytes.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> check_data_stat(os.lstat(folder), folder, 0, "shard x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.io.errors.UnsafeDataError: shard x: ... is not a regular file (refused)
    """
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeDataError(f"{where}: {path.name} is not a regular file (refused)")
    if st.st_size != size:
        raise CorruptDatasetError(
            f"{where}: {path.name} is {st.st_size} bytes, expected {size} (truncated or altered)"
        )


def check_data_file(path: Path, size: int, where: str, crc32: int | None = None) -> None:
    """Checks the file at ``path`` (not followed if a link), and its CRC-32 if one is given.

    Example:
        >>> import tempfile, zlib
        >>> path = Path(tempfile.mkdtemp()) / "x.arrow"
        >>> _ = path.write_bytes(b"abc")
        >>> check_data_file(path, 3, "shard x", zlib.crc32(b"abc"))
        >>> check_data_file(path, 3, "shard x", 0)
        Traceback (most recent call last):
        ...
        episodes.io.errors.CorruptDatasetError: shard x: CRC-32 mismatch (the data is corrupted)
    """
    try:
        st = os.lstat(path)
    except OSError as err:
        raise read_failure(err, f"{where}: data file {path.name}") from err
    check_data_stat(st, path, size, where)
    if crc32 is not None:
        fd = open_data(path, size, where)
        try:
            crc = crc_of_file(fd)
        except OSError as err:
            raise read_failure(err, f"{where}: {path.name}") from err
        finally:
            os.close(fd)
        if crc != crc32:
            raise CorruptDatasetError(f"{where}: CRC-32 mismatch (the data is corrupted)")


def open_data(path: Path, size: int, where: str) -> int:
    """The data file opened without following links, checked again through the descriptor.

    The path was checked before; checking the opened file too means a file swapped in since
    (a symlink, a FIFO, one of another size) is refused, not read or mapped. Out of
    descriptors (EMFILE) is a ``DatasetIOError`` (no damage: a reader tries again later).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "x.arrow"
        >>> _ = path.write_bytes(b"abc")
        >>> fd = open_data(path, 3, "shard x"); os.read(fd, 3); os.close(fd)
        b'abc'
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:  # EMFILE is no damage: DatasetIOError, which is not cached
        raise read_failure(err, f"{where}: {path.name}") from err
    try:
        try:
            st = os.fstat(fd)
        except OSError as err:
            raise read_failure(err, f"{where}: {path.name}") from err
        check_data_stat(st, path, size, where)
    except BaseException:
        os.close(fd)
        raise
    return fd
