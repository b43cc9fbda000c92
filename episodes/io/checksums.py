"""Checksums computed beside large writes: a CRC-32 on a second thread, one per process.

Example:
    >>> import io
    >>> sink = CrcFile(io.BytesIO()); _ = sink.write(b"abc")
    >>> sink.crc == zlib.crc32(b"abc") == crc_pool().submit(zlib.crc32, b"abc").result()
    True
"""

from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["PARALLEL_BYTES", "CrcFile", "crc_of_file", "crc_pool"]

PARALLEL_BYTES = 4 << 20
_CRC_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episodes-crc")
# Verification reads through one reused buffer small enough to stay in cache, so the CRC runs
# over hot bytes: faster than a CRC over mapped pages or over a fresh buffer per read.
_VERIFY_BLOCK = 1 << 20


def _new_pool_after_fork() -> None:
    # A forked child inherits the pool's bookkeeping but not its thread: work submitted to it
    # would wait forever.
    global _CRC_POOL
    _CRC_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episodes-crc")


os.register_at_fork(after_in_child=_new_pool_after_fork)


def crc_pool() -> ThreadPoolExecutor:
    """The thread that computes checksums beside large writes (remade in a forked child).

    Example:
        >>> crc_pool().submit(zlib.crc32, b"abc").result() == zlib.crc32(b"abc")
        True
    """
    return _CRC_POOL


class CrcFile:
    """A write-only file that computes the CRC-32 and size of what passes through it.

    Example:
        >>> import io, zlib
        >>> sink = CrcFile(io.BytesIO())
        >>> sink.write(b"abc"), sink.size, sink.crc == zlib.crc32(b"abc")
        (3, 3, True)
    """

    def __init__(self, f: Any):
        self._f = f
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        """Writes ``data`` and adds it to the checksum."""
        view = memoryview(data).cast("B")
        if len(view) >= PARALLEL_BYTES:
            # The checksum runs on a second thread while this one writes the same bytes
            # (zlib and file writes both release the GIL); both end before we return, as
            # the caller may reuse the buffer.
            pending = crc_pool().submit(zlib.crc32, view, self.crc)
            self._f.write(view)
            self.crc = pending.result()
        else:
            self.crc = zlib.crc32(view, self.crc)
            self._f.write(view)
        self.size += len(view)
        return len(view)

    def flush(self) -> None:
        """Flushes the file."""
        self._f.flush()

    def tell(self) -> int:
        """Bytes written so far."""
        return self.size

    def close(self) -> None:
        """Marks it closed (the file itself belongs to the caller)."""
        self.closed = True

    def writable(self) -> bool:
        """Always true."""
        return True


def crc_of_file(fd: int) -> int:
    """CRC-32 of every byte of an open file, read through one reused cache-sized buffer.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as f:
        ...     _ = f.write(b"abc"); _ = f.seek(0)
        ...     crc_of_file(f.fileno()) == zlib.crc32(b"abc")
        True
    """
    buf = bytearray(_VERIFY_BLOCK)
    view = memoryview(buf)
    crc = 0
    while n := os.readv(fd, [buf]):
        crc = zlib.crc32(view[:n], crc)
    return crc
