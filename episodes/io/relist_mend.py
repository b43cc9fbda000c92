"""What a stopped move or a manifest put back leaves for ``relist`` to mend first.

:func:`~episodes.io.unlisted.relist_shards` calls :func:`join_split` (a shard whose two files
a killed move left one in ``shards/``, one in ``unlisted/shards/``) and
:func:`restore_listed` (quarantined files a manifest line lists) before it checks the
unlisted shards. Both run under the exclusive lock ``relist`` holds on ``shards/``.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp()); os.makedirs(root / "shards")
    >>> fd = os.open(root / "shards", os.O_RDONLY)
    >>> join_split(root, [], fd, dry_run=True, sync=False), restore_listed(root, [], fd,
    ...     dry_run=True, sync=False)
    (set(), [])
    >>> os.close(fd)
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from episodes.io.quarantine import open_quarantine
from episodes.io.shards import DATA_SUFFIX, INDEX_SUFFIX, SHARD_NAME, SHARDS_DIR, ShardEntry

__all__ = ["SPLIT", "join_split", "plain", "restore_listed"]

_MAX_INDEX_BYTES = 1 << 30  # a reader's bound


def plain(dir_fd: int, name: str) -> bool:
    """Whether ``name`` in the directory ``dir_fd`` is a regular file (a link is not).

    Example:
        >>> import tempfile
        >>> fd = os.open(tempfile.mkdtemp(), os.O_RDONLY); os.mkdir("d", dir_fd=fd)
        >>> plain(fd, "d"); os.close(fd)
        False
    """
    return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


#: Why a dry run keeps a shard whose files lie in both places.
SPLIT = (
    "its files lie partly in shards/, partly in unlisted/shards/ (a move that was stopped): "
    "relist without --dry-run joins them in shards/, then checks it"
)


def _shard_names(dir_fd: int) -> dict[str, set[str]]:
    """The plain files named as shard files in a directory, by shard name."""
    suffixes = (*DATA_SUFFIX.values(), INDEX_SUFFIX)
    stems: dict[str, set[str]] = {}
    for name in os.listdir(dir_fd):
        stem, _, rest = name.partition(".")
        if SHARD_NAME.match(stem) and f".{rest}" in suffixes and plain(dir_fd, name):
            stems.setdefault(stem, set()).add(name)
    return stems


def join_split(
    root: Path, entries: list[ShardEntry], shards_fd: int | None, *, dry_run: bool, sync: bool
) -> set[str]:
    """Moves into ``shards/`` the unlisted shards whose files lie in both places.

    A move killed between a shard's files (a relist moving it back, a lone writer moving it
    out) leaves its data file in one place and its index in the other: each half alone is
    refused, and discarding the quarantined half would lose the shard. Joined in ``shards/``,
    it is checked as a shard left unlisted there is. Returns the shards left split (a dry run
    moves nothing).
    """
    into = open_quarantine(root, create=False)
    if into is None:
        return set()
    try:
        if shards_fd is None:
            return set()
        listed = {e.name for e in entries}
        out, here = _shard_names(into), _shard_names(shards_fd)
        split = {
            stem
            for stem in out.keys() & here.keys()
            if stem not in listed and not out[stem] & here[stem]
        }
        if dry_run or not split:
            return split
        for stem in sorted(split):
            for name in sorted(out[stem]):
                os.rename(name, name, src_dir_fd=into, dst_dir_fd=shards_fd)
        if sync:
            os.fsync(shards_fd)
            os.fsync(into)
        return set()  # joined: each is a shard unlisted in shards/ now
    finally:
        os.close(into)


def restore_listed(
    root: Path, entries: list[ShardEntry], shards_fd: int | None, *, dry_run: bool, sync: bool
) -> list[tuple[ShardEntry, tuple[str, ...], str | None]]:
    """Moves back the quarantined files of shards a manifest line lists (and shards/ lacks).

    A manifest put back whole (from a backup, or a copy run again) after a lone writer moved
    the shards of its then lost lines out lists files that are in ``unlisted/shards/``: the
    readers fail on them until they are back. Each is moved only where its size (and the
    index's SHA-256) is the line's.
    """
    into = open_quarantine(root, create=False)
    if into is None:
        return []
    try:
        out = set(os.listdir(into))
        restored: list[tuple[ShardEntry, tuple[str, ...], str | None]] = []
        for e in entries:
            wanted = [e.name + DATA_SUFFIX[e.data_format], e.name + INDEX_SUFFIX]
            names = [n for n in wanted if n in out and _missing(shards_fd, root, n)]
            if not names:
                continue
            problem = _unlike(into, e, names)
            if problem is None and not dry_run:
                assert shards_fd is not None
                for name in names:  # data first, as a commit renames them
                    os.rename(name, name, src_dir_fd=into, dst_dir_fd=shards_fd)
                if sync:
                    os.fsync(shards_fd)
                    os.fsync(into)
            restored.append((e, tuple(names), problem))
        return restored
    finally:
        os.close(into)


def _missing(shards_fd: int | None, root: Path, name: str) -> bool:
    return shards_fd is None or not os.path.lexists(root / SHARDS_DIR / name)


def _unlike(into: int, entry: ShardEntry, names: list[str]) -> str | None:
    """Why quarantined ``names`` are not the files ``entry``'s line lists, or None."""
    for name in names:
        if not plain(into, name):
            return f"{name} is no plain file"
        size = os.stat(name, dir_fd=into, follow_symlinks=False).st_size
        if name.endswith(INDEX_SUFFIX):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=into)
            with os.fdopen(fd, "rb") as f:
                sha = hashlib.sha256(f.read(_MAX_INDEX_BYTES + 1)).hexdigest()
            if (size, sha) != (entry.index_size, entry.index_sha256):
                return f"its listed shard's index differs from {name} (size or SHA-256)"
        elif size != entry.data_size:
            return f"its listed shard's data file differs in size from {name}"
    return None
