"""A new v2 dataset's manifest, created atomically among writers racing to create it.

A filesystem that lacks what the v2 writers need (file locks, hard links) is refused here with
:class:`~episodes.io.errors.DatasetIOError`, before a manifest makes the directory a dataset.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path
from typing import Any

from episodes.io.errors import NO_LINKS, links_unsupported, try_flock
from episodes.io.format import MANIFEST_FILE, TMP_PREFIX, fsync_dir
from episodes.io.manifest_lines import seal_line
from episodes.io.shards import SHARDS_DIR

__all__ = ["create_manifest"]


def create_manifest(root: Path, header: dict[str, Any], *, sync: bool) -> None:
    """Writes ``root``'s manifest holding ``header`` (aside, then linked into place).

    ``link`` fails when another writer created the manifest first: its header stands then.
    Also makes ``shards/``.

    Raises:
        DatasetIOError: ``root``'s filesystem has no file locks (checked first) or makes no
            hard links; nothing is written into ``root``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> create_manifest(root, {"format": "x"}, sync=False)
        >>> sorted(p.name for p in root.iterdir())
        ['manifest.jsonl', 'shards']
    """
    line = seal_line(header)  # before any file is made: a header it refuses leaves none
    _check_locks(root)  # the writers lock shards/ and the manifest: no dataset without locks
    manifest = root / MANIFEST_FILE
    for _ in range(8):
        tmp = root / f"{TMP_PREFIX}{secrets.token_hex(8)}-{MANIFEST_FILE}"
        with open(tmp, "wb") as f:
            f.write(line)
            if sync:
                os.fsync(f.fileno())
        try:
            os.link(tmp, manifest)  # atomic, and fails if another writer created it first
        except FileExistsError:
            pass
        except FileNotFoundError:
            # A writer that created the manifest first and believes itself alone removed our
            # temporary file as a leftover: the manifest exists now, or we try again.
            if not manifest.exists():
                continue
        except OSError as err:  # FAT, exFAT: no hard links (EPERM), so no atomic manifest
            if err.errno not in NO_LINKS:
                raise
            raise links_unsupported(err, root) from err
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        break
    (root / SHARDS_DIR).mkdir(exist_ok=True)
    if sync:
        fsync_dir(root)


def _check_locks(root: Path) -> None:
    """Raises ``DatasetIOError`` where ``root``'s filesystem has no file locks (held is fine).

    Example:
        >>> import tempfile
        >>> _check_locks(Path(tempfile.mkdtemp()))
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)  # a link to a directory is fine here
    try:  # a shared lock, let go at once: a copy filling root in place holds it exclusively
        try_flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, root)
    finally:
        os.close(fd)
