"""Copy-on-write memory maps of large leaves, a bounded number alive at once.

Reading hands each large leaf (1 MiB or more) to its episode as a private, copy-on-write map
of the file's bytes: nothing is copied, writes stay in memory, the file never changes. Before
Python 3.13 every such map holds a duplicate of the file's descriptor for as long as it lives,
so a process holding more read episodes than its descriptor limit could open no file at all
(from 3.13 the maps are made without one). Maps are counted here on every version (each
also takes address space): while a quarter of the soft ``RLIMIT_NOFILE`` are alive, or
when the system refuses one (out of descriptors or address space), the leaf is read into
memory instead. Either way the episode gets a writable array with the file's bytes.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = f.write(b"abcdefgh")
    ...     f.flush()
    ...     mapped = map_copy_on_write(f.fileno(), 0, 8)
    >>> bytes(mapped[:3]), live_maps() >= 1
    (b'abc', True)
"""

from __future__ import annotations

import itertools
import mmap
import sys
import weakref
from typing import Any

__all__ = ["live_maps", "map_copy_on_write", "map_limit", "may_map", "track_map"]

# From Python 3.13 a map need not keep a duplicate of the descriptor (only its size() and
# resize() use it, and these maps are never resized): asked for, a map costs no descriptor.
_NO_FD: dict[str, Any] = {"trackfd": False} if sys.version_info >= (3, 13) else {}

try:
    import resource
except ImportError:  # Windows: no descriptor limit to read
    resource = None  # type: ignore[assignment]

_DEFAULT_LIMIT = 256  # where the descriptor limit cannot be read
_MAX_LIMIT = 1 << 16  # an unlimited descriptor limit still has vm.max_map_count maps
_live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_tokens = itertools.count()


def map_limit() -> int:
    """Leaf maps allowed alive at once: a quarter of the soft descriptor limit (read each time).

    Example:
        >>> map_limit() >= 1
        True
    """
    if resource is None:
        return _DEFAULT_LIMIT
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return _MAX_LIMIT
    return max(1, min(soft, 4 * _MAX_LIMIT) // 4)


def live_maps() -> int:
    """Leaf maps alive now (each holds a file descriptor until its last view goes).

    Example:
        >>> isinstance(live_maps(), int)
        True
    """
    return len(_live)


def may_map() -> bool:
    """Whether another leaf may be mapped (fewer than :func:`map_limit` alive).

    Example:
        >>> may_map() == (live_maps() < map_limit())
        True
    """
    return len(_live) < map_limit()


def track_map(mapped: Any) -> None:
    """Counts ``mapped`` (an ``mmap.mmap``) as alive until it is garbage.

    Example:
        >>> m = mmap.mmap(-1, 16); before = live_maps(); track_map(m)
        >>> live_maps() - before
        1
    """
    _live[next(_tokens)] = mapped


def map_copy_on_write(fd: int, offset: int, length: int) -> mmap.mmap | None:
    """A tracked copy-on-write map of ``length`` bytes of ``fd`` from ``offset``, or None.

    ``offset`` must be a multiple of ``mmap.ALLOCATIONGRANULARITY``. None means: read the
    bytes instead (too many maps alive, or the system refused one: out of descriptors or
    address space).

    Raises:
        ValueError: The file is shorter than ``offset + length`` (it changed since checked).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as f:
        ...     _ = f.write(b"abcd"); f.flush()
        ...     mapped = map_copy_on_write(f.fileno(), 0, 4)
        >>> mapped[0] = ord("x"); bytes(mapped)  # changes stay in memory
        b'xbcd'
    """
    if not may_map():
        return None
    try:
        mapped = mmap.mmap(fd, length, access=mmap.ACCESS_COPY, offset=offset, **_NO_FD)
    except OSError:  # EMFILE, ENFILE, ENOMEM: the caller reads the bytes instead
        return None
    track_map(mapped)
    return mapped
