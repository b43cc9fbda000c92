"""Checks of ``episodes.io.index_cache`` that a mutation round found missing.

Each check pins something the module's docstring or docs/format.md says and that no earlier
test held: the documented bounds (8 datasets per format, a 16 MiB v1 manifest), the settle
rule (files last changed at least 3 s before the open, mtime and ctime both), the ``lstat``
fields a kept shard is compared by, which shard a piece belongs to, and that a dataset the
cache stops using (replaced, refused, or a parent's in a forked child) is closed or dropped.

The settle rule is checked with a clock of the test's own as ``index_cache``'s ``time``: a
file's ctime cannot be set back, so the files stay as written and the clock moves.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes.io import (
    DatasetError,
    EpisodeNotFoundError,
    episode_loads,
    index_cache,
    load_episode,
)
from tests.io import _cache_datasets
from tests.io._cache_datasets import episode as _episode
from tests.io._cache_datasets import write_dataset as _write

_clean = _cache_datasets.nothing_kept
index_reads = _cache_datasets.index_reads
DOCUMENTED_MAX_DATASETS = 8  # docs/format.md: "the 8 v2 datasets they read last"
SECOND = 1_000_000_000


def _obs(path: Path, id_: Any) -> list[Any]:
    return np.asarray(load_episode(path, id_).get_observations()).tolist()


def _lent(path: Path) -> index_cache.LentDataset:
    return index_cache._v2[str(path.absolute())]


_fds = _cache_datasets.fds_under


class _Clock:
    """A stand-in for ``index_cache``'s ``time``: ``now`` when set, else the real clock."""

    def __init__(self) -> None:
        self.now: int | None = None

    def time_ns(self) -> int:
        return time.time_ns() if self.now is None else self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(index_cache, "time", fake)
    return fake


def _shard_files(path: Path) -> list[Path]:
    """Every shard's index and data file, in name order."""
    return sorted(p for p in (path / "shards").iterdir() if p.suffix in (".json", ".arrow"))


def _newest_change(files: list[Path]) -> int:
    return max(max(os.lstat(f).st_mtime_ns, os.lstat(f).st_ctime_ns) for f in files)


# ------------------------------------------------------------------ documented bounds
@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_the_eight_datasets_read_last_are_kept(tmp_path: Path, fmt: str) -> None:
    n = DOCUMENTED_MAX_DATASETS
    for k in range(n + 1):
        _write(tmp_path / f"d{k}", fmt, [_episode("a", start=k)])
    for k in range(n):
        assert _obs(tmp_path / f"d{k}", "a")[0] == [k] * 3
    assert index_cache.kept_datasets() == n  # none dropped yet
    assert _obs(tmp_path / f"d{n}", "a")[0] == [n] * 3
    assert index_cache.kept_datasets() == n  # the least recent one dropped
    if fmt == "v2":
        assert str((tmp_path / "d0").absolute()) not in index_cache._v2
        assert str((tmp_path / "d1").absolute()) in index_cache._v2


def test_a_v1_manifest_of_some_kilobytes_is_kept(tmp_path: Path) -> None:
    _write(tmp_path, "v1", [_episode(f"episode-{k:04d}", n=0) for k in range(200)])
    assert (tmp_path / "manifest.jsonl").stat().st_size > 32 << 10  # far below 16 MiB
    assert load_episode(tmp_path, "episode-0007").id_ == "episode-0007"
    assert index_cache.kept_datasets() == 1


@pytest.mark.parametrize(("over", "kept"), [(0, 1), (1, 0)], ids=["at the bound", "one over"])
def test_a_v1_manifest_of_max_v1_bytes_is_kept_and_a_longer_one_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: int, kept: int
) -> None:
    _write(tmp_path, "v1", [_episode("a")])
    assert load_episode(tmp_path, "a").id_ == "a"
    assert index_cache.kept_datasets() == 1
    _write(tmp_path, "v1", [_episode("b")])
    size = (tmp_path / "manifest.jsonl").stat().st_size
    monkeypatch.setattr(index_cache, "MAX_V1_BYTES", size - over)
    assert load_episode(tmp_path, "b").id_ == "b"
    assert index_cache.kept_datasets() == kept  # the parse of the shorter manifest dropped too


def test_v1_datasets_of_one_name_in_two_directories_are_both_kept(tmp_path: Path) -> None:
    for where in ("one", "two"):
        _write(tmp_path / where / "d", "v1", [_episode("a")])
        assert load_episode(tmp_path / where / "d", "a").id_ == "a"
    assert index_cache.kept_datasets() == 2


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_v2_copy_with_other_data_under_the_same_name_reads_its_own_data(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    clock.now = time.time_ns() + 10 * SECOND  # every file settled: shards stay open
    _write(tmp_path / "one" / "d", "v2", [_episode("a", start=0.25)])
    shutil.copytree(tmp_path / "one", tmp_path / "two")  # the same manifest, shard names
    (data,) = (tmp_path / "two" / "d" / "shards").glob("*.arrow")
    raw = data.read_bytes()
    data.write_bytes(raw.replace(np.float32(1.25).tobytes(), np.float32(42.0).tobytes()))

    def at(where: str) -> Path:
        if how == "absolute":
            return tmp_path / where / "d"
        monkeypatch.chdir(tmp_path / where)
        return Path("d")

    assert _obs(at("one"), "a")[1] == [1.25] * 3
    assert _obs(at("one"), "a")[1] == [1.25] * 3  # kept, its shard open
    assert _obs(at("two"), "a")[1] == [42.0] * 3


# ------------------------------------------------------------------ the settle rule
def _age(files: list[Path], how: str) -> None:
    """Changes ``files``'s times as ``how`` says (each change sets their ctime to now)."""
    now = time.time_ns()
    for f in files:
        if how == "data touched later" and f.suffix == ".arrow":
            time.sleep(0.02)
            os.utime(f, ns=(now, os.lstat(f).st_mtime_ns))
        elif how == "mtime in the past":
            os.utime(f, ns=(now, now - 100 * SECOND))
        elif how == "mtime in the future":
            os.utime(f, ns=(now, now + 100 * SECOND))


@pytest.mark.parametrize(
    ("how", "after", "kept_open"),
    [
        ("as written", 3 * SECOND + 1, 1),
        ("as written", 3 * SECOND, 0),  # not at least... before: strictly more than 3 s
        ("as written", 2 * SECOND + SECOND // 2, 0),
        ("as written", 4 * SECOND, 1),
        ("data touched later", None, 0),  # the index settled, the data file not
        ("mtime in the past", 3 * SECOND + 1, 1),
        ("mtime in the past", SECOND, 0),  # the ctime is recent
        ("mtime in the future", 3 * SECOND + 1, 0),  # the mtime is not yet settled
    ],
    ids=[
        "3s+1ns",
        "exactly 3s",
        "2.5s",
        "4s",
        "one file recent",
        "old mtime, settled ctime",
        "old mtime, recent ctime",
        "future mtime",
    ],
)
def test_a_shard_stays_open_only_if_both_files_changed_more_than_3s_before_the_open(
    tmp_path: Path, clock: _Clock, how: str, after: int | None, kept_open: int
) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b")])
    files = _shard_files(tmp_path)
    _age(files, how)
    st = {f.suffix: os.lstat(f) for f in files}
    if after is None:  # just past the index's change, within 3 s of the data file's
        index = st[".json"]
        assert st[".arrow"].st_ctime_ns > index.st_ctime_ns
        clock.now = max(index.st_mtime_ns, index.st_ctime_ns) + 3 * SECOND + 1
    else:
        clock.now = max(max(s.st_ctime_ns, s.st_mtime_ns) for s in st.values())
        if how == "mtime in the future":
            clock.now = max(s.st_ctime_ns for s in st.values())
        clock.now += after
    assert load_episode(tmp_path, "a").id_ == "a"
    assert len(_lent(tmp_path).ds.open_shards()) == kept_open


# ------------------------------------------------------------- what a kept shard is compared by
class _LstatShift:
    """``os`` for ``index_cache``, whose ``lstat`` of one file reports one field changed."""

    def __init__(self, target: Path, field: str) -> None:
        self.target, self.field, self.on = str(target), field, False

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def lstat(self, path: Any) -> Any:
        st = os.lstat(path)
        if not self.on or str(path) != self.target:
            return st
        fields = {f: getattr(st, f) for f in dir(st) if f.startswith("st_")}
        fields[self.field] += 1
        return types.SimpleNamespace(**fields)


@pytest.mark.parametrize("field", ["st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns"])
@pytest.mark.parametrize("suffix", [".json", ".arrow"])
def test_a_kept_shard_whose_file_lstat_differs_in_any_field_is_opened_again(
    tmp_path: Path,
    clock: _Clock,
    index_reads: list[str],
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    suffix: str,
) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b")])
    clock.now = time.time_ns() + 10 * SECOND
    (target,) = (f for f in _shard_files(tmp_path) if f.suffix == suffix)
    shifted = _LstatShift(target, field)
    monkeypatch.setattr(index_cache, "os", shifted)
    for _ in range(2):
        assert load_episode(tmp_path, "a").id_ == "a"
    assert len(index_reads) == 1  # opened once, then reused
    shifted.on = True
    assert load_episode(tmp_path, "b").id_ == "b"
    assert len(index_reads) == 2


def test_the_first_piece_of_a_later_shard_is_checked_against_its_own_shard(
    tmp_path: Path, clock: _Clock
) -> None:
    clock.now = time.time_ns() + 10 * SECOND
    _write(tmp_path, "v2", [_episode("a", start=0.25)])
    _write(tmp_path, "v2", [_episode("b", start=0.25), _episode("c", start=0.25)])
    assert len(_shard_files(tmp_path)) == 4
    for _ in range(2):
        assert _obs(tmp_path, "b")[1] == [1.25] * 3
        assert _obs(tmp_path, "a")[1] == [1.25] * 3
    assert len(_lent(tmp_path).ds.open_shards()) == 2
    (b_data,) = (
        f
        for f in _shard_files(tmp_path)
        if f.suffix == ".arrow" and f.with_suffix(".json").read_bytes().count(b'"b"')
    )
    edited = b_data.read_bytes().replace(np.float32(1.25).tobytes(), np.float32(42.0).tobytes())
    b_data.with_name("tmp").write_bytes(edited)
    os.replace(b_data.with_name("tmp"), b_data)  # same size, another file
    assert _obs(tmp_path, "b")[1] == [42.0] * 3  # as a fresh read: the data unchecked by CRC
    assert _obs(tmp_path, "c")[1] == [42.0] * 3


def test_a_shard_whose_file_changed_during_the_read_is_not_kept_open(
    tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    clock.now = time.time_ns() + 10 * SECOND
    (data,) = (f for f in _shard_files(tmp_path) if f.suffix == ".arrow")
    real = episode_loads._v2_joined

    def touching(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        st = os.lstat(data)
        os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # the ctime moves
        return out

    monkeypatch.setattr(episode_loads, "_v2_joined", touching)
    assert load_episode(tmp_path, "a").id_ == "a"
    assert _lent(tmp_path).ds.open_shards() == []


def test_a_kept_dataset_looks_ids_up_by_key_from_its_first_reuse(tmp_path: Path) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b")])
    load_episode(tmp_path, "a")
    lent = _lent(tmp_path)
    assert lent.by_id is None  # a first call scans the rows for its ids
    load_episode(tmp_path, "b")
    assert _lent(tmp_path) is lent and lent.by_id == {"str:'a'": (0,), "str:'b'": (1,)}


# ------------------------------------------------------------------ what stops being used is closed
def test_a_dataset_given_back_over_another_closes_the_other(tmp_path: Path) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    with index_cache.lent_dataset(tmp_path) as outer:
        with index_cache.lent_dataset(tmp_path) as inner:  # the outer one is lent: a new one
            assert inner is not outer
        assert not inner.ds._closed
    assert inner.ds._closed and not outer.ds._closed
    assert index_cache._v2[str(tmp_path.absolute())] is outer


@pytest.mark.parametrize("change", ["manifest damaged", "shard appended"])
def test_a_kept_dataset_the_next_call_does_not_use_is_closed(tmp_path: Path, change: str) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    load_episode(tmp_path, "a")
    lent = _lent(tmp_path)
    if change == "manifest damaged":
        manifest = tmp_path / "manifest.jsonl"
        raw = bytearray(manifest.read_bytes())
        raw[raw.rindex(b'"a"') + 1] = ord("z")  # same size: its seal no longer matches
        manifest.write_bytes(bytes(raw))
        with pytest.raises(DatasetError):
            load_episode(tmp_path, "a")
        assert index_cache.kept_datasets() == 0
    else:
        _write(tmp_path, "v2", [_episode("b")])
        assert load_episode(tmp_path, "b").id_ == "b"
        assert _lent(tmp_path) is not lent
    assert lent.ds._closed


def test_a_read_that_raises_closes_the_kept_dataset_it_used(tmp_path: Path) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    load_episode(tmp_path, "a")
    lent = _lent(tmp_path)
    with pytest.raises(EpisodeNotFoundError):
        load_episode(tmp_path, "zz")  # raised within the lending
    assert lent.ds._closed and index_cache.kept_datasets() == 0


def test_a_forked_child_neither_counts_nor_holds_its_parents_datasets(
    tmp_path: Path, clock: _Clock
) -> None:
    clock.now = time.time_ns() + 10 * SECOND
    for k in range(2):
        _write(tmp_path / f"d{k}", "v2", [_episode("a", start=k)])
        for _ in range(2):
            assert _obs(tmp_path / f"d{k}", "a")[0] == [k] * 3
    assert _fds(tmp_path / "d0") > 0 and index_cache.kept_datasets() == 2
    with index_cache._v2_lock:
        pid = os.fork()
        if pid == 0:
            code = 9  # it raised
            try:
                signal.alarm(10)
                if index_cache.kept_datasets() != 0:
                    code = 1
                elif _obs(tmp_path / "d1", "a")[0] != [1.0] * 3:
                    code = 2
                elif index_cache.kept_datasets() != 1:
                    code = 3
                else:  # the parent's d0 dropped by the child's first load
                    code = 0 if _fds(tmp_path / "d0") == 0 else 4
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    # 1, 3: what the child counts as kept; 2: its read; 4: the parent's d0 still held.
    assert os.waitstatus_to_exitcode(status) == 0
    assert index_cache.kept_datasets() == 2 and _fds(tmp_path / "d0") > 0


def test_a_kept_shard_whose_file_changed_is_opened_again_and_not_kept_while_recent(
    tmp_path: Path, clock: _Clock, index_reads: list[str]
) -> None:
    _write(tmp_path, "v2", [_episode("a")])
    clock.now = time.time_ns() + 10 * SECOND
    for _ in range(2):
        assert load_episode(tmp_path, "a").id_ == "a"
    assert len(_lent(tmp_path).ds.open_shards()) == 1 and len(index_reads) == 1
    (data,) = (f for f in _shard_files(tmp_path) if f.suffix == ".arrow")
    st = os.lstat(data)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # the ctime moves to now
    clock.now = os.lstat(data).st_ctime_ns + SECOND
    assert load_episode(tmp_path, "a").id_ == "a"
    assert len(index_reads) == 2  # opened again
    assert _lent(tmp_path).ds.open_shards() == []  # and, changed 1 s ago, not kept open
