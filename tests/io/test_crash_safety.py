from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _gen import make_episode

from episodes.io import EpisodeWriter, dataset_info, read_episodes

HERE = Path(__file__).parent

CHILD = """
import sys
sys.path.insert(0, {here!r})
from _gen import make_episode
from episodes.io import EpisodeWriter
seed = {seed}
with EpisodeWriter({path!r}) as w:
    print("ready", flush=True)
    for i in range(10_000):
        w.write(episode(seed, i))
"""

EPISODE_FN = """
def episode(seed, i):
    from _gen import make_episode
    kinds = ["box_u8", "dict", "discrete", "text"]
    return make_episode(seed * 100_000 + i, obs_space=kinds[i % 4], steps=5 + (i * 7) % 40,
                        lookback=i % 3, numpy=bool(i % 2), id_=f"{seed}-{i}")
"""


def expected_episode(seed: int, i: int):
    namespace: dict = {}
    exec(EPISODE_FN, namespace)  # noqa: S102 - our own test code
    return namespace["episode"](seed, i)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_sigkill_leaves_committed_episodes_intact(tmp_path, seed):
    path = str(tmp_path / "ds")
    code = EPISODE_FN + CHILD.format(here=str(HERE), seed=seed, path=path)
    rng = random.Random(seed)
    rounds = 3
    for _round in range(rounds):
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready", child.stderr.read()
        time.sleep(rng.uniform(0.0, 0.6))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        # Every committed episode loads equal to what was written; ids form a prefix of the
        # child's sequence for each round (a killed round may have committed nothing).
        episodes = list(read_episodes(path, verify=True))
        info = dataset_info(path)
        assert info.num_chunks == len(episodes)
        counts: dict[int, int] = {}
        for ep in episodes:
            s, i = (int(x) for x in ep.id_.split("-"))
            assert s == seed
            assert ep == expected_episode(seed, i), ep.id_
            counts[i] = counts.get(i, 0) + 1
        # Each round restarts at i=0, so episode i appears once per round that reached it.
        assert all(counts.get(i, 0) >= counts.get(i + 1, 0) for i in range(max(counts, default=0)))
    # The dataset accepts new writers; leftovers of the killed ones are gone.
    with EpisodeWriter(path) as w:
        w.write(make_episode(123, id_="after"))
    leftovers = [p.name for p in (Path(path) / "chunks").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    listed = {e.id_ for e in read_episodes(path)}
    assert "after" in listed
    on_disk = len([p for p in (Path(path) / "chunks").iterdir()])
    assert on_disk == dataset_info(path).num_chunks


def test_torn_manifest_line_is_ignored_and_repaired(tmp_path):
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(make_episode(1))
        w.write(make_episode(2))
    manifest = path / "manifest.jsonl"
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) - 25])  # tear the last line
    assert [e.id_ for e in read_episodes(path)] == ["ep-1"]
    assert dataset_info(path).torn_manifest
    with EpisodeWriter(path) as w:
        w.write(make_episode(3))
    assert [e.id_ for e in read_episodes(path)] == ["ep-1", "ep-3"]
    assert not dataset_info(path).torn_manifest


@pytest.mark.parametrize("version", [1, 2])
def test_a_failing_close_does_not_keep_the_dataset_locked(tmp_path, monkeypatch, version):
    # v1 closed the manifest fd first: when that raised, the lock fd stayed open and the
    # dataset was "being written by another writer" for the rest of the process.
    from episodes.io import DatasetWriter, EpisodeWriter

    make = EpisodeWriter if version == 1 else DatasetWriter
    writer = make(tmp_path / "ds")
    real_close, failed = os.close, []

    def close_failing_once(fd):
        if not failed:
            failed.append(fd)
            real_close(fd)
            raise OSError(5, "Input/output error")
        real_close(fd)

    monkeypatch.setattr(os, "close", close_failing_once)
    try:
        writer.close()
    except OSError:
        pass
    monkeypatch.undo()
    assert failed
    make(tmp_path / "ds").close()  # not locked


def test_a_write_whose_commit_failed_can_be_retried_without_a_second_copy(tmp_path, monkeypatch):
    # The failed commit put the episode back into the buffer and write() raised: a caller
    # retrying write() buffered it twice, and close() committed both.
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, read_episodes

    writer = DatasetWriter(tmp_path / "ds", shard_bytes=1)  # every write commits a shard
    real, calls = DatasetWriter._publish, []

    def failing_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DatasetWriter, "_publish", failing_once)
    episode = SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0])
    with pytest.raises(OSError, match="No space"):
        writer.write(episode)
    writer.write(episode)  # the retry
    writer.close()
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == ["a"]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("failure", ["short writes", "disk full mid-line"])
def test_manifest_lines_are_appended_whole(tmp_path, monkeypatch, version, failure):
    # os.write may write part of a line; the writers took one call as the whole line, so a
    # short write lost the rest and a failure mid-line left a torn line before the next one.
    from episodes.io import DatasetWriter

    make = EpisodeWriter if version == 1 else lambda p: DatasetWriter(p, shard_bytes=1)
    real_write, calls = os.write, []

    def partial_write(fd, data):
        calls.append(len(data))
        if failure == "disk full mid-line" and len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, bytes(data[:7]))

    with make(tmp_path / "ds") as writer:
        writer.write(make_episode(1, id_="a"))
        monkeypatch.setattr(os, "write", partial_write)
        if failure == "short writes":
            writer.write(make_episode(2, id_="b"))
        else:
            with pytest.raises(OSError, match="No space"):
                writer.write(make_episode(2, id_="b"))
        monkeypatch.undo()
        writer.write(make_episode(3, id_="c"))
    assert len(calls) >= 2
    expected = ["a", "b", "c"] if failure == "short writes" else ["a", "c"]
    assert [e.id_ for e in read_episodes(tmp_path / "ds")] == expected
    assert not dataset_info(tmp_path / "ds").torn_manifest
