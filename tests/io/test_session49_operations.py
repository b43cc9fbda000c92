"""Operating a dataset on a full disk: a commit whose manifest line could not be appended."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes, validate_dataset
from episodes.io import shard_writer as shard_writer_module


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.full(2, i + t, np.float32) for t in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        len_lookback_buffer=0,
    )


def _shard_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "shards").iterdir())


def _full_manifest(monkeypatch: pytest.MonkeyPatch, failures: int, written: int) -> list[int]:
    """The next ``failures`` manifest appends fail as on a full disk after ``written`` bytes.

    The real ``append_line`` runs on a shortened line, so its own clean-up (cutting the file
    back to its old end) is what the writer sees.
    """
    real, calls = shard_writer_module.append_line, []

    def append_line(fd: int, line: bytes, sync: bool = True) -> None:
        calls.append(1)
        if len(calls) > failures:
            return real(fd, line, sync)
        with monkeypatch.context() as m:
            m.setattr(os, "write", _partial_write(os.write, written))
            real(fd, line, sync)

    monkeypatch.setattr(shard_writer_module, "append_line", append_line)
    return calls


def _partial_write(os_write: Any, written: int) -> Any:
    """An ``os.write`` that takes ``written`` bytes, then fails with ENOSPC."""
    state = {"done": 0}

    def write(fd: int, data: Any) -> int:
        if state["done"] >= written:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = os_write(fd, bytes(data)[: written - state["done"]])
        state["done"] += n
        return n

    return write


# (case name, data format, bytes of the line written before the disk is full)
CASES = [
    ("arrow, nothing of the line written", "arrow", 0),
    ("arrow, part of the line written", "arrow", 40),
    ("parquet, nothing of the line written", "parquet", 0),
    ("parquet, part of the line written", "parquet", 40),
]


@pytest.mark.parametrize(("name", "data_format", "written"), CASES, ids=[c[0] for c in CASES])
def test_a_failed_manifest_append_leaves_no_shard_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, data_format: str, written: int
) -> None:
    # A full disk that lets a shard's files be written but not its manifest line: each
    # failed commit used to leave a whole unlisted shard (up to shard_bytes) on the disk that
    # is full, one more per retry, until a writer opened alone.
    path = tmp_path / "ds"
    with DatasetWriter(path, data_format=data_format, sync=False) as w:
        w.write(_episode(0))
    committed = _shard_files(path)
    w = DatasetWriter(path, data_format=data_format, sync=False)
    w.write(_episode(1))
    w.write(_episode(2))
    _full_manifest(monkeypatch, 2, written)
    for _ in range(2):
        with pytest.raises(OSError, match="No space left"):
            w.flush()
        assert _shard_files(path) == committed  # nothing of the failed commit stays
        assert [e.id_ for e in read_episodes(path)] == ["e0"]
    report = validate_dataset(path)
    assert report.ok and report.notes == []
    w.flush()  # space again: the buffered episodes are committed, once
    w.close()
    assert [e.id_ for e in read_episodes(path)] == ["e0", "e1", "e2"]
    assert len(_shard_files(path)) == len(committed) + 2
    assert validate_dataset(path).notes == []


def test_an_interrupted_append_still_keeps_the_shard_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a failure that append_line answered by cutting the manifest back removes them; an
    # interrupt (the line may be in) leaves them to the next writer that opens alone.
    path = tmp_path / "ds"
    w = DatasetWriter(path, sync=False)
    w.write(_episode(1))

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(shard_writer_module, "append_line", interrupted)
        with pytest.raises(KeyboardInterrupt):
            w.flush()
    assert len(_shard_files(path)) == 2  # the unlisted shard: data file and index
    w.flush()
    w.close()
    assert [e.id_ for e in read_episodes(path)] == ["e1"]
