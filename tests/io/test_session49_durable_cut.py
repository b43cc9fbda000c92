"""A failed manifest fsync: the shard's files go only once the cut-back manifest is on disk.

A line whose fsync failed may have reached the disk; had its files been removed before the
cut was synced, a crash could bring back a line listing files that are gone.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io import format as format_module


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.full(2, i + t, np.float32) for t in range(3)],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
    )


def _shards(path: Path) -> int:
    return len(list((path / "shards").iterdir()))


# (case, how many fsyncs fail from the manifest line's own on, shard files kept after it)
CASES = [
    ("the line's fsync fails, the cut's succeeds: files removed", 1, False),
    ("the cut's fsync fails too: files kept for the next lone writer", 2, True),
]


@pytest.mark.parametrize(("name", "failing", "kept"), CASES, ids=[c[0] for c in CASES])
def test_shard_files_go_only_after_a_durable_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, failing: int, kept: bool
) -> None:
    path = tmp_path / "ds"
    DatasetWriter(path).close()
    before = _shards(path)
    writer = DatasetWriter(path)  # sync=True: the manifest line is fsynced
    writer.write(_episode(1))
    real_fsync, manifest = os.fsync, os.stat(path / "manifest.jsonl").st_ino
    left = {"n": failing}

    def fsync(fd: int) -> None:
        if os.fstat(fd).st_ino == manifest and left["n"] > 0:
            left["n"] -= 1
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    with monkeypatch.context() as m:
        m.setattr(format_module.os, "fsync", fsync)
        with pytest.raises(OSError, match="Input/output error"):
            writer.flush()
    assert left["n"] == 0  # the line's fsync, and the cut's where asked for, were tried
    assert _shards(path) == before + (2 if kept else 0)
    assert list(read_episodes(path)) == []
    writer.flush()  # the buffered episode commits on the retry
    writer.close()
    assert [e.id_ for e in read_episodes(path)] == ["e1"]
