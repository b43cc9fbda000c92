"""Format v2: killed writers leave committed shards intact; several processes write at once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from episodes.io import Dataset, DatasetWriter, dataset_info, read_episodes

HERE = Path(__file__).parent

EPISODE_FN = """
def episode(seed, i):
    from _gen import make_episode
    kinds = ["box_u8", "dict", "discrete"]
    return make_episode(seed * 100_000 + i, obs_space=kinds[(i // 4) % 3], steps=5 + (i * 7) % 40,
                        lookback=i % 3, numpy=True, id_=f"{seed}-{i}")
"""

CHILD = """
import sys
sys.path.insert(0, {here!r})
from episodes.io import DatasetWriter
with DatasetWriter({path!r}, shard_bytes={shard_bytes}) as w:
    print("ready", flush=True)
    for i in range({count}):
        w.write(episode({seed}, i))
print("done", flush=True)
"""


def expected_episode(seed: int, i: int):
    namespace: dict = {}
    exec(EPISODE_FN, namespace)  # noqa: S102 - our own test code
    return namespace["episode"](seed, i)


def child_code(path, seed, count=10_000, shard_bytes=3000):
    return EPISODE_FN + CHILD.format(
        here=str(HERE), path=str(path), seed=seed, count=count, shard_bytes=shard_bytes
    )


def check_prefixes(path):
    """Each writer's committed episodes are a prefix of what it wrote, equal field by field."""
    ds = Dataset(path)
    seen: dict[int, int] = {}
    for i in range(len(ds)):
        ep = ds.episode(i)
        seed, k = (int(x) for x in ep.id_.split("-"))
        assert k == seen.get(seed, 0), "episodes of one writer are committed in order"
        seen[seed] = k + 1
        assert ep == expected_episode(seed, k)
    return seen


@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_leaves_committed_shards_intact(tmp_path, seed):
    path = tmp_path / "ds"
    rng = random.Random(seed)
    for _round in range(2):
        child = subprocess.Popen(
            [sys.executable, "-c", child_code(path, seed + 10 * _round)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready", child.stderr.read()
        time.sleep(rng.uniform(0.05, 0.5))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        check_prefixes(path)
    # A new writer, alone, removes what the killed ones left and appends normally.
    with DatasetWriter(path) as w:
        w.write(expected_episode(99, 0))
    names = {p.name.split(".")[0] for p in (path / "shards").iterdir()}
    assert names == {s.name for s in Dataset(path).shards}
    assert not [p for p in path.rglob("*") if p.name.startswith(".tmp-")]
    check_prefixes(path)


def test_concurrent_writers_and_a_reader(tmp_path):
    path = tmp_path / "ds"
    DatasetWriter(path).close()
    count = 12
    children = [
        subprocess.Popen(
            [sys.executable, "-c", child_code(path, seed, count=count, shard_bytes=1)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for seed in range(3)
    ]
    reads = 0
    while any(c.poll() is None for c in children):
        # Readers see only committed shards, never a partial one.
        before = dataset_info(path).num_chunks
        ds = Dataset(path)
        assert len(ds) >= before
        if len(ds):
            ds.episode(len(ds) - 1)  # the newest committed shard is complete
        reads += 1
        time.sleep(0.01)
    for c in children:
        out, err = c.communicate()
        assert c.returncode == 0, err
    assert check_prefixes(path) == {0: count, 1: count, 2: count}
    assert dataset_info(path).num_shards == 3 * count
    assert len(list(read_episodes(path, verify=True))) == 3 * count
    assert reads > 0


def test_a_failed_shard_write_keeps_the_episodes_buffered(tmp_path, monkeypatch):
    from _gen import make_episode

    from episodes.io.shard_stream import ShardStream

    episodes = [make_episode(k, numpy=True) for k in range(3)]
    writer = DatasetWriter(tmp_path / "ds")
    writer.write_many(episodes)

    def full_disk(self):
        raise OSError(28, "No space left on device")  # the footer does not fit

    monkeypatch.setattr(ShardStream, "finish", full_disk)
    with pytest.raises(OSError, match="No space"):
        writer.flush()
    assert len(Dataset(tmp_path / "ds")) == 0  # nothing half-written is visible
    monkeypatch.undo()
    writer.close()  # the retry commits the same episodes once
    assert list(read_episodes(tmp_path / "ds")) == episodes
    assert not [p for p in (tmp_path / "ds").rglob("*") if p.name.startswith(".tmp-")]
