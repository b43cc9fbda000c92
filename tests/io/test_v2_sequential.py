"""Format v2 sequential reads (``iter_episodes``, iteration): same episodes as random access."""

from __future__ import annotations

import os

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    UnsafeDataError,
    read_episodes,
    shard_reader,
)

FORMATS = [
    pytest.param({"data_format": "arrow"}, id="arrow"),
    pytest.param({"data_format": "arrow", "compression": "zstd"}, id="arrow-zstd"),
    pytest.param({"data_format": "parquet", "compression": "zstd"}, id="parquet-zstd"),
]
FRAMES = 60  # 61 frames of 84x84x3: a 1.3 MB leaf, over the copy-on-write map threshold


def frames_episode(seed: int) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    return SingleAgentEpisode(
        f"img{seed}",
        observations=list(rng.integers(0, 256, (FRAMES + 1, 84, 84, 3), dtype=np.uint8)),
        actions=list(rng.integers(0, 6, FRAMES)),
        rewards=list(rng.normal(size=FRAMES).astype(np.float32)),
        len_lookback_buffer=0,
    ).to_numpy()


@pytest.fixture(scope="module")
def originals():
    return [frames_episode(seed) for seed in range(5)]


def write(path, episodes, **kwargs):
    # Shards of about two episodes each, so iteration crosses shard boundaries.
    with DatasetWriter(path, shard_bytes=3 << 20, **kwargs) as writer:
        writer.write_many(episodes)
    return path


def data_files(path):
    return sorted(p for p in (path / "shards").iterdir() if p.suffix in (".arrow", ".parquet"))


@pytest.mark.parametrize("kwargs", FORMATS)
@pytest.mark.parametrize("verify", [False, True])
def test_iteration_matches_random_access(tmp_path, originals, kwargs, verify):
    path = write(tmp_path / "ds", originals, **kwargs)
    ds = Dataset(path, verify=verify)
    assert len(ds.shards) > 1
    by_index = [Dataset(path, verify=verify).episode(i) for i in range(len(originals))]
    assert by_index == originals
    assert list(ds) == originals
    assert list(Dataset(path, verify=verify, max_open_shards=1)) == originals
    assert list(read_episodes(path, verify=verify)) == originals
    assert list(read_episodes(path, verify=verify, start=1, stop=4)) == originals[1:4]
    assert list(ds.iter_episodes([4, 0, 2])) == [originals[4], originals[0], originals[2]]


def test_large_leaves_are_private_copy_on_write_maps(tmp_path, originals):
    path = write(tmp_path / "ds", originals)
    before = [p.read_bytes() for p in data_files(path)]
    ds = Dataset(path)
    first, again = ds.iter_episodes([1, 1])  # the same episode twice: two independent maps
    obs = first.observations.data
    assert isinstance(obs, np.ndarray) and obs.flags.writeable and not obs.flags.owndata
    obs[:] = 0
    assert again == originals[1]
    assert list(ds)[1] == originals[1] and ds.episode(1) == originals[1]
    assert [p.read_bytes() for p in data_files(path)] == before  # the file never changes


def test_reading_without_populate_gives_the_same_episodes(tmp_path, originals, monkeypatch):
    path = write(tmp_path / "ds", originals)
    monkeypatch.setattr(shard_reader, "_CAN_POPULATE", False)
    assert list(Dataset(path)) == originals
    # An advice the kernel refuses (as an older kernel refuses MADV_POPULATE_READ) is ignored.
    monkeypatch.setattr(shard_reader, "_CAN_POPULATE", True)
    monkeypatch.setattr(shard_reader, "_POPULATE_READ", 0x7FFF)
    assert list(Dataset(path)) == originals


@pytest.mark.parametrize("where", ["first", "leaf", "middle", "last"])
def test_a_flipped_byte_is_caught_when_iterating_with_verify(tmp_path, originals, where):
    path = write(tmp_path / "ds", originals)
    data = path / "shards" / f"{Dataset(path).shards[0].name}.arrow"  # episode 0's shard
    raw = bytearray(data.read_bytes())
    if where == "leaf":
        at = raw.index(originals[0].observations.data[5].tobytes()) + 17
    else:
        at = {"first": 0, "middle": len(raw) // 2, "last": len(raw) - 1}[where]
    raw[at] ^= 0x01
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError, match="CRC-32 mismatch"):
        list(Dataset(path, verify=True))
    with pytest.raises(CorruptDatasetError, match="CRC-32 mismatch"):
        list(read_episodes(path, verify=True))
    if where == "leaf":  # unverified, the flipped byte is read as it is, not hidden
        assert list(Dataset(path))[0] != originals[0]


def test_a_data_file_swapped_after_opening_is_refused(tmp_path, originals):
    path = write(tmp_path / "ds", originals)
    ds = Dataset(path)
    data = path / "shards" / f"{ds.shards[0].name}.arrow"  # episode 0's shard
    ds.locate(0)  # the shard is open (index checked, table mapped)
    keep = data.read_bytes()
    data.unlink()
    data.write_bytes(keep[:-100])
    with pytest.raises(CorruptDatasetError, match="truncated or altered"):
        next(iter(ds))
    data.unlink()
    outside = tmp_path / "outside.arrow"
    outside.write_bytes(keep)
    os.symlink(outside, data)
    with pytest.raises(UnsafeDataError, match="symlink"):
        next(iter(ds))
