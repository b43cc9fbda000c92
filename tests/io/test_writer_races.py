"""Races between writers, copies and saves: what another process does in between.

A v2 writer's ``close()`` unlocks before it closes (a forked child holds a copy of the
descriptor, and with it the lock, otherwise); a writer opening a dataset that a failed
``record`` takes back meanwhile gets a dataset error; a replay ``save`` whose path another save
took since it looked gets ``FileExistsError``, not the rename's ``ENOTEMPTY``.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetLockedError, DatasetWriter, EpisodeWriter, NotADatasetError
from episodes.io import shard_writer as shard_writer_module
from episodes.replay import EpisodeReplayBuffer, persistence


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")
def test_close_unlocks_although_a_forked_child_holds_the_descriptor(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path / "d")
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only waits to be killed
        time.sleep(30)
        os._exit(0)
    try:
        writer.close()
        probe = os.open(tmp_path / "d" / "shards", os.O_RDONLY | os.O_DIRECTORY)
        try:  # the next writer finds itself alone: the lock is free
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def _locked(shards: Path) -> bool:
    probe = os.open(shards, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(probe)
    return False


def _v2_locked(path: Path) -> bool:  # a v2 writer holds shards/: no writer opens alone
    return _locked(path / "shards")


def _v1_locked(path: Path) -> bool:  # one v1 writer at a time
    try:
        EpisodeWriter(path).close()
    except DatasetLockedError:
        return True
    return False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")
@pytest.mark.parametrize(
    ("writer_cls", "locked"),
    [(DatasetWriter, _v2_locked), (EpisodeWriter, _v1_locked)],
    ids=["v2", "v1"],
)
def test_a_forked_child_closing_its_copy_leaves_the_parent_locked(
    tmp_path: Path, writer_cls: type, locked: Any
) -> None:
    writer = writer_cls(tmp_path / "d")
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        writer.close()
        os._exit(0)
    os.waitpid(child, 0)
    assert locked(tmp_path / "d")  # still the parent's
    writer.write(SingleAgentEpisode(observations=[0.0, 1.0], actions=[0], rewards=[1.0]))
    writer.close()
    assert not locked(tmp_path / "d")


def test_a_dataset_removed_while_a_writer_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DatasetWriter(tmp_path / "d").close()

    def taken_back(self: DatasetWriter) -> None:  # a failed record removed it meanwhile
        (tmp_path / "d" / "manifest.jsonl").unlink()

    monkeypatch.setattr(shard_writer_module.DatasetWriter, "_recover_if_alone", taken_back)
    with pytest.raises(NotADatasetError, match="was removed while being opened"):
        DatasetWriter(tmp_path / "d")


def test_a_save_whose_path_another_save_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = EpisodeReplayBuffer(10, seed=0)
    buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0]))
    real = persistence.checked_generator

    def other_save_first(*args, **kwargs):  # runs after the path was found free
        (tmp_path / "buf").mkdir()
        (tmp_path / "buf" / "replay.json").write_text("{}")
        return real(*args, **kwargs)

    monkeypatch.setattr(persistence, "checked_generator", other_save_first)
    with pytest.raises(FileExistsError, match="exists; save a buffer to a new directory"):
        buf.save(tmp_path / "buf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buf"]  # its staging went
    assert [p.name for p in (tmp_path / "buf").iterdir()] == ["replay.json"]
