"""Review of the quarantine and ``relist``: the states a failure leaves, and who waits for whom.

A move of a shard's two files killed between them (a relist moving it back, a lone writer
moving it out) leaves one file in each place; a manifest put back whole after a lone writer
moved its lost lines' shards out lists files that are in ``unlisted/shards/``. ``relist``
alone mends both, and ``--discard`` never removes a file a manifest line lists.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from episodes.cli import main
from episodes.io import (
    DatasetWriter,
    discard_unlisted,
    read_episodes,
    relist_shards,
    unlisted,
    validate_dataset,
)
from tests._unlisted_datasets import IDS, QUARANTINE
from tests._unlisted_datasets import four_shards as _dataset
from tests._unlisted_datasets import one_episode as _episode


def _lose_lines(path: Path, keep: int = 2) -> None:
    """The manifest cut to its header and ``keep - 1`` shard lines, then a lone writer opens."""
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:keep]))
    DatasetWriter(path, sync=False).close()


def _ids(path: Path) -> list[str]:
    return sorted(e.id_ for e in read_episodes(path))


def _fail_rename(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    """``os.rename`` raises at its ``at``-th call (the process dies there, as far as files go)."""
    real, calls = os.rename, [0]

    def rename(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == at:
            raise OSError(errno.EIO, "killed here")
        real(*args, **kwargs)

    monkeypatch.setattr(os, "rename", rename)


def _relist(path: Path) -> None:
    relist_shards(path, sync=False)


def _lone_writer(path: Path) -> None:
    DatasetWriter(path, sync=False).close()


@pytest.mark.parametrize("at", range(1, 7))
@pytest.mark.parametrize(
    "step", [_relist, _lone_writer], ids=["relist-moving-back", "lone-writer-moving-out"]
)
def test_relist_alone_mends_a_move_stopped_at_any_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: Any, at: int
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    if step is _relist:
        _lose_lines(path)
    else:  # the lines are lost, the lone writer's moves are the ones stopped
        manifest = path / "manifest.jsonl"
        manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:2]))
    with monkeypatch.context() as m:
        _fail_rename(m, at)
        with pytest.raises(OSError, match="killed here"):
            step(path)
    dry = relist_shards(path, dry_run=True)
    assert all(s.ok or "partly in shards/" in (s.problem or "") for s in dry), dry
    shards = relist_shards(path, sync=False)  # no writer opens in between
    assert all(s.ok for s in shards), shards
    assert _ids(path) == IDS
    assert validate_dataset(path).ok and not validate_dataset(path).notes
    assert not (path / QUARANTINE).exists() or not os.listdir(path / QUARANTINE)


def test_a_dry_run_names_a_split_shard_once_and_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _lose_lines(path)
    with monkeypatch.context() as m:
        _fail_rename(m, 2)  # the first shard's data file is back, its index is not
        with pytest.raises(OSError):
            relist_shards(path, sync=False)
    before = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
    split = [s for s in relist_shards(path, dry_run=True) if not s.ok]
    assert len(split) == 1 and "joins them in shards/" in (split[0].problem or "")
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*")) == before


def test_discarding_after_a_stopped_move_then_relisting_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old refusal of each half said 'discard it': discard came before relist."""
    path = tmp_path / "d"
    _dataset(path)
    _lose_lines(path)
    with monkeypatch.context() as m:
        _fail_rename(m, 2)
        with pytest.raises(OSError):
            relist_shards(path, sync=False)
    relist_shards(path, sync=False)
    discard_unlisted(path)
    assert _ids(path) == IDS


def _put_back(path: Path, whole: bytes) -> None:
    (path / "manifest.jsonl").write_bytes(whole)


def test_relist_moves_back_the_shards_of_a_manifest_put_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "d"
    whole = _dataset(path)
    _lose_lines(path)
    _put_back(path, whole)  # the backup (or the copy run again) is complete
    assert not validate_dataset(path).ok  # three listed shards' files are in unlisted/
    dry = relist_shards(path, dry_run=True)
    assert [(s.ok, s.relisted) for s in dry] == [(True, False)] * 3
    assert not validate_dataset(path).ok
    shards = relist_shards(path, sync=False)
    assert [(s.ok, s.relisted, s.place) for s in shards] == [(True, True, str(QUARANTINE))] * 3
    assert (path / "manifest.jsonl").read_bytes() == whole  # nothing appended
    assert _ids(path) == IDS and validate_dataset(path).ok


def test_discard_never_removes_a_file_a_manifest_line_lists(tmp_path: Path) -> None:
    path = tmp_path / "d"
    whole = _dataset(path)
    _lose_lines(path)
    _put_back(path, whole)
    assert discard_unlisted(path, dry_run=True) == []
    assert main(["relist", str(path), "--discard"]) == 0
    assert len(os.listdir(path / QUARANTINE)) == 6
    relist_shards(path, sync=False)
    assert _ids(path) == IDS


def test_a_quarantined_file_unlike_its_listed_shard_is_not_moved_back(tmp_path: Path) -> None:
    path = tmp_path / "d"
    whole = _dataset(path)
    _lose_lines(path)
    _put_back(path, whole)
    index = sorted((path / QUARANTINE).glob("*.json"))[0]
    index.write_bytes(index.read_bytes().replace(b"}", b" }", 1))  # same name, other bytes
    shards = relist_shards(path, sync=False)
    bad = [s for s in shards if not s.ok]
    assert len(bad) == 1 and "differs" in (bad[0].problem or "") and not bad[0].relisted
    assert index.exists()  # left where it was
    assert sum(s.relisted for s in shards) == 2


def test_a_writer_opening_during_relist_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _lose_lines(path)
    events: list[str] = []
    real = unlisted._append

    def writer() -> None:
        events.append("writer opening")
        with DatasetWriter(path, shard_bytes=1, sync=False) as w:
            events.append("writer open")
            w.write(_episode("z"))

    thread = threading.Thread(target=writer)

    def append(fd: int, entry: Any, *, sync: bool) -> None:
        if not thread.is_alive() and not events:
            thread.start()
            while not events:
                time.sleep(0.01)
            time.sleep(0.2)  # room for the writer to get past its lock, were it not excluded
        events.append("relist appends")
        real(fd, entry, sync=sync)

    monkeypatch.setattr(unlisted, "_append", append)
    assert all(s.relisted for s in relist_shards(path, sync=False))
    thread.join()
    assert events[-1] == "writer open" and events.count("relist appends") == 3, events
    assert _ids(path) == [*IDS, "z"] and validate_dataset(path).ok


def test_the_copy_of_a_relisted_dataset_reads_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _lose_lines(path)
    relist_shards(path, sync=False)
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    assert main(["filter", str(copy), "--out", str(tmp_path / "f")]) == 0
    assert _ids(tmp_path / "f") == IDS
