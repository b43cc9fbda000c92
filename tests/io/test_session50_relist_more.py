"""More on ``relist`` and the quarantine: what a failed open says, and what ``validate`` notes.

A directory the system refuses to open (no permission, an I/O error) is no symlink: the error
names the path and the system's reason. A manifest put back whole after a lone writer moved
its lost lines' shards out lists quarantined files: ``validate`` says they are listed and that
``episodes relist`` moves them back, not that no line lists them.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    DatasetIOError,
    DatasetLockedError,
    DatasetWriter,
    UnsafeDataError,
    discard_unlisted,
    read_episodes,
    relist_shards,
    unlisted,
    validate_dataset,
)
from episodes.io.shards import EpisodeRow
from tests._unlisted_datasets import IDS, QUARANTINE
from tests._unlisted_datasets import four_shards as _dataset
from tests._unlisted_datasets import one_episode as _episode


def _cut(path: Path, keep: int) -> None:
    manifest = path / "manifest.jsonl"
    manifest.write_bytes(b"".join(manifest.read_bytes().splitlines(keepends=True)[:keep]))


def _ids(path: Path) -> list[str]:
    return sorted(e.id_ for e in read_episodes(path))


def _refuse(monkeypatch: pytest.MonkeyPatch, call: str, name: str, code: int) -> None:
    """``os.<call>`` of a path whose last part is ``name`` fails with ``code``.

    ``shards`` is the dataset's ``shards/`` only (the quarantine's is opened through a
    descriptor of ``unlisted``).
    """
    real = getattr(os, call)

    def fake(target: Any, *args: Any, **kwargs: Any) -> Any:
        if os.path.basename(os.fspath(target)) == name and (
            name != "shards" or "dir_fd" not in kwargs
        ):
            raise OSError(code, os.strerror(code), os.fspath(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(os, call, fake)


# ---------------------------------------------------------------- 1a: what failed, said


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO], ids=["EACCES", "EIO"])
@pytest.mark.parametrize("run", ["relist", "discard", "dry-run"])
def test_relist_names_the_system_s_reason_when_shards_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, run: str
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _cut(path, 3)
    DatasetWriter(path, sync=False).close()
    before = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
    with monkeypatch.context() as m:
        _refuse(m, "open", "shards", code)
        with pytest.raises(DatasetIOError) as raised:
            if run == "discard":
                discard_unlisted(path)
            else:
                relist_shards(path, dry_run=run == "dry-run", sync=False)
    message = str(raised.value)
    assert raised.value.errno == code
    assert os.strerror(code) in message and str(path / "shards") in message
    assert "symlink" not in message
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*")) == before


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO], ids=["EACCES", "EIO"])
def test_a_quarantine_the_system_refuses_is_named_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _cut(path, 3)
    DatasetWriter(path, sync=False).close()
    with monkeypatch.context() as m:
        _refuse(m, "open", "unlisted", code)
        with pytest.raises(DatasetIOError) as raised:
            relist_shards(path, sync=False)
        report = validate_dataset(path)
        with pytest.raises(DatasetIOError):
            discard_unlisted(path)
    for message in (str(raised.value), report.notes[0]):
        assert os.strerror(code) in message and str(path / "unlisted") in message
        assert "symlink" not in message
    assert report.ok
    assert len(os.listdir(path / QUARANTINE)) == 4  # nothing moved, nothing removed
    relist_shards(path, sync=False)
    assert _ids(path) == IDS


@pytest.mark.parametrize("call", ["open", "mkdir"])
def test_a_lone_writer_the_system_refuses_a_quarantine_keeps_the_files_and_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """A ``mkdir`` refused (a dataset root the user may not write) raised PermissionError."""
    path = tmp_path / "d"
    _dataset(path)
    _cut(path, 3)
    before = sorted(os.listdir(path / "shards"))
    with monkeypatch.context() as m:
        _refuse(m, call, "unlisted", errno.EACCES)
        DatasetWriter(path, sync=False).close()  # opens alone
    assert sorted(os.listdir(path / "shards")) == before  # left unlisted, not deleted
    assert call == "open" or not (path / "unlisted").exists()
    relist_shards(path, sync=False)
    assert _ids(path) == IDS


@pytest.mark.parametrize("code", [errno.ELOOP, errno.ENOTDIR], ids=["ELOOP", "ENOTDIR"])
def test_a_link_or_a_file_keeps_the_symlink_wording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    path = tmp_path / "d"
    _dataset(path)
    _cut(path, 3)
    DatasetWriter(path, sync=False).close()
    with monkeypatch.context() as m:
        _refuse(m, "open", "unlisted", code)
        with pytest.raises(UnsafeDataError, match="symlink or not a directory"):
            relist_shards(path, sync=False)
    with monkeypatch.context() as m:
        _refuse(m, "open", "shards", code)
        with pytest.raises(Exception, match=r"not a plain directory \(a symlink\?\)"):
            relist_shards(path, sync=False)


# ------------------------------------------------- 1b: validate's note on listed files


def _put_back_whole(path: Path, *, lost: int) -> None:
    """A lone writer ran on a manifest missing ``lost`` lines; then it was put back whole."""
    whole = _dataset(path)
    _cut(path, 1 + len(IDS) - lost)
    DatasetWriter(path, sync=False).close()
    (path / "manifest.jsonl").write_bytes(whole)


def test_validate_says_quarantined_files_a_line_lists_are_moved_back_by_relist(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d"
    _put_back_whole(path, lost=2)
    report = validate_dataset(path)
    assert not report.ok  # the readers miss them
    (note,) = [n for n in report.notes if "unlisted/shards/" in n]
    assert note.startswith("unlisted/shards/ holds 4 files (2 shards) that manifest lines list")
    assert "`episodes relist DIR` moves them back" in note
    assert "no manifest line lists" not in note and "--discard" not in note
    relist_shards(path, sync=False)
    assert validate_dataset(path).ok and not validate_dataset(path).notes
    assert _ids(path) == IDS


def test_validate_names_listed_and_unlisted_quarantined_files_apart(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _put_back_whole(path, lost=2)
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        w.write(_episode("e"))
    _cut(path, 1 + len(IDS))  # e's line lost
    os.rename(path / QUARANTINE, path / "q")  # the lone writer moves e's files out
    DatasetWriter(path, sync=False).close()
    for name in os.listdir(path / "q"):
        os.rename(path / "q" / name, path / QUARANTINE / name)
    (note,) = [n for n in validate_dataset(path).notes if "unlisted/shards/" in n]
    listed, _, unlisted = note.partition("; and ")
    assert "4 files (2 shards) that manifest lines list" in listed and "--discard" not in listed
    assert unlisted.startswith("2 files (1 shard) that no manifest line lists")
    assert "--discard DIR` removes them (never the former)" in unlisted
    assert main(["relist", str(path)]) == 0
    assert _ids(path) == [*IDS, "e"]


def test_a_quarantined_file_whose_listed_twin_is_in_shards_is_no_missing_file(
    tmp_path: Path,
) -> None:
    """A copy left in the quarantine while ``shards/`` holds the listed file is a leftover."""
    path = tmp_path / "d"
    _dataset(path)
    name = sorted(os.listdir(path / "shards"))[0]
    (path / QUARANTINE).mkdir(parents=True)
    (path / QUARANTINE / name).write_bytes((path / "shards" / name).read_bytes())
    report = validate_dataset(path)
    assert report.ok
    (note,) = report.notes
    assert note.startswith("unlisted/shards/ holds 1 file (1 shard) that no manifest line lists")


# ------------------------------------------------------ 2: two at once, many pieces of one id


@pytest.mark.parametrize("run", ["relist", "discard"])
def test_a_second_relist_or_discard_beside_one_is_told_so(tmp_path: Path, run: str) -> None:
    """A relist in another process holds ``shards/`` as a lone writer does; the error said
    only 'a writer has the dataset open'."""
    path = tmp_path / "d"
    _dataset(path)
    _cut(path, 3)
    DatasetWriter(path, sync=False).close()
    held = os.open(path / "shards", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a relist running in another process holds it
        with pytest.raises(DatasetLockedError, match="or another relist or discard runs on it"):
            if run == "discard":
                discard_unlisted(path)
            else:
                relist_shards(path, sync=False)
    finally:
        os.close(held)
    assert len(os.listdir(path / QUARANTINE)) == 4  # nothing changed
    relist_shards(path, sync=False)
    assert _ids(path) == IDS


def _clashes(listed: list[tuple[str, int, int]], row: tuple[str, int, int]) -> set[str]:
    """What relist may say of ``row``: it names a listed piece of its id with the same steps,
    or one whose steps overlap (the rule a scan of every listed piece applies)."""
    id_, a, b = row
    said = set()
    for other, t0, t1 in listed:
        if other == id_ and ((t0, t1) == (a, b) or (t0 < b and a < t1)):
            how = "the same steps as" if (t0, t1) == (a, b) else "steps overlapping"
            said.add(
                f"its piece of episode {id_!r} (steps {a} to {b}) has {how} a listed piece "
                f"({t0} to {t1})"
            )
    return said


_piece = st.tuples(st.sampled_from("xy"), st.integers(0, 12), st.integers(0, 6)).map(
    lambda p: (p[0], p[1], p[1] + p[2])
)


@settings(max_examples=300, deadline=None)
@given(listed=st.lists(_piece, max_size=12), asked=st.lists(_piece, min_size=1, max_size=12))
def test_the_piece_clash_lookup_words_what_a_scan_of_every_listed_piece_words(
    listed: list[tuple[str, int, int]], asked: list[tuple[str, int, int]]
) -> None:
    """Relisting one long episode's pieces was quadratic (each piece scanned every listed
    one); the bisected lookup must refuse exactly what the scan refused, naming a piece the
    scan could name. A relisted piece joins the listed ones, as relist adds each good one's."""
    pieces = unlisted._Pieces()
    pieces.add(tuple(EpisodeRow(i, a, b, 0.0, False, False) for i, a, b in listed))
    known = list(listed)
    for row in asked:
        got = pieces.clash((EpisodeRow(row[0], row[1], row[2], 0.0, False, False),))
        said = _clashes(known, row)
        assert got in said if said else got is None
        if (row[0], row[1], row[2]) in known:  # the same piece listed is named as such
            assert got is not None and "the same steps as" in got
        if got is None:
            pieces.add((EpisodeRow(row[0], row[1], row[2], 0.0, False, False),))
            known.append(row)


def test_relisting_the_pieces_of_one_long_episode_refuses_each_repeat(tmp_path: Path) -> None:
    """An episode written in many pieces (flushed as it runs): relist brings back the lost
    ones, and refuses those whose steps were written again meanwhile."""
    path = tmp_path / "d"
    episode = SingleAgentEpisode("x", observations=[0.0], len_lookback_buffer=0)
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        for k in range(12):
            episode.add_env_step(float(k + 1), 0, 1.0)
            w.write(episode)
            w.flush()
            episode = episode.cut()
    _cut(path, 7)  # pieces 6.. lost
    with DatasetWriter(path, sync=False) as w:  # alone: they go; steps 6 to 8 written again
        w.write(
            SingleAgentEpisode(
                "x",
                observations=[6.0, 7.0, 8.0],
                actions=[0, 0],
                rewards=[1.0, 1.0],
                t_started=6,
                len_lookback_buffer=0,
            )
        )
    shards = relist_shards(path, sync=False)
    assert sum(s.relisted for s in shards) == 4
    kept = sorted((s.problem or "") for s in shards if not s.ok)
    assert kept == [
        f"its piece of episode 'x' (steps {a} to {a + 1}) has steps overlapping a listed "
        "piece (6 to 8)"
        for a in (6, 7)
    ]
    assert sorted((e.t_started, e.t) for e in read_episodes(path)) == [
        *((k, k + 1) for k in range(6)),
        (6, 8),
        *((k, k + 1) for k in range(8, 12)),
    ]
