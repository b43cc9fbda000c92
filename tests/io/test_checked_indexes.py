"""A shard's index is checked entry by entry once per process, not at every open.

Each ``load_episode`` opens a fresh ``Dataset``, which opened the episode's shard and checked
every entry of its index against the manifest: one call per id over a 4,000-piece shard cost
47-54 ms, almost all of it that scan. The scan of the same bytes against the same (shared,
immutable) manifest entry is now kept, and a later open gives what a fresh one gives.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, Dataset, DatasetWriter, load_episode, shard_index
from episodes.io.shard_reader import Shard


def _episode(id_: Any, n: int = 2) -> SingleAgentEpisode:
    obs = [np.full(3, i, np.float32) for i in range(n + 1)]
    return SingleAgentEpisode(
        id_, observations=obs, actions=list(range(n)), rewards=[1.0] * n, len_lookback_buffer=0
    )


def _write(path: Path, ids: list[Any]) -> None:
    with DatasetWriter(path, sync=False) as w:
        w.write_many([_episode(i) for i in ids])


def _opened(path: Path) -> Shard:
    ds = Dataset(path)
    return Shard(path, ds.shards[0])


def _plain(shard: Shard) -> tuple[Any, ...]:
    index = dict(shard.index)
    entries = [shard.index["episodes"][j] for j in range(len(shard.index["episodes"]))]
    index["episodes"] = entries
    parts = [shard.part_of(j) for j in range(len(entries))]
    return index, parts


@pytest.fixture(autouse=True)
def _clean() -> Any:
    shard_index.forget_checked()
    yield
    shard_index.forget_checked()


def test_a_second_open_gives_what_a_fresh_open_gives(tmp_path: Path) -> None:
    _write(tmp_path, [f"e{i}" for i in range(50)])
    first = _opened(tmp_path)
    assert shard_index.checked_indexes() == 1
    again = _opened(tmp_path)
    assert _plain(again) == _plain(first)
    shard_index.forget_checked()
    assert _plain(_opened(tmp_path)) == _plain(again)
    for i in (0, 17, 49):
        ep = load_episode(tmp_path, f"e{i}")
        assert ep.id_ == f"e{i}" and len(ep) == 2


@pytest.mark.parametrize("part", ["spaces", "data", "entry"])
def test_a_later_open_does_not_see_a_callers_changes(tmp_path: Path, part: str) -> None:
    _write(tmp_path, ["a", "b"])
    first = _opened(tmp_path)
    before = copy.deepcopy(_plain(first))
    if part == "spaces":
        first.index["spaces"].append("changed")
    elif part == "data":
        first.index["data"]["rows"] = -1
    else:
        first.index["episodes"][0]["meta"]["id"] = "changed"
    assert _plain(_opened(tmp_path)) == before


def test_an_entry_with_a_list_id_is_checked_at_every_open(tmp_path: Path) -> None:
    _write(tmp_path, [("tuple", 1), ("tuple", 2)])  # a tuple id is stored as a list
    ds = Dataset(tmp_path)
    Shard(tmp_path, ds.shards[0])
    assert shard_index.checked_indexes() == 0
    ds.summaries[0].id_[1] = 99  # the manifest row now disagrees with the index
    with pytest.raises(CorruptDatasetError, match="disagree with the manifest"):
        Shard(tmp_path, ds.shards[0])


def test_a_dataset_replaced_under_the_same_path_is_read_anew(tmp_path: Path) -> None:
    _write(tmp_path / "d", ["old"])
    assert load_episode(tmp_path / "d", "old").id_ == "old"
    shutil.rmtree(tmp_path / "d")
    _write(tmp_path / "d", ["new"])
    assert load_episode(tmp_path / "d", "new").id_ == "new"
    assert [s.id_ for s in Dataset(tmp_path / "d").summaries] == ["new"]


def test_a_damaged_index_is_refused_after_it_was_kept(tmp_path: Path) -> None:
    _write(tmp_path, ["a", "b"])
    shard = _opened(tmp_path)
    index_path = shard.path.with_suffix(".json")
    raw = bytearray(index_path.read_bytes())
    raw[raw.index(b'"a"') + 1] = ord("z")  # same size, another id
    index_path.write_bytes(bytes(raw))
    with pytest.raises(CorruptDatasetError, match="checksum"):
        _opened(tmp_path)


def test_what_is_kept_stays_within_its_byte_bound(tmp_path: Path, monkeypatch) -> None:
    sizes = []
    for k in range(4):
        _write(tmp_path / str(k), [f"e{i}" for i in range(20)])
        sizes.append(_opened(tmp_path / str(k)).entry.index_size)
    shard_index.forget_checked()
    monkeypatch.setattr(shard_index, "MAX_CHECKED_BYTES", 2 * max(sizes))
    for k in range(4):
        _opened(tmp_path / str(k))
    assert shard_index.checked_indexes() == 2  # the two most recently read
    monkeypatch.setattr(shard_index, "MAX_CHECKED_BYTES", min(sizes) - 1)
    shard_index.forget_checked()
    _opened(tmp_path / "0")
    assert shard_index.checked_indexes() == 0  # larger than the whole bound: not kept


def test_a_whole_index_parse_neither_uses_nor_keeps_a_scan(tmp_path: Path) -> None:
    _write(tmp_path, ["a", "b"])
    ds = Dataset(tmp_path)
    whole = Shard(tmp_path, ds.shards[0], whole_index=True)
    assert shard_index.checked_indexes() == 0 and isinstance(whole.index["episodes"], list)
    scanned = Shard(tmp_path, ds.shards[0])
    assert list(scanned.index["episodes"]) == whole.index["episodes"]


def test_a_child_forked_while_the_lock_is_held_opens_shards(tmp_path: Path) -> None:
    _write(tmp_path, ["a"])
    with shard_index._checked_lock:  # as another thread of the parent may hold it at the fork
        pid = os.fork()
        if pid == 0:  # the child: open within 10 s, or be killed by the alarm
            signal.alarm(10)
            ok = load_episode(tmp_path, "a").id_ == "a"
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_row_arrays_a_caller_gets_are_its_own(tmp_path: Path) -> None:
    _write(tmp_path, ["a", "b", "c"])
    ds = Dataset(tmp_path)
    raw = _opened(tmp_path).path.with_suffix(".json").read_bytes()
    for _ in range(2):  # the miss that keeps the scan, then a hit
        _, firsts, counts = shard_index.read_index(raw, ds.shards[0], "shard x")
        firsts[:] = array("q", [0] * len(firsts))
        counts[0] = 99
    _, firsts, counts = shard_index.read_index(raw, ds.shards[0], "shard x")
    assert shard_index.checked_indexes() == 1
    assert (list(firsts), list(counts)) == ([0, 3, 6], [3, 3, 3])
    assert Dataset(tmp_path).episode(2).id_ == "c"


def test_many_small_shards_each_opened_once_stay_within_the_bound(
    tmp_path: Path, monkeypatch
) -> None:
    _write(tmp_path, ["a"])
    size = _opened(tmp_path).entry.index_size
    shard_index.forget_checked()
    monkeypatch.setattr(shard_index, "MAX_CHECKED_BYTES", 3 * size)
    for k in range(6):
        path = tmp_path / f"d{k}"
        _write(path, ["a"])
        _opened(path)
        assert shard_index.checked_indexes() == min(k + 1, 3)
