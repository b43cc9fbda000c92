"""Pins for a bug hunt's findings on DatasetWriter, the dataset tools and their CLI commands.

Each test failed before its fix.
"""

from __future__ import annotations

import fcntl
import json

import gymnasium as gym
import numpy as np
import pytest

import episodes.io.shard_writer as shard_writer
from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    filter_dataset,
    migrate,
    read_episodes,
    validate_dataset,
)


def episode(i: int, spaces: bool = False) -> SingleAgentEpisode:
    extra = {}
    if spaces:
        extra = {
            "observation_space": gym.spaces.Box(-10, 10, (), np.float32),
            "action_space": gym.spaces.Discrete(2),
        }
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.float32(t) for t in range(3)],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        **extra,
    )


def stored_ids(path) -> list[str]:
    report = validate_dataset(path)
    assert report.ok, report.problems
    return [e.id_ for e in read_episodes(path)]


# --------------------------------------------- Ctrl-C once the shard's manifest line is in
class _InterruptedUnlock:
    """``fcntl`` whose first ``LOCK_UN`` unlocks, then raises as a SIGINT arriving then would."""

    LOCK_EX, LOCK_SH, LOCK_UN, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_SH, fcntl.LOCK_UN, fcntl.LOCK_NB

    def __init__(self) -> None:
        self.armed = True

    def flock(self, fd: int, op: int) -> None:
        fcntl.flock(fd, op)
        if op == fcntl.LOCK_UN and self.armed:
            self.armed = False
            raise KeyboardInterrupt


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_ctrl_c_after_the_manifest_line_counts_the_shard_as_committed(
    tmp_path, monkeypatch, data_format
):
    writer = DatasetWriter(tmp_path / "ds", data_format=data_format, sync=False)
    writer.write_many([episode(0), episode(1)])
    monkeypatch.setattr(shard_writer, "fcntl", _InterruptedUnlock())
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    assert len(writer.committed) == 1  # the line is in: the shard is committed
    assert writer.flush() is None  # nothing left to commit a second time
    writer.write(episode(2))
    writer.close()
    assert len(writer.committed) == 2
    assert stored_ids(tmp_path / "ds") == ["e0", "e1", "e2"]


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_ctrl_c_in_the_commit_of_a_full_shard_then_flush_stores_each_episode_once(
    tmp_path, monkeypatch, data_format
):
    # What `episodes record` does on Ctrl-C: flush what was recorded, then leave the block.
    monkeypatch.setattr(shard_writer, "fcntl", _InterruptedUnlock())
    with DatasetWriter(tmp_path / "ds", shard_bytes=9000, data_format=data_format) as writer:
        with pytest.raises(KeyboardInterrupt):
            writer.write_many(episode(i) for i in range(4))  # e1 fills the shard
        writer.flush()
    assert len(writer.committed) == 1
    assert stored_ids(tmp_path / "ds") == ["e0", "e1"]


# ------------------------------- Ctrl-C after an episode reached the shard's file, unbuffered
def interrupt_after_streaming(monkeypatch, nth: int) -> None:
    """A KeyboardInterrupt once the ``nth`` episode is in the shard's file, not yet buffered."""
    real, calls = DatasetWriter._stream_episode, []

    def interrupted(self, encoded, schema):
        real(self, encoded, schema)
        calls.append(1)
        if len(calls) == nth:
            raise KeyboardInterrupt

    monkeypatch.setattr(DatasetWriter, "_stream_episode", interrupted)


@pytest.mark.parametrize(
    ("interrupted", "then", "kept"),
    [
        ("second", "flush", ["e0"]),
        ("second", "write", ["e0", "e2"]),
        ("first", "write", ["e2"]),
        ("first", "close", []),
    ],
)
def test_ctrl_c_between_streaming_and_buffering_leaves_no_stray_rows_in_the_shard(
    tmp_path, monkeypatch, interrupted, then, kept
):
    interrupt_after_streaming(monkeypatch, 1 if interrupted == "first" else 2)
    writer = DatasetWriter(tmp_path / "ds", sync=False)
    with pytest.raises(KeyboardInterrupt):
        writer.write_many([episode(0), episode(1)])
    if then == "flush":
        writer.flush()
    elif then == "write":
        writer.write(episode(2))
    writer.close()
    assert stored_ids(tmp_path / "ds") == kept


# ----------------------------------------------------------------------------- metadata
@pytest.mark.parametrize("metadata", [{"env_id": "X"}, "X", ["X"]])
def test_metadata_of_another_type_is_a_type_error_naming_datasetmetadata(tmp_path, metadata):
    with pytest.raises(TypeError, match="metadata must be a DatasetMetadata"):
        DatasetWriter(tmp_path / "ds", metadata=metadata)
    assert not (tmp_path / "ds").exists()  # refused before anything was made


def test_metadata_as_datasetmetadata_still_works(tmp_path):
    DatasetWriter(tmp_path / "ds", metadata=DatasetMetadata(env_id="X")).close()


# ------------------------------------------------------------------------- filter bounds
@pytest.fixture
def dataset(tmp_path):
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write_many([episode(0), episode(1)])
    return tmp_path / "ds"


BAD_BOUNDS = {
    "negative_min_length": ({"min_length": -1}, "min_length must be >= 0"),
    "negative_max_length": ({"max_length": -1}, "max_length must be >= 0"),
    "min_length_above_max": ({"min_length": 3, "max_length": 2}, "min_length 3 is above"),
    "min_return_above_max": ({"min_return": 1.0, "max_return": 0.0}, "min_return 1.0 is above"),
}


@pytest.mark.parametrize(("bounds", "message"), BAD_BOUNDS.values(), ids=BAD_BOUNDS)
def test_filter_refuses_bounds_that_filter_silently(dataset, tmp_path, bounds, message):
    with pytest.raises(ValueError, match=message):
        filter_dataset(dataset, tmp_path / "out", **bounds)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-length", "-1"], "--min-length must be >= 0"),
        (["--max-length", "-2"], "--max-length must be >= 0"),
        (["--min-length", "3", "--max-length", "2"], "is above --max-length"),
    ],
)
def test_filter_command_refuses_bad_length_bounds(dataset, tmp_path, capsys, flags, message):
    assert main(["filter", str(dataset), "--out", str(tmp_path / "out"), *flags]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_filter_keeps_good_length_bounds(dataset, tmp_path):
    assert filter_dataset(dataset, tmp_path / "out", min_length=0, max_length=2) == 2


# ----------------------------------------------------------------------------- info --json
@pytest.mark.parametrize("spaces", [False, True])
def test_info_json_gives_null_for_missing_spaces(tmp_path, capsys, spaces):
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write(episode(0, spaces=spaces))
    assert main(["info", str(tmp_path / "ds"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    if spaces:
        assert info["observation_space"].startswith("Box(")
        assert info["action_space"] == "Discrete(2)"
    else:
        assert info["observation_space"] is None and info["action_space"] is None


# ------------------------------------------------------------------ a destination file
def test_migrate_to_a_regular_file_says_it_is_not_a_directory(dataset, tmp_path, capsys):
    target = tmp_path / "somefile"
    target.write_text("x")
    with pytest.raises(DatasetError, match="exists and is not a directory"):
        migrate(dataset, target)
    assert main(["migrate", str(dataset), str(target)]) == 1
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "x"


def test_migrate_to_a_full_directory_still_says_it_is_not_empty(dataset, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(DatasetError, match="exists and is not empty"):
        migrate(dataset, tmp_path / "full")
