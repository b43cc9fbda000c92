"""Reads of a dataset of many small shards, a Minari export's order, windows longer than runs.

A ``RunnerGroup(write_to=...)`` run writes one shard per sample and runner: thousands of small
shards. ``max_open_shards`` used to default to 64, so a shuffled read reopened a shard on most
items (45x slower over 1,000 shards); ``"auto"`` keeps open every shard that is cheap to keep
(an uncompressed Arrow one: a memory map, one descriptor) within a share of the descriptor
limit and an index budget, and at most ``HELD_SHARDS`` of those held in memory (Parquet,
compressed Arrow).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter
from episodes.io import open_shards as limits_module

torch_data = pytest.importorskip("episodes.io.torch_data")


def _episode(k: int, n: int = 3) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{k}",
        observations=list(np.arange(n + 1, dtype=np.float32) + 10 * k),
        actions=list(range(n)),
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
    )


def _shards(path: Path, count: int, **kw: Any) -> Path:
    """``count`` shards of one 3-step episode each."""
    with DatasetWriter(path, **kw) as w:
        for k in range(count):
            w.write(_episode(k))
            w.flush()
    return path


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _shards(tmp_path_factory.mktemp("many") / "ds", 80)


READERS = {
    "Dataset": lambda p, **kw: Dataset(p, **kw),
    "TransitionDataset": lambda p, **kw: torch_data.TransitionDataset(p, n_step=2, **kw),
    "SequenceDataset": lambda p, **kw: torch_data.SequenceDataset(p, length=2, **kw),
}


def _read_all(reader: Any, order: list[int]) -> Dataset:
    """Reads every episode (or item) in ``order``; the underlying ``Dataset``."""
    if isinstance(reader, Dataset):
        for i in order:
            reader.steps(i % len(reader), 0, 1)
        return reader
    for i in order:
        reader[i % len(reader)]
    assert reader._reader is not None
    return reader._reader


@pytest.mark.parametrize("make", list(READERS.values()), ids=list(READERS))
def test_by_default_every_small_arrow_shard_stays_open(many: Path, make: Any) -> None:
    # Before: 64 open, every read past them reopened a shard (evictions on a shuffled pass).
    reader = make(many)
    order = np.random.default_rng(0).permutation(3 * 80).tolist() * 2
    ds = _read_all(reader, order)
    assert (len(ds.open_shards()), ds.evictions) == (80, 0)


@pytest.mark.parametrize("make", list(READERS.values()), ids=list(READERS))
def test_an_int_still_bounds_the_open_shards(many: Path, make: Any) -> None:
    ds = _read_all(make(many, max_open_shards=5), list(range(3 * 80)))
    assert len(ds.open_shards()) == 5 and ds.evictions > 0


HELD = {
    "parquet": {"data_format": "parquet"},
    "zstd arrow": {"compression": "zstd"},
}


@pytest.mark.parametrize("kw", list(HELD.values()), ids=list(HELD))
def test_auto_keeps_few_shards_that_hold_data_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]
) -> None:
    # A Parquet shard is held decoded, a zstd one keeps batches decompressed: memory, so
    # "auto" keeps HELD_SHARDS of them (64) and never more, however many descriptors it has.
    monkeypatch.setattr(limits_module, "HELD_SHARDS", 3)
    path = _shards(tmp_path / "ds", 8, **kw)
    ds = _read_all(Dataset(path), list(range(8)))
    assert len(ds.open_shards()) == 3 and ds.evictions == 5


def test_auto_mixes_held_and_mapped_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(limits_module, "HELD_SHARDS", 2)
    with DatasetWriter(tmp_path / "ds") as w:  # 4 mapped shards
        for k in range(4):
            w.write(_episode(k))
            w.flush()
    with DatasetWriter(tmp_path / "ds", data_format="parquet") as w:  # 4 held ones
        for k in range(4, 8):
            w.write(_episode(k))
            w.flush()
    ds = _read_all(Dataset(tmp_path / "ds"), list(range(8)))
    open_formats = sorted(s.entry.data_format for s in ds.open_shards())
    assert open_formats == ["arrow"] * 4 + ["parquet"] * 2  # the held ones evicted only


def test_auto_stays_within_a_share_of_the_descriptor_limit(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits_module, "HELD_SHARDS", 1)
    monkeypatch.setattr(limits_module, "map_limit", lambda: 7)
    ds = _read_all(Dataset(many), list(range(80)))
    assert len(ds.open_shards()) == 7 and ds.evictions == 73


def test_auto_bounds_the_open_shards_memory_beyond_held_shards(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = [s.index_size + limits_module.SHARD_OVERHEAD for s in Dataset(many).shards]
    monkeypatch.setattr(limits_module, "HELD_SHARDS", 4)
    monkeypatch.setattr(limits_module, "MAX_OPEN_BYTES", sum(sizes[:10]))
    ds = _read_all(Dataset(many), list(range(80)))
    held = sum(s.entry.index_size + limits_module.SHARD_OVERHEAD for s in ds.open_shards())
    assert 4 < len(ds.open_shards()) <= 11 and held <= sum(sizes[:10]) + max(sizes)


def test_a_pickled_reader_opens_its_shards_afresh(many: Path) -> None:
    import pickle

    ds = _read_all(Dataset(many), list(range(80)))
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.open_shards() == [] and copy._limits.bytes == 0
    assert _read_all(copy, list(range(80))).evictions == 0


BAD_MAX_OPEN = {"None": None, "other string": "Auto", "zero": 0, "bool": True}


@pytest.mark.parametrize("value", list(BAD_MAX_OPEN.values()), ids=list(BAD_MAX_OPEN))
@pytest.mark.parametrize("make", list(READERS.values()), ids=list(READERS))
def test_max_open_shards_is_auto_or_an_int(many: Path, make: Any, value: Any) -> None:
    with pytest.raises(ValueError, match="max_open_shards"):
        make(many, max_open_shards=value)
    assert len(make(many, max_open_shards="auto")) > 0


# -------------------------------------------------------------- SequenceDataset too long


def test_a_sequence_length_beyond_every_run_warns(tmp_path: Path) -> None:
    # Before: len 0 silently, the first sign DataLoader's "num_samples=0".
    with DatasetWriter(tmp_path / "ds") as w:
        w.write_many([_episode(0, 3), _episode(1, 5)])
    with pytest.warns(torch_data.NoWindowsWarning, match=r"longest run of steps is 5.*") as rec:
        data = torch_data.SequenceDataset(tmp_path / "ds", length=6)
    assert len(data) == 0 and "length=6" in str(rec[0].message)
    assert issubclass(torch_data.NoWindowsWarning, UserWarning)


@pytest.mark.parametrize("length", [1, 5])
def test_a_sequence_dataset_with_items_does_not_warn(tmp_path: Path, length: int) -> None:
    with DatasetWriter(tmp_path / "ds") as w:
        w.write_many([_episode(0, 3), _episode(1, 5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(torch_data.SequenceDataset(tmp_path / "ds", length=length)) > 0


def test_a_dataset_without_steps_does_not_warn(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds") as w:
        w.write(SingleAgentEpisode("a", observations=[0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(torch_data.SequenceDataset(tmp_path / "ds", length=1)) == 0


# ------------------------------------------------------------------ Minari export order


def _pieces(tmp_path: Path) -> Path:
    """Episode "a" begun first and completed last; "b" and "c" whole in between."""
    import gymnasium as gym

    spaces = {"observation_space": gym.spaces.Discrete(100), "action_space": gym.spaces.Discrete(3)}
    a = SingleAgentEpisode("a", observations=[0, 1], actions=[0], rewards=[1.0],
                           len_lookback_buffer=0, **spaces)  # fmt: skip
    a_end = a.cut()
    a_end.add_env_step(2, 1, 2.0, terminated=True)
    b = SingleAgentEpisode("b", observations=[5, 6, 7], actions=[1, 1], rewards=[0.0, 0.0],
                           terminated=True, len_lookback_buffer=0, **spaces)  # fmt: skip
    c = SingleAgentEpisode("c", observations=[9, 8], actions=[2], rewards=[3.0],
                           truncated=True, len_lookback_buffer=0, **spaces)  # fmt: skip
    with DatasetWriter(tmp_path / "src") as w:
        w.write_many([a, b])
        w.flush()
        w.write_many([c, a_end])
    return tmp_path / "src"


def test_minari_episodes_come_in_the_order_the_dataset_lists_them(tmp_path: Path) -> None:
    pytest.importorskip("minari")
    from minari import MinariDataset

    from episodes.io import dataset_info, export_minari

    src = _pieces(tmp_path)
    listed = [e.id_ for e in dataset_info(src).episodes]
    assert listed == ["a", "b", "c"]
    assert export_minari(src, "toy/order-v0", root=tmp_path / "minari") == 3
    stored = MinariDataset(tmp_path / "minari" / "toy" / "order-v0" / "data")
    got = [(e.id, e.observations.tolist(), e.rewards.tolist()) for e in stored.iterate_episodes()]
    # Before: b, c, a (the order the episodes completed in).
    assert got == [(0, [0, 1, 2], [1.0, 2.0]), (1, [5, 6, 7], [0.0, 0.0]), (2, [9, 8], [3.0])]
    meta = json.loads((tmp_path / "minari/toy/order-v0/data/metadata.json").read_text())
    assert meta["total_episodes"] == 3
