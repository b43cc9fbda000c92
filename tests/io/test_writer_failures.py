"""A disk that fills while DatasetWriter writes: nothing half-written is visible, the episodes
written since the last commit stay buffered for a retry, and each is stored exactly once."""

from __future__ import annotations

import os

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter, read_episodes
from episodes.io.checksums import CrcFile

FULL = OSError(28, "No space left on device")


def episode(i: int, steps: int = 6) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.full(3, 10 * i + t, np.float32) for t in range(steps + 1)],
        actions=[t % 2 for t in range(steps)],
        rewards=[float(t) for t in range(steps)],
        len_lookback_buffer=0,
    ).to_numpy()


def fill_disk_at(monkeypatch, call: int) -> list[int]:
    """The ``call``-th data-file write from now on (0-based) fails with ENOSPC, once."""
    real, calls = CrcFile.write, []

    def write(self, data):
        calls.append(1)
        if len(calls) == call + 1:
            raise FULL
        return real(self, data)

    monkeypatch.setattr(CrcFile, "write", write)
    return calls


def leftovers(path) -> list[str]:
    return [p.name for p in path.rglob("*") if p.name.startswith(".tmp-")]


# (name, shard_bytes, episodes written before the failing one, which data write fails)
CASES = [
    ("first write of a new shard", 1 << 30, 0, 0),
    ("append to an open shard", 1 << 30, 3, 0),
    ("the footer when the shard commits", 1, 0, -1),
    ("a later piece of a shard's batch", 1 << 30, 2, 3),
]


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize(
    ("name", "shard_bytes", "before", "failing"), CASES, ids=[c[0] for c in CASES]
)
def test_a_full_disk_keeps_the_episodes_for_a_retry(
    tmp_path, monkeypatch, data_format, name, shard_bytes, before, failing
):
    path = tmp_path / "ds"
    episodes = [episode(i) for i in range(before + 3)]
    writer = DatasetWriter(path, shard_bytes=shard_bytes, data_format=data_format, sync=False)
    writer.write_many(episodes[:before])
    if failing == -1:  # count the writes of one commit, then fail its last one (the footer)
        probe = DatasetWriter(tmp_path / "probe", shard_bytes=1, data_format=data_format)
        calls = fill_disk_at(monkeypatch, 10**9)
        probe.write(episode(before))
        monkeypatch.undo()
        failing = len(calls) - 1
    failed = episodes[before]
    fill_disk_at(monkeypatch, failing)
    try:
        writer.write(failed)
    except OSError as exc:
        assert exc.errno == 28
        write_raised = True  # this episode is not buffered
    else:
        write_raised = False
        with pytest.raises(OSError, match="No space"):
            writer.flush()  # the failure came with the commit: everything stays buffered
    monkeypatch.undo()
    assert len(Dataset(path)) == 0  # nothing half-written is visible
    if write_raised:
        writer.write(failed)  # the retry
    failed.get_observations()[...] = -1.0  # changed after write: must not reach the file
    later = episodes[before + 1 :]
    writer.write_many(later)
    for ep in later:
        ep.get_observations()[...] = -2.0
    writer.close()
    expected = [episode(i) for i in range(before + 3)]
    assert sorted(read_episodes(path), key=lambda e: int(e.id_[1:])) == expected
    assert not leftovers(path)


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize("step", ["index file", "data rename", "index rename"])
def test_a_commit_failing_after_the_data_file_keeps_the_episodes(
    tmp_path, monkeypatch, data_format, step
):
    path = tmp_path / "ds"
    episodes = [episode(i) for i in range(4)]
    writer = DatasetWriter(path, data_format=data_format, sync=False)
    writer.write_many(episodes[:3])
    real_open, real_rename, renames = open, os.rename, []

    def failing_open(file, mode="r", *args, **kwargs):
        if step == "index file" and str(file).endswith(".json") and "w" in mode:
            raise FULL
        return real_open(file, mode, *args, **kwargs)

    def failing_rename(src, dst):
        renames.append(dst)
        if len(renames) == {"data rename": 1, "index rename": 2}.get(step):
            raise FULL
        return real_rename(src, dst)

    import builtins

    monkeypatch.setattr(builtins, "open", failing_open)
    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="No space"):
        writer.flush()
    monkeypatch.undo()
    assert len(Dataset(path)) == 0
    assert not [p for p in (path / "shards").iterdir() if not p.name.startswith(".tmp-")]
    writer.write(episodes[3])
    writer.close()
    assert list(read_episodes(path)) == episodes
    assert not leftovers(path)


def test_a_shard_that_cannot_be_read_back_reports_its_lost_episodes(tmp_path, monkeypatch):
    from episodes.io import DatasetError
    from episodes.io.shard_stream import ShardStream

    writer = DatasetWriter(tmp_path / "ds", sync=False)
    writer.write_many([episode(0), episode(1)])

    def unreadable(self):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ShardStream, "recover", unreadable)
    fill_disk_at(monkeypatch, 0)
    with pytest.raises(DatasetError, match="2 episodes"):
        writer.write(episode(2))
    monkeypatch.undo()
    writer.write(episode(3))  # the writer goes on with what comes next
    writer.close()
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == ["e3"]
    assert not leftovers(tmp_path / "ds")


def test_an_arrow_shard_holds_no_rows_in_memory_while_it_fills(tmp_path):
    import tracemalloc

    frames = [np.full((50, 64, 64), i, np.uint8) for i in range(8)]
    eps = [
        SingleAgentEpisode(
            f"e{i}",
            observations=list(f),
            actions=[0] * 49,
            rewards=[0.0] * 49,
            len_lookback_buffer=0,
        ).to_numpy()
        for i, f in enumerate(frames)
    ]
    data = sum(ep.get_observations().nbytes for ep in eps)
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:  # one shard: 64 MiB
        tracemalloc.start()
        writer.write_many(eps)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert writer.committed == []
    assert held < data / 4, (held, data)
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == [f"e{i}" for i in range(8)]


def test_a_commit_whose_read_back_fails_raises_the_dataset_error(tmp_path, monkeypatch):
    # write() then popped its episode from the list the failure had emptied: IndexError.
    from episodes.io import DatasetError
    from episodes.io.shard_stream import ShardStream

    writer = DatasetWriter(tmp_path / "ds", shard_bytes=20000, sync=False)  # 3 episodes
    writer.write_many([episode(0), episode(1)])

    def unreadable(self, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ShardStream, "recover", unreadable)
    monkeypatch.setattr(ShardStream, "finish", lambda self: (_ for _ in ()).throw(FULL))
    with pytest.raises(DatasetError, match="are lost"):
        writer.write(episode(2))  # fills the shard: its commit fails, and so does the read-back
    monkeypatch.undo()
    writer.write(episode(99))
    writer.close()
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == ["e99"]
    assert not leftovers(tmp_path / "ds")


def test_episodes_read_back_are_kept_when_the_file_cannot_be_removed(tmp_path, monkeypatch):
    import pathlib

    writer = DatasetWriter(tmp_path / "ds", sync=False)
    writer.write_many([episode(0), episode(1)])
    real_unlink, unlinks = pathlib.Path.unlink, []

    def unlink_failing_once(self, missing_ok=False):
        unlinks.append(self.name)
        if len(unlinks) == 1:
            raise OSError(30, "Read-only file system")
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(pathlib.Path, "unlink", unlink_failing_once)
    fill_disk_at(monkeypatch, 0)
    with pytest.raises(OSError, match="No space"):
        writer.write(episode(2))
    monkeypatch.undo()
    writer.write(episode(2))
    writer.close()
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == ["e0", "e1", "e2"]


def test_a_with_block_left_by_an_error_closes_the_writer_even_if_cleanup_fails(
    tmp_path, monkeypatch
):
    import pathlib

    from episodes.io import DatasetError

    def read_only(self, missing_ok=False):
        raise OSError(30, "Read-only file system")

    with pytest.raises(RuntimeError, match="user code"):
        with DatasetWriter(tmp_path / "ds", sync=False) as writer:
            writer.write(episode(0))
            monkeypatch.setattr(pathlib.Path, "unlink", read_only)
            raise RuntimeError("user code failed")
    monkeypatch.undo()
    with pytest.raises(DatasetError, match="closed"):
        writer.write(episode(1))
    DatasetWriter(tmp_path / "ds").close()  # alone again: the leftover goes
    assert not leftovers(tmp_path / "ds") and len(Dataset(tmp_path / "ds")) == 0


def test_a_forked_child_writes_large_episodes(tmp_path):
    # The checksum pool's thread does not survive fork: the child waited on it forever.
    import multiprocessing

    frames = np.zeros((64, 128, 128, 3), np.uint8)  # 3 MiB a column, 6 MiB an episode
    big = SingleAgentEpisode(
        "parent",
        observations=list(frames),
        actions=[0] * 63,
        rewards=[0.0] * 63,
        len_lookback_buffer=0,
    ).to_numpy()
    big.get_observations()[...] = 0
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write(SingleAgentEpisode("p", observations=[np.zeros(5 << 20, np.uint8)]))
    process = multiprocessing.get_context("fork").Process(target=_write_in_child, args=(tmp_path,))
    process.start()
    process.join(60)
    alive = process.is_alive()
    if alive:
        process.kill()
    assert not alive and process.exitcode == 0
    assert sorted(e.id_ for e in read_episodes(tmp_path / "ds")) == ["child", "p"]


def _write_in_child(tmp_path) -> None:
    with DatasetWriter(tmp_path / "ds", sync=False) as writer:
        writer.write(SingleAgentEpisode("child", observations=[np.zeros(5 << 20, np.uint8)]))


def test_a_symlinked_shards_directory_is_refused(tmp_path):
    victim = tmp_path / "victim"
    with DatasetWriter(victim, sync=False) as writer:
        writer.write(episode(0))
    before = sorted(p.name for p in (victim / "shards").iterdir())
    evil = tmp_path / "evil"
    DatasetWriter(evil).close()
    import shutil

    shutil.rmtree(evil / "shards")
    (evil / "shards").symlink_to(victim / "shards")
    from episodes.io import NotADatasetError

    with pytest.raises(NotADatasetError, match="symlink"):
        DatasetWriter(evil)
    assert sorted(p.name for p in (victim / "shards").iterdir()) == before
