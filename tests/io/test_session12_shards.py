"""Session 12 fixes to reading v2 shards.

- A file rewritten with as many record batches as pieces but other batch boundaries was read
  from the wrong rows: piece ``j`` was taken from batch ``j`` whenever that batch held as many
  rows as the piece, wherever it started. Each piece is now found by its first row.
- ``Dataset.steps`` handed out writable arrays that were the shard's cached views (zstd,
  Parquet, bool leaves): an in-place change showed in every later read.
- A shard refused as damaged kept its descriptor and memory map for the life of the Dataset
  (through the kept error's traceback).
- An open shard kept every record batch any read had fetched: for zstd, the whole
  decompressed shard.
- A damaged column's error named neither the shard nor the episode, so ``validate`` showed two
  shards damaged alike as one problem.
- ``Dataset`` of a directory that is no dataset raised ``CorruptDatasetError``, where every
  other reader raises ``NotADatasetError``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import traceback
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnsupportedVersionError,
    load_episode,
    read_episodes,
    validate_dataset,
)
from episodes.io.manifest_lines import seal_lines
from episodes.io.shards import unseal_line


def _episode(i: int, obs: Any = None, steps: int = 1) -> SingleAgentEpisode:
    observations = [np.float32(10 * i + t) for t in range(steps + 1)] if obs is None else obs
    return SingleAgentEpisode(
        f"e{i}",
        observations=observations,
        actions=[i] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
    ).to_numpy()


def _write(path: Path, episodes: list[SingleAgentEpisode], **kw: Any) -> Path:
    with DatasetWriter(path, sync=False, **kw) as w:
        for episode in episodes:
            w.write(episode)
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    raw = (path / "manifest.jsonl").read_bytes().split(b"\n")[:-1]
    return [unseal_line(line, "test") for line in raw]


def _reseal(path: Path, name: str, data: bytes) -> None:
    """Replaces shard ``name``'s data file, recomputing every checksum (a forged rewrite)."""
    (path / "shards" / f"{name}.arrow").write_bytes(data)
    index_path = path / "shards" / f"{name}.json"
    index = json.loads(index_path.read_text())
    index["data"].update(size=len(data), crc32=zlib.crc32(data))
    index_raw = json.dumps(index).encode()
    index_path.write_bytes(index_raw)
    lines = _lines(path)
    for obj in lines[1:]:
        if obj["shard"] == name:
            obj.update(
                index_sha256=hashlib.sha256(index_raw).hexdigest(),
                index_size=len(index_raw),
                data_size=len(data),
            )
    (path / "manifest.jsonl").write_bytes(seal_lines(lines))


def _shard_names(path: Path) -> list[str]:
    return [obj["shard"] for obj in _lines(path)[1:]]


# ------------------------------------------------------------ pieces found by their first row
def _rebatch(path: Path, sizes: list[int], compression: str | None) -> None:
    """Rewrites the only shard with the same rows in batches of ``sizes`` rows."""
    (name,) = _shard_names(path)
    data = path / "shards" / f"{name}.arrow"
    table = pa.ipc.open_file(pa.memory_map(str(data))).read_all().combine_chunks()
    batch = table.to_batches()[0]
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_file(sink, table.schema, options=options) as out:
        start = 0
        for size in sizes:
            out.write_batch(batch.slice(start, size))
            start += size
    _reseal(path, name, sink.getvalue().to_pybytes())


# Three pieces of 2 rows (rows 0-1, 2-3, 4-5), three batches, no piece across two batches.
LAYOUTS = {
    "empty batch first": [0, 2, 4],  # batch 1 holds piece 0's rows
    "empty batch last": [4, 2, 0],  # batch 1 holds piece 2's rows
    "empty batch between": [2, 0, 4],
    "the writer's": [2, 2, 2],
}
READS = {
    "Dataset.episode": lambda p, i: Dataset(p).episode(i).get_observations(),
    "Dataset.steps": lambda p, i: Dataset(p).steps(i, 0, 1)["observations"],
    "load_episode": lambda p, i: load_episode(p, f"e{i}").get_observations(),
    "read_episodes(ids=...)": lambda p, i: next(read_episodes(p, ids=[f"e{i}"])).get_observations(),
    "verify=True": lambda p, i: Dataset(p, verify=True).episode(i).get_observations(),
}


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_rebatched_shard_reads_each_piece_from_its_own_rows(tmp_path, layout, read, compression):
    path = _write(tmp_path / "d", [_episode(i) for i in range(3)])
    _rebatch(path, LAYOUTS[layout], compression)
    for i in range(3):
        assert np.asarray(READS[read](path, i)).tolist() == [10.0 * i, 10.0 * i + 1]
    assert validate_dataset(path).ok


BATCHINGS = {
    "one batch per piece": [[3], [1], [4]],
    "empty batches": [[0], [2], [0], [0], [5]],
    "no batches": [],
    "one batch": [[7]],
}


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
@pytest.mark.parametrize("batching", list(BATCHINGS))
def test_batch_rows_reads_what_arrow_reads(batching, compression):
    from episodes.io.ipc_rows import batch_rows  # new this session

    base = pa.RecordBatch.from_pydict(
        {
            "x": np.arange(8),
            "s": [str(i) for i in range(8)],
            "n": pa.nulls(8),
            "st": pa.StructArray.from_arrays([pa.array(np.zeros(8))], names=["a"]),
        }
    )
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_file(sink, base.schema, options=options) as out:
        for (n,) in BATCHINGS[batching]:
            out.write_batch(base.slice(0, n))
    raw = sink.getvalue()
    reader = pa.ipc.open_file(raw)
    want = [reader.get_batch(k).num_rows for k in range(reader.num_record_batches)]
    got = batch_rows(np.frombuffer(raw, np.uint8), len(want))
    assert got is not None and got.tolist() == want
    assert batch_rows(np.frombuffer(raw, np.uint8), len(want) + 1) is None


def test_batch_rows_of_damaged_bytes_is_none_or_what_arrow_reads():
    from episodes.io.ipc_rows import batch_rows

    base = pa.RecordBatch.from_pydict({"x": np.arange(4)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, base.schema) as out:
        for _ in range(3):
            out.write_batch(base)
    good = sink.getvalue().to_pybytes()
    for cut in range(len(good)):  # every truncation
        assert batch_rows(np.frombuffer(good[:cut], np.uint8)) is None
    rng = np.random.default_rng(0)
    for _ in range(3000):  # bytes overwritten anywhere: no exception, never other counts
        raw = bytearray(good)
        for at in rng.integers(0, len(raw), 2):
            raw[int(at)] = int(rng.integers(256))
        got = batch_rows(np.frombuffer(bytes(raw), np.uint8))
        if got is None:
            continue
        try:
            reader = pa.ipc.open_file(pa.py_buffer(bytes(raw)))
            want = [reader.get_batch(k).num_rows for k in range(reader.num_record_batches)]
        except (pa.ArrowException, OSError, ValueError):
            continue  # Arrow refuses it when the batch is read
        assert got.tolist() == want


# -------------------------------------------------------------- step reads are read-only
STORES = {
    "arrow": ({}, [np.float32(t) for t in range(4)]),
    "zstd": ({"compression": "zstd"}, [np.float32(t) for t in range(4)]),
    "parquet": ({"data_format": "parquet"}, [np.float32(t) for t in range(4)]),
    "bool leaf": ({}, [np.array([True, False])] * 4),
    "nested, zstd": (
        {"compression": "zstd"},
        [{"a": np.full(2, t, np.int64), "b": (np.float64(t),)} for t in range(4)],
    ),
}


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


@pytest.mark.parametrize("store", list(STORES))
def test_step_reads_are_read_only_and_later_reads_unchanged(tmp_path, store):
    kw, obs = STORES[store]
    path = _write(tmp_path / "d", [_episode(0, obs=obs, steps=3)], **kw)
    ds = Dataset(path)
    first = ds.steps(0, 0, 3)
    before = [leaf.copy() for leaf in _leaves(first["observations"])]
    for leaf in _leaves(first["observations"]) + [first["actions"], first["rewards"]]:
        assert not leaf.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            leaf[...] = 0
    again = _leaves(ds.steps(0, 0, 3)["observations"])
    assert all(np.array_equal(a, b) for a, b in zip(again, before, strict=True))
    episode = ds.episode(0)  # an episode owns writable arrays, as before
    for leaf in _leaves(episode.get_observations()):
        assert leaf.flags.writeable


def test_torch_items_are_writable_copies_without_warnings(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate

    from episodes.io.torch_data import SequenceDataset, TransitionDataset

    path = _write(tmp_path / "d", [_episode(i, steps=3) for i in range(3)], compression="zstd")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on a read-only numpy array
        for data in (TransitionDataset(path), SequenceDataset(path, length=2)):
            batch = default_collate([data[i] for i in range(len(data))])
            assert isinstance(batch["obs"], torch.Tensor)
            batch["obs"] += 1  # the items are the caller's


def _arrays(item: dict[str, Any]) -> list[np.ndarray]:
    return [leaf for leaf in _leaves(item) if isinstance(leaf, np.ndarray)]


@pytest.mark.parametrize("store", list(STORES))
def test_torch_items_written_in_place_leave_later_items_unchanged(tmp_path, store):
    pytest.importorskip("torch")
    from episodes.io.torch_data import SequenceDataset, TransitionDataset

    kw, obs = STORES[store]
    path = _write(tmp_path / "d", [_episode(i, obs=obs, steps=3) for i in range(3)], **kw)
    for data in (TransitionDataset(path), SequenceDataset(path, length=2)):
        before = [[leaf.copy() for leaf in _arrays(data[i])] for i in range(len(data))]
        for i in range(len(data)):  # every array of every item written in place
            item = data[i]
            assert _arrays(item), item
            for leaf in _arrays(item):
                if leaf.dtype == bool:
                    leaf[...] = ~leaf
                else:
                    leaf[...] += 100
        for i in range(len(data)):  # neither the same item read again nor an overlapping one
            again = _arrays(data[i])
            assert len(again) == len(before[i])
            assert all(np.array_equal(a, b) for a, b in zip(again, before[i], strict=True)), i


# ---------------------------------------------- a refused shard holds no descriptor nor map
def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mapped_shards() -> int:
    with open("/proc/self/maps") as maps:
        return sum("/shards/" in line for line in maps)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_shards_refused_when_opened_keep_no_descriptor_or_map(tmp_path):
    path = _write(tmp_path / "d", [_episode(i) for i in range(12)], shard_bytes=1)
    for name in _shard_names(path):  # the footer's schema damaged: fails once mapped
        data = path / "shards" / f"{name}.arrow"
        raw = bytearray(data.read_bytes())
        raw[-20] ^= 0xFF
        data.write_bytes(bytes(raw))
    ds = Dataset(path, max_open_shards=1)
    gc.collect()
    fds, maps = _open_fds(), _mapped_shards()
    depths = []
    for _ in range(3):
        for i in range(len(ds)):
            with pytest.raises(CorruptDatasetError) as caught:
                ds.episode(i)
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert (_open_fds(), _mapped_shards()) == (fds, maps)  # before: one each per shard
    assert depths[1] == depths[2] <= depths[0]  # refused from memory: no growing traceback


def test_a_damaged_batch_refused_again_does_not_grow_its_traceback(tmp_path):
    path = _write(tmp_path / "d", [_episode(i) for i in range(3)])
    (name,) = _shard_names(path)
    raw = bytearray((path / "shards" / f"{name}.arrow").read_bytes())
    marker = raw.index(b"e1e1")  # piece 1's ids: not UTF-8 after this
    raw[marker] = 0xFF
    _reseal(path, name, bytes(raw))
    ds = Dataset(path)
    depths = []
    for _ in range(3):
        with pytest.raises(CorruptDatasetError, match="UTF") as caught:
            ds.episode(1)
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[1] == depths[2] <= depths[0]
    assert ds.episode(2).id_ == "e2"


# -------------------------------------------------------- an open shard keeps a few batches
def test_a_zstd_shard_keeps_only_a_few_decompressed_batches(tmp_path):
    big = [np.zeros(25_000, np.float32)] * 11  # 1.1 MB a piece decompressed, tiny in zstd
    path = _write(
        tmp_path / "z", [_episode(i, obs=big, steps=10) for i in range(40)], compression="zstd"
    )
    gc.collect()
    before = pa.total_allocated_bytes()
    ds = Dataset(path)
    for i in np.random.default_rng(0).permutation(len(ds)):
        ds.episode(int(i))  # read and dropped
    gc.collect()
    held = pa.total_allocated_bytes() - before
    assert len(ds.open_shards()) == 1
    assert held < 8 * 1.1e6  # before: all 40 batches (44 MB)


def test_batches_fetched_again_are_not_checked_again(tmp_path, monkeypatch):
    got: list[int] = []
    real = pa.ipc.RecordBatchFileReader.get_batch

    def counting(self, k):
        got.append(k)
        return real(self, k)

    monkeypatch.setattr(pa.ipc.RecordBatchFileReader, "get_batch", counting, raising=False)
    path = _write(tmp_path / "d", [_episode(i) for i in range(20)])
    ds = Dataset(path)
    for _ in range(2):
        assert [ds.episode(i).id_ for i in range(20)] == [f"e{i}" for i in range(20)]
    shard, _ = ds.locate(0)
    assert sorted(got) == sorted(list(range(20)) * 2)  # each pass fetches each batch
    assert shard.parts.fetched == 20  # and each was checked once


def test_a_verifying_pass_fetches_each_batch_once(tmp_path, monkeypatch):
    got: list[int] = []
    real = pa.ipc.RecordBatchFileReader.get_batch

    def counting(self, k):
        got.append(k)
        return real(self, k)

    monkeypatch.setattr(pa.ipc.RecordBatchFileReader, "get_batch", counting, raising=False)
    path = _write(tmp_path / "d", [_episode(i) for i in range(20)], compression="zstd")
    assert [e.id_ for e in read_episodes(path, verify=True)] == [f"e{i}" for i in range(20)]
    assert validate_dataset(path).ok
    assert sorted(got) == sorted(list(range(20)) * 2)  # once for the pass, once for validate


def test_an_evicted_shard_is_freed_without_the_cyclic_collector(tmp_path):
    # Its cached plans (an infos column's reader among them) must not refer back to it.
    import weakref

    path = _write(tmp_path / "d", [_episode(i) for i in range(3)])
    _write(path, [_episode(3)])  # a second shard
    ds = Dataset(path, max_open_shards=1)
    gc.disable()
    try:
        assert ds.steps(1, 0, 1)["actions"].tolist() == [1]  # out of order: its plan cached
        shard = weakref.ref(ds.open_shards()[0])
        ds.steps(3, 0, 1)  # evicts it
        assert shard() is None
    finally:
        gc.enable()


# ------------------------------------------------------------- errors name the shard
def _rename_rewards(path: Path, name: str, reseal: bool) -> None:
    data = path / "shards" / f"{name}.arrow"
    raw = bytearray(data.read_bytes())
    raw[raw.rindex(b"rewards") + 6] ^= 0x01  # 'rewards' -> 'rewardr' in the footer's schema
    if reseal:
        _reseal(path, name, bytes(raw))
    else:
        data.write_bytes(bytes(raw))


ERROR_READS = {
    "Dataset.episode": lambda p: Dataset(p).episode(1),
    "Dataset.steps": lambda p: Dataset(p).steps(1, 0, 1),
    "read_episodes": lambda p: list(read_episodes(p)),
    "load_episode": lambda p: load_episode(p, "e1"),
}


@pytest.mark.parametrize("read", list(ERROR_READS))
def test_a_missing_column_names_its_shard(tmp_path, read):
    path = _write(tmp_path / "d", [_episode(i) for i in range(3)], shard_bytes=1)
    name = _shard_names(path)[1]
    _rename_rewards(path, name, reseal=False)
    with pytest.raises(CorruptDatasetError, match=f"shard {name}: column rewards is missing"):
        ERROR_READS[read](path)


def test_validate_reports_each_shard_damaged_alike(tmp_path):
    path = _write(tmp_path / "d", [_episode(i) for i in range(3)], shard_bytes=1)
    names = _shard_names(path)
    for name in names[1:]:
        _rename_rewards(path, name, reseal=True)
    report = validate_dataset(path)
    assert len(report.problems) == 2  # before: one line, naming neither
    for name, problem in zip(names[1:], report.problems, strict=True):
        assert problem.startswith(f"shard {name}: column rewards is missing")


def test_a_leaf_of_the_wrong_type_names_its_episode(tmp_path):
    path = _write(tmp_path / "d", [_episode(i) for i in range(2)])
    (name,) = _shard_names(path)
    index_path = path / "shards" / f"{name}.json"
    index = json.loads(index_path.read_text())
    leaf = index["episodes"][1]["leaves"]["rew.0.npy"]
    leaf["dtype"] = "<i8"  # the column holds float64
    text = json.dumps(index).encode()
    index_path.write_bytes(text)
    lines = _lines(path)
    lines[1].update(index_sha256=hashlib.sha256(text).hexdigest(), index_size=len(text))
    (path / "manifest.jsonl").write_bytes(seal_lines(lines))
    with pytest.raises(CorruptDatasetError, match=f"shard {name} episode 1: column rewards"):
        Dataset(path).episode(1)


# ---------------------------------------------------------- a directory that is no dataset
NOT_DATASETS = {
    "empty": lambda d: None,
    "other files": lambda d: (d / "notes.txt").write_text("hello"),
    "a shards folder only": lambda d: (d / "shards").mkdir(),
}


@pytest.mark.parametrize("content", list(NOT_DATASETS))
def test_dataset_of_a_directory_that_is_no_dataset(tmp_path, content):
    NOT_DATASETS[content](tmp_path)
    for read in (Dataset, lambda p: list(read_episodes(p))):
        with pytest.raises(NotADatasetError, match="not an episodes dataset"):
            read(tmp_path)


def test_dataset_of_other_directories_raises_as_before(tmp_path):
    EpisodeWriter(tmp_path / "v1").close()
    with pytest.raises(UnsupportedVersionError):
        Dataset(tmp_path / "v1")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "manifest.jsonl").write_bytes(b"junk\n")
    # A manifest without shards/ beside it is no v2 dataset (format.md): as every reader says.
    with pytest.raises(NotADatasetError, match="no format v2 manifest.jsonl, no v1 format.json"):
        Dataset(tmp_path / "m")
