"""Putting a written shard in place: its data file finished, its index written, both renamed.

``DatasetWriter`` commits a shard in two steps: :func:`publish_shard` (this module) makes the
shard's two files exist under their final names, then the writer appends the shard's manifest
line. A failure here leaves nothing under a final name: the data file goes back under its
temporary one (where a read-back of a streamed shard, and the clean-up, look for it).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io.shard_codec import encode_rows
    >>> from episodes.io.shard_stream import write_episodes
    >>> from episodes.io.shards import temp_data_file
    >>> shards = Path(tempfile.mkdtemp())
    >>> enc = encode_rows(SingleAgentEpisode("a", observations=[0, 1], actions=[1], rewards=[1.0]))
    >>> data = write_episodes(temp_data_file(shards, "0" * 16, "arrow"), [enc.columns], "arrow",
    ...                       compression=None, sync=False)
    >>> entry = publish_shard(shards, "0" * 16, data, [enc], [], "arrow", None, sync=False)
    >>> entry.name, [row.id_ for row in entry.episodes], sorted(p.name for p in shards.iterdir())
    ('0000000000000000', ['a'], ['0000000000000000.arrow', '0000000000000000.json'])
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from episodes.io.format import FORMAT_NAME, TMP_PREFIX, fsync_dir
from episodes.io.shard_codec import EncodedEpisode
from episodes.io.shard_stream import ShardStream, WrittenFile
from episodes.io.shards import DATA_SUFFIX, INDEX_SUFFIX, V2, EpisodeRow, ShardEntry

__all__ = ["cut_back", "publish_shard", "unpublish_shard"]


def publish_shard(
    shards: Path,
    name: str,
    data: ShardStream | WrittenFile,
    pending: list[EncodedEpisode],
    spaces: list[Any],
    data_format: str,
    compression: str | None,
    *,
    sync: bool,
) -> ShardEntry:
    """Finishes the data file, writes the index, and renames both into place.

    Returns the shard's manifest entry (its line is the caller's to append).
    """
    suffix = DATA_SUFFIX[data_format]
    tmp_data = data.path
    tmp_index = shards / f"{TMP_PREFIX}{name}{INDEX_SUFFIX}"
    final_data = shards / f"{name}{suffix}"
    ours: tuple[int, int] | None = None
    try:
        size, crc = data.finish()
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
                "format": data_format,
                "compression": compression,
                "size": size,
                "crc32": crc,
                "rows": start,
            },
            "spaces": spaces,
            "episodes": episodes,
        }
        raw = json.dumps(index, allow_nan=False).encode("utf-8")
        with open(tmp_index, "wb") as f:
            f.write(raw)
            if sync:
                os.fsync(f.fileno())
        # Only this file is ever moved back: another process's shard of the name stays.
        ours = _identity(tmp_data)
        os.rename(tmp_data, final_data)
        if isinstance(data, ShardStream):
            data.path = final_data  # where a read-back after a failed commit looks
        os.rename(tmp_index, shards / f"{name}{INDEX_SUFFIX}")
    except BaseException:
        tmp_index.unlink(missing_ok=True)
        if ours is not None and _identity(final_data) == ours and not tmp_data.exists():
            os.rename(final_data, tmp_data)  # back where the read-back and clean-up look
            if isinstance(data, ShardStream):
                data.path = tmp_data
        raise
    if sync:
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
    return ShardEntry(name, data_format, hashlib.sha256(raw).hexdigest(), len(raw), size, rows)


def cut_back(fd: int, end: int, *, sync: bool = True) -> bool:
    """Whether the manifest open at ``fd`` surely ends at ``end`` again after a failed append.

    ``append_line`` cuts the file back to where it ended when a write or fsync fails; where it
    did, the shard's line is not in, and nothing lists the shard's files. With ``sync`` the cut
    is fsynced first: a line whose own fsync failed may have reached the disk, and a crash
    before the cut does would bring it back, listing files removed meanwhile. Unknown (a
    failed ``fstat`` or fsync) counts as False: the line may be in.

    Example:
        >>> import tempfile
        >>> fd, name = tempfile.mkstemp(); _ = os.write(fd, b"abc")
        >>> cut_back(fd, 3), cut_back(fd, 0); os.close(fd)
        (True, False)
    """
    try:
        if os.fstat(fd).st_size != end:
            return False
        if sync:
            os.fsync(fd)
    except OSError:
        return False
    return True


def unpublish_shard(shards: Path, name: str, data_format: str) -> None:
    """Removes shard ``name``'s files, published by a commit whose manifest line is not in.

    Only while this writer holds ``shards/`` (shared): no writer cleans up meanwhile, so the
    files under the shard's random name are the ones this commit renamed there.

    Example:
        >>> import tempfile
        >>> shards = Path(tempfile.mkdtemp())
        >>> for suffix in (".arrow", ".json"):
        ...     _ = (shards / f"{'0' * 16}{suffix}").write_bytes(b"x")
        >>> unpublish_shard(shards, "0" * 16, "arrow"); list(shards.iterdir())
        []
    """
    for suffix in (DATA_SUFFIX[data_format], INDEX_SUFFIX):
        (shards / f"{name}{suffix}").unlink(missing_ok=True)


def _identity(path: Path) -> tuple[int, int] | None:
    """``path``'s device and inode (None if nothing is there): which file a name is now."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
