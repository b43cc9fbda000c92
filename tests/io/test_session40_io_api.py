"""Session 40 io API fixes: step bounds, Dataset.close, closed writers, the kept scans' bound."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    manifest_prefix,
    shard_index,
)

LENGTH = 5


def _episode(id_: str, length: int = LENGTH) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(length + 1)],
        actions=list(range(length)),
        rewards=[float(10 + t) for t in range(length)],
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    with DatasetWriter(tmp_path / "d", shard_bytes=1) as writer:  # one shard per episode
        writer.write_many([_episode("a"), _episode("b")])
    return tmp_path / "d"


# ------------------------------------------------------------------------ 1. step bounds
# (start, stop) -> the slice of the episode they read, as episode[a:b] reads them.
BOUNDS = {
    "last two, open end": ((-2, None), slice(3, 5)),
    "negative start, stop at the end": ((-2, 5), slice(3, 5)),
    "negative stop": ((0, -1), slice(0, 4)),
    "both open": ((None, None), slice(0, 5)),
    "open start": ((None, 2), slice(0, 2)),
    "both negative": ((-5, -3), slice(0, 2)),
    "negative empty range": ((-1, -1), slice(4, 4)),
    "numpy negative": ((np.int64(-1), None), slice(4, 5)),
    "plain ints": ((1, 3), slice(1, 3)),
}


@pytest.mark.parametrize(("bounds", "want"), list(BOUNDS.values()), ids=list(BOUNDS))
def test_step_bounds_read_as_an_episode_slice_reads_them(path, bounds, want):
    ds = Dataset(path)
    got = ds.steps(0, *bounds)
    piece = ds.episode(0, numpy=True)[slice(*bounds)]  # the same bounds, sliced
    assert (piece.t_started, piece.t) == (want.start, want.stop)
    assert got["rewards"].tolist() == piece.get_rewards().tolist()
    assert got["actions"].tolist() == piece.get_actions().tolist()
    assert got["observations"].tolist() == piece.get_observations().tolist()
    assert got["terminated"] == (want.stop == LENGTH)


REFUSED = {
    "stop beyond the end": ((0, LENGTH + 1), IndexError),
    "start after stop": ((3, 1), IndexError),
    "negative start before the first step": ((-LENGTH - 1, None), IndexError),
    "negative stop before start": ((2, -4), IndexError),
    "bool start": ((True, 3), TypeError),
    "float stop": ((0, 2.0), TypeError),
    "str start": (("1", 2), TypeError),
}


@pytest.mark.parametrize(("bounds", "error"), list(REFUSED.values()), ids=list(REFUSED))
def test_step_ranges_outside_the_episode_are_refused_before_a_shard_opens(path, bounds, error):
    ds = Dataset(path, max_open_shards=1)
    ds.episode(1)
    before = ds.open_shards()
    with pytest.raises(error, match="step"):
        ds.steps(0, *bounds)
    assert ds.open_shards() == before and ds.evictions == 0


# ------------------------------------------------------------------------ 2. Dataset.close
def _shard_fds(root: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)):
            found.append(target)
    return found


def _maps(root: Path) -> int:
    with open("/proc/self/maps") as maps:
        return sum(str(root) in line for line in maps)


def _started(ds: Dataset):
    it = ds.iter_episodes()
    next(it)
    return it


READS_AFTER_CLOSE = {
    "episode": lambda ds, it: ds.episode(0),
    "steps": lambda ds, it: ds.steps(0, 0, 1),
    "locate": lambda ds, it: ds.locate(1),
    "iter_episodes": lambda ds, it: next(iter(ds)),
    "a pass started before close": lambda ds, it: next(it),
    "with": lambda ds, it: ds.__enter__(),
}


@pytest.mark.parametrize("read", list(READS_AFTER_CLOSE.values()), ids=list(READS_AFTER_CLOSE))
def test_reads_after_close_raise_naming_the_closed_dataset(path, read):
    ds = Dataset(path)
    it = _started(ds)
    ds.close()
    with pytest.raises(DatasetError, match="closed"):
        read(ds, it)
    assert len(ds) == 2 and [row.id_ for row in ds.summaries] == ["a", "b"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_close_releases_files_and_views_keep_their_map(tmp_path, data_format):
    root = tmp_path / "d"
    with DatasetWriter(root, shard_bytes=1, data_format=data_format) as writer:
        writer.write_many([_episode("a"), _episode("b")])
    gc.collect()
    with Dataset(root) as ds:
        views = [ds.steps(i, 0, None) for i in (0, 1)]
        episode = ds.episode(0, numpy=True)
        assert len(ds.open_shards()) == 2
        if data_format == "arrow":
            assert _shard_fds(root) and _maps(root) == 2
    # No collection needed: close() closed them.
    assert ds.open_shards() == [] and _shard_fds(root) == []
    ds.close()  # twice: nothing more
    for view, want in zip(views, ("a", "b")):
        assert view["rewards"].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0], want
        assert view["observations"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert episode.get_rewards().tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    del ds
    gc.collect()
    assert views[1]["actions"].tolist() == [0, 1, 2, 3, 4]  # the dataset gone: still valid
    del views, view
    gc.collect()
    assert _maps(root) == 0  # the last view gone: unmapped


def test_a_closed_dataset_pickles_closed(path):
    ds = Dataset(path)
    ds.close()
    with pytest.raises(DatasetError, match="closed"):
        pickle.loads(pickle.dumps(ds)).episode(0)
    open_copy = pickle.loads(pickle.dumps(Dataset(path)))
    assert open_copy.episode(1).id_ == "b"


def _torch_data():
    pytest.importorskip("torch")
    from episodes.io import torch_data

    return torch_data


TORCH = {
    "TransitionDataset": lambda p: _torch_data().TransitionDataset(p),
    "SequenceDataset": lambda p: _torch_data().SequenceDataset(p, length=2),
}


@pytest.mark.parametrize("make", list(TORCH.values()), ids=list(TORCH))
def test_torch_datasets_close_their_reader(path, make):
    data = make(path)
    with data as entered:
        assert entered is data
        item = data[len(data) - 1]
        reader = data._reader
    assert reader is not None and reader.open_shards() == [] and data._reader is None
    data.close()  # twice: nothing more
    assert float(np.asarray(item["rewards"]).reshape(-1)[-1]) == 14.0  # items are copies
    for read in (
        lambda: data[0],
        lambda: data.__enter__(),
        lambda: pickle.loads(pickle.dumps(data))[0],
    ):
        with pytest.raises(DatasetError, match="closed"):
            read()
    assert len(make(path)[0]["actions"].shape) in (0, 1)  # a new one reads


# ------------------------------------------------------------------------ 3. closed writers
def _closed(kind: str, tmp_path: Path):
    writer = (
        DatasetWriter(tmp_path / "v2")
        if kind == "DatasetWriter"
        else EpisodeWriter(tmp_path / "v1")
    )
    writer.close()
    return writer


COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}


@pytest.mark.parametrize("how", list(COPIES.values()), ids=list(COPIES))
@pytest.mark.parametrize("kind", ["DatasetWriter", "EpisodeWriter"])
def test_copying_a_writer_says_whether_it_is_open_or_closed(tmp_path, kind, how):
    article = "an" if kind == "EpisodeWriter" else "a"
    cls = DatasetWriter if kind == "DatasetWriter" else EpisodeWriter
    with cls(tmp_path / "open") as writer:
        with pytest.raises(TypeError) as opened:
            how(writer)
    assert str(opened.value).startswith(f"{article} {kind} holds open files")
    with pytest.raises(TypeError) as closed:
        how(_closed(kind, tmp_path))
    message = str(closed.value)
    assert message.startswith(f"{article} {kind} that is closed holds no files")
    assert "holds open files" not in message and "lock" not in message


@pytest.mark.parametrize("kind", ["DatasetWriter", "EpisodeWriter"])
def test_with_over_a_closed_writer_is_refused_as_a_write_is(tmp_path, kind):
    writer = _closed(kind, tmp_path)
    with pytest.raises(DatasetError) as written:
        writer.write(_episode("x"))
    entered = False
    with pytest.raises(DatasetError) as refused:
        with writer:
            entered = True
    assert not entered and str(refused.value) == str(written.value)
    assert "closed" in str(refused.value)


# ------------------------------------------------------------------------ 4. kept scans
def _kept_scans(tmp_path: Path, pieces: int, shards: int) -> tuple[int, int, int]:
    """(scans kept, their estimated bytes, bytes freed by dropping them), traced."""
    root = tmp_path / f"d{pieces}"
    with DatasetWriter(root, sync=False) as writer:
        for s in range(shards):
            writer.write_many([_episode(f"{s:04d}-{k:032x}", 1) for k in range(pieces)])
            writer.flush()
    shard_index.forget_checked()
    manifest_prefix.forget()
    gc.collect()
    tracemalloc.start()
    try:
        ds = Dataset(root)
        for s in range(shards):
            ds.locate(s * pieces)
        del ds
        manifest_prefix.forget()
        gc.collect()
        kept, counted = shard_index.checked_indexes(), shard_index.checked_memory()
        before = tracemalloc.get_traced_memory()[0]
        shard_index.forget_checked()
        gc.collect()
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return kept, counted, freed


@pytest.mark.parametrize(("pieces", "shards"), [(1, 40), (16, 8), (256, 2)], ids=str)
def test_the_kept_scans_count_the_memory_they_hold(tmp_path, pieces, shards):
    # Only the index text was counted: 1.2x-1.8x of it was held (the rows, the entry).
    kept, counted, freed = _kept_scans(tmp_path, pieces, shards)
    assert kept == shards
    assert freed <= counted <= 1.25 * freed, (freed, counted)


def test_the_memory_bound_keeps_the_most_recent_scans(tmp_path, monkeypatch):
    _, one, _ = _kept_scans(tmp_path, 16, 1)
    monkeypatch.setattr(shard_index, "MAX_CHECKED_MEMORY", int(2.5 * one))
    kept, counted, _ = _kept_scans(tmp_path / "more", 16, 5)
    assert kept == 2 and counted <= shard_index.MAX_CHECKED_MEMORY
    monkeypatch.setattr(shard_index, "MAX_CHECKED_MEMORY", one - 1)
    kept, counted, _ = _kept_scans(tmp_path / "small", 16, 1)
    assert (kept, counted) == (0, 0)  # larger than the whole bound: not kept
