"""Adversarial review of ``episodes.io.index_cache``: a kept read against a fresh one.

The claim under test: a ``load_episode``/``load_episodes`` call that reuses what an earlier
call kept gives what a fresh read (a new ``Dataset``, or ``verify=True``, which keeps
nothing) gives at that moment, and raises whatever the fresh read raises. Each check loads
once or twice (so that the dataset, and its settled shards, are kept), changes the dataset,
then compares the next load with a fresh one. Each check was a strict xfail where
it found a way to make them differ; the other checks pin what held. What it found: ids and
headers re-sealed as equal values of other types (``1`` as ``1.0``), and a shards directory
moved out and linked back, now fixed; an index edited through a memory map, and what a kept
shard holds, documented (docs/format.md) and pinned as such.

A shard is reused only once its files last changed ``SETTLED_NS`` (3 s) before it was opened.
A file's ctime cannot be set back, so most checks make files count as settled at once
(``settled_now``); the checks whose point is that the real guard lets a change through share
one dataset set built once and left to settle for real (``settled_for_real``).
"""

from __future__ import annotations

import gc
import mmap
import os
import shutil
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeNotFoundError,
    UnsafeDataError,
    episode_loads,
    index_cache,
    load_episode,
    load_episodes,
)
from episodes.io.manifest_lines import seal_lines, unseal_line
from episodes.io.values import id_key
from tests.io import _cache_datasets
from tests.io._cache_datasets import episode as _episode
from tests.io._cache_datasets import write_dataset as _write


def _outcome(call: Any) -> Any:
    """What a load gives: the episode's id and observations, or the error's type."""
    try:
        ep = call()
    except DatasetError as err:
        return type(err)
    return (ep.id_, np.asarray(ep.get_observations()).tolist())


def _fresh(path: Path, id_: Any) -> Any:
    """A load that uses nothing kept, and leaves what is kept as it was."""
    v2, v1 = index_cache._v2.copy(), index_cache._v1._kept.copy()
    index_cache._v2.clear()
    index_cache._v1.drop()
    try:
        return _outcome(lambda: load_episode(path, id_))
    finally:
        index_cache.forget_datasets()  # what this load kept (the others are set aside)
        index_cache._v2.update(v2)
        index_cache._v1._kept.update(v1)


def _kept(path: Path, id_: Any) -> Any:
    return _outcome(lambda: load_episode(path, id_))


def _rewrite_manifest(path: Path, edit: Any) -> None:
    """Rewrites ``path``'s v2 manifest, every line resealed and chained, after ``edit(objs)``."""
    lines = (path / "manifest.jsonl").read_bytes().split(b"\n")[:-1]
    objs = [unseal_line(line, "manifest") for line in lines]
    for obj in objs:
        obj.pop("prev", None)
    edit(objs)
    (path / "manifest.jsonl").write_bytes(seal_lines(objs))


def _edited(raw: bytes) -> bytes:
    """``raw`` with each float32 1.25 (an observation of ``_episode(id_, start=0.25)``) 42."""
    return raw.replace(np.float32(1.25).tobytes(), np.float32(42.0).tobytes())


_fds = _cache_datasets.fds_under


# Fixtures from the shared module: each test starts with nothing kept; files settle at once.
_clean = _cache_datasets.nothing_kept
settled_now = _cache_datasets.settled_now


@pytest.fixture(scope="module")
def settled_for_real(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Datasets whose files last changed more than ``SETTLED_NS`` ago (one wait for all).

    ``mapped``'s index is held in a shared writable memory map, written once before the
    wait: the kernel stamps a mapped file's times at the first write to a clean page, not at
    later writes to the same (still dirty) page.
    """
    base = tmp_path_factory.mktemp("settled")
    for name in ("mapped", "moved"):
        _write(base / name, "v2", [_episode("a"), _episode("b", start=5.0)])
    (index,) = (base / "mapped" / "shards").glob("*.json")
    fd = os.open(index, os.O_RDWR)
    try:
        mapped = mmap.mmap(fd, 0)
    finally:
        os.close(fd)
    mapped[0:1] = mapped[0:1]  # the one write the times record
    time.sleep(index_cache.SETTLED_NS / 1e9 + 0.2)
    yield base, mapped
    mapped.close()


def _kept_open(path: Path) -> int:
    (lent,) = index_cache._v2.values()
    assert lent.ds.root == path.absolute()
    return len(lent.ds.open_shards())


# ------------------------------------------------------------------ found, then fixed or documented
@pytest.mark.parametrize("new_id", [True, 1.0], ids=["bool", "float"])
def test_a_manifest_row_whose_id_changed_type_is_read_as_a_fresh_read_reads_it(
    tmp_path: Path, new_id: Any
) -> None:
    _write(tmp_path, "v2", [_episode(1), _episode("b")])
    assert _kept(tmp_path, 1)[0] == 1 == _kept(tmp_path, 1)[0]

    def edit(objs: list[Any]) -> None:
        objs[1]["episodes"][0][0] = new_id

    _rewrite_manifest(tmp_path, edit)
    assert _fresh(tmp_path, 1) is EpisodeNotFoundError
    assert _kept(tmp_path, 1) == EpisodeNotFoundError


def test_a_manifest_row_whose_id_changed_type_is_refused_by_a_fresh_read(tmp_path: Path) -> None:
    """(The fresh side of the xfail above: the edited row itself is damage when read.)"""
    _write(tmp_path, "v2", [_episode(1), _episode("b")])

    def edit(objs: list[Any]) -> None:
        objs[1]["episodes"][0][0] = True

    _rewrite_manifest(tmp_path, edit)
    assert _fresh(tmp_path, True) is CorruptDatasetError
    assert _fresh(tmp_path, 1) is EpisodeNotFoundError  # the shard is damaged for all ids


def test_a_header_a_fresh_read_refuses_is_refused_by_a_kept_read(tmp_path: Path) -> None:
    _write(tmp_path, "v2", [_episode("a")], metadata=DatasetMetadata(seeds=[1]))
    assert _kept(tmp_path, "a")[0] == "a" == _kept(tmp_path, "a")[0]

    def edit(objs: list[Any]) -> None:
        objs[0]["metadata"]["seeds"] = [True]

    _rewrite_manifest(tmp_path, edit)
    assert _fresh(tmp_path, "a") is CorruptDatasetError
    assert _kept(tmp_path, "a") == CorruptDatasetError


def test_shards_moved_outside_the_dataset_and_linked_back_are_refused(
    settled_for_real: Any,
) -> None:
    base, _ = settled_for_real
    path = base / "moved"
    assert _kept(path, "a")[0] == "a" == _kept(path, "a")[0]
    assert _kept_open(path) == 1  # settled for real: reused by the next call
    os.rename(path / "shards", base / "outside")
    os.symlink(base / "outside", path / "shards")
    assert _fresh(path, "a") is UnsafeDataError
    assert _kept(path, "a") == UnsafeDataError


def test_an_index_edited_through_a_memory_map_is_seen_as_it_was_opened(
    settled_for_real: Any,
) -> None:
    # Documented (format.md): a write through a shared writable memory map to a page already
    # dirty leaves the file's mtime and ctime as they were, so a kept dataset reads the index
    # as it was when opened, as a Dataset held open does; a fresh read sees the damage.
    base, mapped = settled_for_real
    path = base / "mapped"
    assert _kept(path, "a")[0] == "a" == _kept(path, "a")[0]
    assert _kept_open(path) == 1
    (index,) = (path / "shards").glob("*.json")
    before = os.lstat(index)
    at = mapped.find(b'"a"') + 1
    mapped[at : at + 1] = b"z"  # same size, another id
    after = os.lstat(index)
    if (before.st_mtime_ns, before.st_ctime_ns) != (after.st_mtime_ns, after.st_ctime_ns):
        pytest.skip("the page was written back since the first write: the times changed")
    assert _fresh(path, "a") is CorruptDatasetError
    assert _kept(path, "a")[0] == "a"  # the index as opened
    index_cache.forget_datasets()
    assert _kept(path, "a") == CorruptDatasetError  # dropped: opened and checked again


def test_a_v1_verify_read_keeps_the_parse_it_compares_byte_for_byte(tmp_path: Path) -> None:
    # Documented (format.md): v1 keeps its parsed manifest for verify=True reads too; it is
    # compared with the manifest's bytes at every call, so nothing stale can come of it.
    _write(tmp_path, "v1", [_episode("a")])
    assert load_episode(tmp_path, "a", verify=True).id_ == "a"
    assert index_cache.kept_datasets() == 1


def test_a_kept_dataset_retains_its_open_shards_index_until_forgotten(
    tmp_path: Path, settled_now: None
) -> None:
    pieces = [
        SingleAgentEpisode(f"e{i}", observations=[0.0], len_lookback_buffer=0) for i in range(800)
    ]
    _write(tmp_path, "v2", pieces)
    time.sleep(0.02)
    ((index,),) = [list((tmp_path / "shards").glob("*.json"))]
    tracemalloc.start()
    try:
        for _ in range(2):
            assert [e.id_ for e in load_episodes(tmp_path, ["e0", "e799"])] == ["e0", "e799"]
        assert _kept_open(tmp_path) == 1
        kept = tracemalloc.get_traced_memory()[0]
        index_cache.forget_datasets()
        gc.collect()
        retained = kept - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # Documented (format.md): a kept shard holds its index and plans, as an open Dataset
    # does; forget_datasets() gives them back.
    assert index.stat().st_size > 500_000
    assert retained > index.stat().st_size // 2, (retained, index.stat().st_size)


# ------------------------------------------------------------------ what held
@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_the_same_relative_path_in_another_directory_is_another_dataset(
    tmp_path: Path, fmt: str, settled_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, where in enumerate(("one", "two")):
        _write(tmp_path / where / "d", fmt, [_episode("a", start=10.0 * k)])
    monkeypatch.chdir(tmp_path / "one")
    first = _kept(Path("d"), "a")
    assert first == _kept(Path("d"), "a")
    monkeypatch.chdir(tmp_path / "two")
    assert _kept(Path("d"), "a") == _fresh(Path("d"), "a") != first


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_a_symlink_repointed_to_a_copy_with_other_data_reads_the_copy(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    _write(tmp_path / "one", fmt, [_episode("a", start=0.25), _episode("b")])
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    # The copy's data edited, its index and manifest as they were: a read without verify
    # gives the edited values (same size, so every check but the CRC-32 passes).
    files = sorted((tmp_path / "two").rglob("*.arrow" if fmt == "v2" else "*obs*.npy"))
    for data in files:
        data.write_bytes(_edited(data.read_bytes()))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "one")
    before = _kept(link, "a")
    assert before == _kept(link, "a")
    link.unlink()
    link.symlink_to(tmp_path / "two")
    got = _kept(link, "a")
    assert got == _fresh(link, "a")
    assert got != before and got[1][1] == [42.0] * 3


@pytest.mark.parametrize(
    "change",
    [
        "data renamed over",
        "data truncated",
        "both files of another shard",
        "data a symlink to its copy",
        "manifest torn tail",
    ],
)
def test_a_kept_shard_whose_files_changed_reads_as_a_fresh_read(
    tmp_path: Path, change: str, settled_now: None
) -> None:
    _write(tmp_path / "d", "v2", [_episode("a", start=0.25), _episode("b")])
    _write(tmp_path / "other", "v2", [_episode("a", start=3.0), _episode("b")])
    path = tmp_path / "d"
    before = _kept(path, "a")
    assert before == _kept(path, "a")
    assert _kept_open(path) == 1
    ((index, data),) = [(p, p.with_suffix(".arrow")) for p in (path / "shards").glob("*.json")]
    ((o_index, o_data),) = [
        (p, p.with_suffix(".arrow")) for p in (tmp_path / "other" / "shards").glob("*.json")
    ]
    if change == "data renamed over":
        (path / "tmp").write_bytes(_edited(data.read_bytes()))
        os.replace(path / "tmp", data)
    elif change == "data truncated":
        os.truncate(data, 16)
    elif change == "data a symlink to its copy":
        shutil.copyfile(data, path / "copy")
        os.replace(path / "copy", data.with_name("x"))
        data.unlink()
        data.symlink_to(data.with_name("x"))
    elif change == "manifest torn tail":  # a writer appending now: the next piece of "a"
        rest = _episode("a", start=0.25).cut()
        rest.add_env_step(np.full(3, 9, np.float32), 0, 1.0)
        _write(tmp_path / "more", "v2", [rest])
        line = (tmp_path / "more" / "manifest.jsonl").read_bytes().split(b"\n")[1]
        with open(path / "manifest.jsonl", "ab") as f:
            f.write(line[: len(line) // 2])
    else:
        shutil.copyfile(o_index, path / "i")
        shutil.copyfile(o_data, path / "d")
        os.replace(path / "i", index)
        os.replace(path / "d", data)
    got = _kept(path, "a")
    assert got == _fresh(path, "a")
    assert (got == before) == (change == "manifest torn tail")


def test_a_writer_appending_while_threads_load_gives_what_fresh_loads_give(
    tmp_path: Path, settled_now: None
) -> None:
    ids = [f"e{i}" for i in range(6)]
    _write(tmp_path, "v2", [_episode(i, n=1 + k % 3, start=k) for k, i in enumerate(ids)])
    want = {i: _fresh(tmp_path, i) for i in ids}
    stop = threading.Event()
    bad: list[Any] = []

    def load(offset: int) -> None:
        k = 0
        while not stop.is_set() or k < 12:
            i = ids[(k + offset) % len(ids)]
            got = _outcome(lambda: load_episodes(tmp_path, [i, i])[1])  # noqa: B023
            if got != want[i]:
                bad.append((i, got))
            k += 1

    threads = [threading.Thread(target=load, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    try:
        for k in range(6):  # a new shard each, with a new id
            with DatasetWriter(tmp_path, sync=False) as w:
                w.write(_episode(f"n{k}", start=100.0 + k))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert bad == []
    for k in range(6):
        assert _kept(tmp_path, f"n{k}") == _fresh(tmp_path, f"n{k}")
        assert _kept(tmp_path, f"n{k}")[1][0] == [100.0 + k] * 3


class _Str(str):
    """A str subclass: not the id ``"a"`` (``id_key`` names the type)."""


ODD_IDS = [(1, 2), float("nan"), -0.0, True, 1, 1.0, None, "a", ("a", (None, 2.5))]
LOOKUPS = [*ODD_IDS, 0.0, np.int64(1), np.str_("a"), _Str("a"), (1.0, 2), False, "zz"]


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_odd_ids_are_found_by_a_kept_read_as_by_a_fresh_one(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    """The first call of a v2 dataset scans its rows; a kept one looks ids up by key."""
    _write(tmp_path, fmt, [_episode(x, start=k) for k, x in enumerate(ODD_IDS)])

    def key(outcome: Any) -> Any:
        return outcome if isinstance(outcome, type) else (id_key(outcome[0]), outcome[1])

    for x in LOOKUPS:
        want = key(_fresh(tmp_path, x))
        assert [key(_kept(tmp_path, x)) for _ in range(3)] == [want] * 3, x
    assert key(_kept(tmp_path, np.int64(1)))[0] == "int:1"
    assert _kept(tmp_path, _Str("a")) is EpisodeNotFoundError


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_changing_a_returned_episode_does_not_change_the_next_kept_load(
    tmp_path: Path, fmt: str, settled_now: None
) -> None:
    n = 2
    ep = SingleAgentEpisode(
        "a",
        observations=[{"x": np.full(2, i, np.float32), "s": f"t{i}"} for i in range(n + 1)],
        actions=[np.array([1, 2])] * n,
        rewards=[1.0] * n,
        infos=[{"k": [1, 2]} for _ in range(n + 1)],
        extra_model_outputs={"v": [np.array([1.0, 2.0])] * n},
        len_lookback_buffer=0,
    )
    _write(tmp_path, fmt, [ep])
    want = load_episode(tmp_path, "a", verify=True)
    for numpy in (None, True):
        got = load_episode(tmp_path, "a", numpy=numpy)
        got = load_episode(tmp_path, "a", numpy=numpy)
        obs = got.get_observations()
        for o in obs if isinstance(obs, list) else [obs]:
            o["x"][...] = 99
        got.get_infos()[0]["k"].append(7)
        got.get_infos()[0]["new"] = 1
        assert got != want  # the change took
        assert load_episode(tmp_path, "a", numpy=numpy) == load_episode(
            tmp_path, "a", numpy=numpy, verify=True
        )


def test_evicted_and_forgotten_datasets_close_their_descriptors(
    tmp_path: Path, settled_now: None
) -> None:
    n = index_cache.MAX_DATASETS + 3
    for k in range(n):
        _write(tmp_path / f"d{k}", "v2", [_episode("a")])
        _write(tmp_path / f"d{k}", "v2", [_episode("b")])  # a second shard
    time.sleep(0.02)
    base = _fds(tmp_path)
    for k in range(n):
        for _ in range(2):
            assert [e.id_ for e in load_episodes(tmp_path / f"d{k}", ["a", "b"])] == ["a", "b"]
    # Two settled shards per kept dataset, each one descriptor: the evicted three hold none.
    assert _fds(tmp_path) - base <= 2 * index_cache.MAX_DATASETS
    index_cache.forget_datasets()
    assert _fds(tmp_path) == base


def test_an_interrupt_mid_read_closes_the_dataset_and_the_next_call_reads_afresh(
    tmp_path: Path, settled_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "v2", [_episode("a"), _episode("b", start=4.0)])
    want = _fresh(tmp_path, "b")
    base = _fds(tmp_path)
    assert _kept(tmp_path, "b") == want == _kept(tmp_path, "b")
    real = episode_loads._v2_joined
    calls = []

    def interrupted(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(episode_loads, "_v2_joined", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_episode(tmp_path, "b")
    assert index_cache.kept_datasets() == 0 and _fds(tmp_path) == base
    with pytest.raises(EpisodeNotFoundError):
        load_episode(tmp_path, "zz")
    assert _kept(tmp_path, "b") == want == _kept(tmp_path, "b")
    index_cache.forget_datasets()
    assert _fds(tmp_path) == base


def test_a_forked_child_releases_what_its_parent_kept_when_it_forgets(
    tmp_path: Path, settled_now: None
) -> None:
    base = _fds(tmp_path)
    for k in range(3):
        _write(tmp_path / f"d{k}", "v2", [_episode("a", start=k)])
        assert _kept(tmp_path / f"d{k}", "a") == _kept(tmp_path / f"d{k}", "a")
    assert _fds(tmp_path) > base  # settled shards held open
    with index_cache._v2_lock:
        pid = os.fork()
        if pid == 0:
            code = 9  # an exception: none of the checks below was reached
            try:
                if _kept(tmp_path / "d1", "a")[1][0] != [1.0] * 3:
                    code = 1
                elif index_cache.kept_datasets() != 1:
                    code = 2
                else:
                    index_cache.forget_datasets()
                    code = 0 if _fds(tmp_path) == base else 3
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    # 1: the child's read, 2: what it kept, 3: its descriptors after forgetting, 9: it raised.
    assert os.waitstatus_to_exitcode(status) == 0
    assert _kept(tmp_path / "d2", "a")[1][0] == [2.0] * 3
