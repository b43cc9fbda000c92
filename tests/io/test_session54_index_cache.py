"""Repeated ``load_episode`` calls reuse what an unchanged dataset's index gave them.

A loop of ``load_episode(path, id_)`` parsed the whole v1 manifest at each call, or (v2) opened
a fresh ``Dataset``: read, hashed and decoded its shard's index and scanned every manifest row
for the id. ``episodes.io.index_cache`` keeps that per dataset while the manifest's bytes
(v1) or shards (v2) stay the same and a shard's files keep their ``lstat``. These tests check
that a kept dataset gives what a fresh read gives, that appended pieces and damage are seen at
the next call, and that what is kept stays bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    EpisodeNotFoundError,
    index_cache,
    load_episode,
    load_episodes,
)
from tests.io import _cache_datasets
from tests.io._cache_datasets import episode as _episode
from tests.io._cache_datasets import write_dataset as _write

FORMATS = ["v1", "v2"]
# Fixtures from the shared module: each test starts with nothing kept; files settle at once.
_clean = _cache_datasets.nothing_kept
settled_now = _cache_datasets.settled_now


def _fresh(path: Path, id_: Any, **kw: Any) -> SingleAgentEpisode:
    index_cache.forget_datasets()
    return load_episode(path, id_, **kw)


def _shard_files(path: Path) -> list[Path]:
    return sorted((path / "shards").glob("*.json"))


index_reads = _cache_datasets.index_reads


@pytest.mark.parametrize("fmt", FORMATS)
def test_repeated_loads_equal_fresh_loads(tmp_path: Path, fmt: str, settled_now: None) -> None:
    first = _episode("a")
    rest = first.cut()
    rest.add_env_step(np.full(3, 9, np.float32), 1, 2.0, terminated=True)
    _write(tmp_path, fmt, [first, *(_episode(f"e{i}") for i in range(30)), rest])
    ids = ["a", "e0", "e17", "e29", "a"]
    fresh = {i: _fresh(tmp_path, i) for i in ids}
    index_cache.forget_datasets()
    for _ in range(3):
        for i in ids:
            assert load_episode(tmp_path, i) == fresh[i]
        assert [e.id_ for e in load_episodes(tmp_path, ids)] == ids
    assert load_episode(tmp_path, "a").get_observations()[-1].tolist() == [9, 9, 9]
    assert index_cache.kept_datasets() == 1
    for numpy in (True, False):
        load_episode(tmp_path, "e3")  # kept again
        got = load_episode(tmp_path, "e3", numpy=numpy)
        assert got == _fresh(tmp_path, "e3", numpy=numpy) and got.is_numpy == numpy


def test_a_settled_shard_is_reused_and_a_recent_one_is_read_again(
    tmp_path: Path, index_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "v2", [_episode(f"e{i}") for i in range(5)])
    for _ in range(3):  # files changed within SETTLED_NS: the index is hashed at each call
        load_episode(tmp_path, "e1")
    assert len(index_reads) == 3
    monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    index_reads.clear()
    for i in range(5):
        assert load_episode(tmp_path, f"e{i}").id_ == f"e{i}"
    assert len(index_reads) == 1  # the first of them opened it; the rest reused it


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("appended", ["new id", "next piece of an id"])
def test_an_append_is_seen_by_the_next_load(
    tmp_path: Path, fmt: str, appended: str, settled_now: None
) -> None:
    first = _episode("a")
    _write(tmp_path, fmt, [first, _episode("b")])
    assert len(load_episode(tmp_path, "a")) == 2 and len(load_episode(tmp_path, "a")) == 2
    if appended == "new id":
        _write(tmp_path, fmt, [_episode("c", n=4)])
        assert len(load_episode(tmp_path, "c")) == 4
    else:
        rest = first.cut()
        rest.add_env_step(np.full(3, 7, np.float32), 0, 1.0)
        _write(tmp_path, fmt, [rest])
        got = load_episode(tmp_path, "a")
        assert len(got) == 3 and got.get_observations()[-1].tolist() == [7, 7, 7]
        assert got == _fresh(tmp_path, "a")
    assert load_episode(tmp_path, "b") == _fresh(tmp_path, "b")
    with pytest.raises(EpisodeNotFoundError):
        load_episode(tmp_path, "zz")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_dataset_replaced_under_the_same_path_is_read_anew(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    path = tmp_path / "d"
    _write(path, fmt, [_episode("old")])
    assert load_episode(path, "old").id_ == "old" == load_episode(path, "old").id_
    shutil.rmtree(path)
    _write(path, fmt, [_episode("new", start=5)])
    assert load_episode(path, "new").get_observations()[0].tolist() == [5, 5, 5]
    with pytest.raises(EpisodeNotFoundError):
        load_episode(path, "old")


@pytest.mark.parametrize("settle", ["default", "at once"])
def test_an_index_changed_in_place_is_refused_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle: str
) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b")])
    time.sleep(0.05)  # past the file system's timestamp granularity of the write
    if settle == "at once":
        monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    assert load_episode(tmp_path, "a").id_ == "a" == load_episode(tmp_path, "a").id_
    (index,) = _shard_files(tmp_path)
    st = os.stat(index)
    raw = bytearray(index.read_bytes())
    raw[raw.index(b'"a"') + 1] = ord("z")  # same size, another id
    index.write_bytes(bytes(raw))
    os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with its old mtime
    for _ in range(2):
        with pytest.raises(CorruptDatasetError, match="checksum"):
            load_episode(tmp_path, "a")
    with pytest.raises(CorruptDatasetError, match="checksum"):
        _fresh(tmp_path, "a")


@pytest.mark.parametrize("damage", ["truncated", "removed"])
def test_a_data_file_changed_after_a_kept_open_is_refused_as_a_fresh_read_refuses_it(
    tmp_path: Path, damage: str, settled_now: None
) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b")])
    assert load_episode(tmp_path, "b").id_ == "b" == load_episode(tmp_path, "b").id_
    (data,) = (tmp_path / "shards").glob("*.arrow")
    if damage == "truncated":
        os.truncate(data, data.stat().st_size - 8)
    else:
        data.unlink()
    with pytest.raises(DatasetError) as kept:
        load_episode(tmp_path, "b")
    with pytest.raises(DatasetError) as fresh:
        _fresh(tmp_path, "b")
    assert (type(kept.value), str(kept.value)) == (type(fresh.value), str(fresh.value))


def test_a_data_file_replaced_by_the_same_bytes_is_read_from_the_new_file(
    tmp_path: Path, settled_now: None
) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    want = load_episode(tmp_path, "a")
    (data,) = (tmp_path / "shards").glob("*.arrow")
    copy = data.with_name("copy")
    shutil.copyfile(data, copy)
    os.replace(copy, data)  # a new inode
    assert load_episode(tmp_path, "a") == want


@pytest.mark.parametrize("damage", ["meta.json", "manifest line"])
def test_v1_damage_after_a_kept_parse_is_refused(
    tmp_path: Path, damage: str, settled_now: None
) -> None:
    _write(tmp_path, "v1", [_episode("a"), _episode("b")])
    assert load_episode(tmp_path, "a").id_ == "a" == load_episode(tmp_path, "a").id_
    if damage == "meta.json":
        (meta,) = (p for p in (tmp_path / "chunks").glob("*/meta.json") if b'"a"' in p.read_bytes())
        raw = bytearray(meta.read_bytes())
        raw[raw.index(b'"a"') + 1] = ord("z")
        meta.write_bytes(bytes(raw))
    else:
        manifest = tmp_path / "manifest.jsonl"
        raw = bytearray(manifest.read_bytes())
        raw[raw.index(b"{")] = ord("[")  # same size, no longer JSON
        manifest.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError):
        load_episode(tmp_path, "a")


def test_a_failed_read_drops_the_dataset_and_the_next_one_works(
    tmp_path: Path, settled_now: None
) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    load_episode(tmp_path, "a")
    with pytest.raises(EpisodeNotFoundError):
        load_episode(tmp_path, "missing")
    assert load_episode(tmp_path, "a") == _fresh(tmp_path, "a")


def test_what_is_kept_is_bounded_and_evicted_datasets_are_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled_now: None
) -> None:
    lent: list[Any] = []
    real = index_cache.LentDataset.pieces

    def spied(self: Any, ids: Any) -> Any:
        lent.append(self)
        return real(self, ids)

    monkeypatch.setattr(index_cache.LentDataset, "pieces", spied)
    n = index_cache.MAX_DATASETS + 3
    for fmt in FORMATS:
        for k in range(n):
            _write(tmp_path / f"{fmt}-{k}", fmt, [_episode(f"x{k}")])
            assert load_episode(tmp_path / f"{fmt}-{k}", f"x{k}").id_ == f"x{k}"
    assert index_cache.kept_datasets() == 2 * index_cache.MAX_DATASETS
    closed = [x.ds._closed for x in lent]
    assert closed == [True] * 3 + [False] * index_cache.MAX_DATASETS
    index_cache.forget_datasets()
    assert index_cache.kept_datasets() == 0 and all(x.ds._closed for x in lent)


def test_verify_reads_bypass_what_is_kept(tmp_path: Path, settled_now: None) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    assert load_episode(tmp_path, "a", verify=True).id_ == "a"
    assert index_cache.kept_datasets() == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_threads_loading_one_dataset_get_what_a_fresh_load_gives(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    ids = [f"e{i}" for i in range(12)]
    _write(tmp_path, fmt, [_episode(i, n=1 + k % 4) for k, i in enumerate(ids)])
    want = {i: _fresh(tmp_path, i) for i in ids}
    failures: list[str] = []

    def work(offset: int) -> None:
        for k in range(40):
            i = ids[(k + offset) % len(ids)]
            if load_episode(tmp_path, i) != want[i]:
                failures.append(i)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert index_cache.kept_datasets() == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_forked_child_loads_what_its_parent_kept(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    _write(tmp_path, fmt, [_episode("a"), _episode("b", n=3)])
    assert len(load_episode(tmp_path, "b")) == 3
    with index_cache._v2_lock:  # as another thread of the parent may hold it at the fork
        pid = os.fork()
        if pid == 0:  # the child: load within 10 s, or be killed by the alarm
            signal.alarm(10)
            ok = len(load_episode(tmp_path, "b")) == 3 and load_episode(tmp_path, "a").id_ == "a"
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(load_episode(tmp_path, "b")) == 3


@pytest.mark.parametrize(
    ("data_format", "compression", "settle", "kept_open"),
    [
        ("arrow", None, "at once", 1),
        ("arrow", None, "default", 0),  # just written: opened again by the next call anyway
        ("arrow", "zstd", "at once", 0),  # holds decompressed batches in memory
        ("parquet", None, "at once", 0),  # holds the whole shard in memory
    ],
    ids=["arrow", "arrow-recent", "arrow-zstd", "parquet"],
)
def test_only_settled_memory_mapped_shards_stay_open_between_calls(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    data_format: str,
    compression: str | None,
    settle: str,
    kept_open: int,
) -> None:
    if settle == "at once":
        monkeypatch.setattr(index_cache, "SETTLED_NS", 0)
    _write(
        tmp_path,
        "v2",
        [_episode("a"), _episode("b", n=3)],
        data_format=data_format,
        compression=compression,
    )
    want = _fresh(tmp_path, "b")
    for _ in range(3):
        assert load_episode(tmp_path, "b") == want
        assert load_episode(tmp_path, "a").id_ == "a"
        (lent,) = index_cache._v2.values()
        assert len(lent.ds.open_shards()) == kept_open
