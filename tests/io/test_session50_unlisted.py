"""Unlisted shard files: quarantined by a lone writer (never deleted), listed again by relist.

A manifest that lost lines leaves committed shards that no line lists. A writer that opens
such a dataset alone used to delete them; it now moves them to ``unlisted/shards/``, and
``relist_shards`` (``episodes relist``) checks and lists them again.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    DatasetLockedError,
    DatasetWriter,
    UnsafeDataError,
    discard_unlisted,
    read_episodes,
    relist_shards,
    shard_writer,
    validate_dataset,
)

QUARANTINE = Path("unlisted") / "shards"


def _episode(id_: str, steps: int = 2, start: float = 0.0) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[start + i for i in range(steps + 1)],
        actions=[i % 2 for i in range(steps)],
        rewards=[0.5 * (i + 1) for i in range(steps)],
        len_lookback_buffer=0,
    )


def _write(path: Path, ids: list[str], data_format: str = "arrow") -> None:
    with DatasetWriter(path, shard_bytes=1, sync=False, data_format=data_format) as w:
        for i, id_ in enumerate(ids):
            w.write(_episode(id_, steps=1 + i % 3, start=float(i)))


def _cut_manifest(path: Path, keep: int) -> None:
    """Keeps the manifest's first ``keep`` lines (the header is the first)."""
    manifest = path / "manifest.jsonl"
    lines = manifest.read_bytes().splitlines(keepends=True)
    manifest.write_bytes(b"".join(lines[:keep]))


def _files(path: Path) -> dict[str, bytes]:
    """Every file under ``path``, by relative name, with its bytes."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _shard_bytes(files: dict[str, bytes]) -> list[bytes]:
    """The contents of every shard file (.arrow/.parquet/.json), wherever it lies."""
    return sorted(b for name, b in files.items() if name.endswith((".arrow", ".parquet", ".json")))


def _shard_lines(path: Path) -> list[str]:
    """The manifest's shard lines without their chain and seal, sorted."""
    lines = []
    for line in (path / "manifest.jsonl").read_bytes().splitlines()[1:]:
        obj = json.loads(line)
        del obj["prev"], obj["crc32"]
        lines.append(json.dumps(obj, sort_keys=True))
    return sorted(lines)


def _by_piece(episodes: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    return sorted(episodes, key=lambda e: (e.id_, e.t_started))


# ------------------------------------------------------------------ lost lines come back
@pytest.mark.parametrize(
    ("keep", "data_format"),
    [(1, "arrow"), (2, "arrow"), (4, "arrow"), (3, "parquet")],
    ids=["header only", "one line", "three lines", "parquet"],
)
def test_a_lone_writer_quarantines_lost_shards_and_relist_brings_them_back(
    tmp_path: Path, keep: int, data_format: str
) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b", "c", "d", "e"], data_format)
    before = _by_piece(list(read_episodes(path)))
    shard_files = _shard_bytes(_files(path))
    lines = _shard_lines(path)
    _cut_manifest(path, keep)
    assert len(list(read_episodes(path))) == keep - 1

    DatasetWriter(path, sync=False).close()  # opens alone

    # No committed shard file was deleted: each moved, bytes unchanged.
    assert _shard_bytes(_files(path)) == shard_files
    assert len(os.listdir(path / QUARANTINE)) == 2 * (5 - (keep - 1))
    notes = validate_dataset(path).notes
    assert any("unlisted/shards/ holds" in n and "episodes relist" in n for n in notes)

    shards = relist_shards(path, sync=False)
    assert [s.ok and s.relisted and s.place == "unlisted/shards" for s in shards] == [True] * (
        6 - keep
    )
    after = _by_piece(list(read_episodes(path)))
    assert after == before
    assert _shard_lines(path) == lines  # the writer's lines again, returns and all
    assert [list(e.get_rewards()) for e in after] == [list(e.get_rewards()) for e in before]
    assert _shard_bytes(_files(path)) == shard_files
    assert os.listdir(path / QUARANTINE) == []
    report = validate_dataset(path)
    assert report.ok and report.notes == [], (report.problems, report.notes)


def test_an_episode_split_over_lost_shards_loads_whole_again(tmp_path: Path) -> None:
    from episodes.io import load_episode

    path = tmp_path / "d"
    whole = _episode("a", steps=4)
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        w.write(whole[:2])
        w.write(whole[2:])  # a second piece of "a", in its own shard
        w.write(_episode("b"))
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    assert [s.ok for s in relist_shards(path, sync=False)] == [True, True]
    assert validate_dataset(path).ok
    assert list(load_episode(path, "a").get_rewards()) == list(whole.get_rewards())


def test_relist_takes_complete_shards_still_unlisted_in_shards_dir(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)  # no writer opened since: b's files are still in shards/
    (shard,) = relist_shards(path, sync=False)
    assert (shard.place, shard.ok, shard.relisted, shard.pieces) == ("shards", True, True, 1)
    assert sorted(e.id_ for e in read_episodes(path)) == ["a", "b"]


# ------------------------------------------------------------- what the lone writer does
def _interrupted_commit(path: Path, monkeypatch: pytest.MonkeyPatch, retry: bool) -> None:
    """A commit interrupted after its renames, before its line (retried or not)."""
    _write(path, ["a"])
    w = DatasetWriter(path, sync=False)
    w.write(_episode("b"))

    def interrupt(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(shard_writer, "append_line", interrupt)
        with pytest.raises(KeyboardInterrupt):
            w.flush()
    if not retry:
        w._drop_pending()  # as a process killed there: nothing retried
    w.close()


@pytest.mark.parametrize(
    ("retry", "relisted", "ids"),
    [(False, True, ["a", "b"]), (True, False, ["a", "b"])],
    ids=["killed (not retried): relisted", "retried: a duplicate, refused"],
)
def test_a_killed_commits_shard_is_quarantined_then_relisted_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retry: bool, relisted: bool, ids: list[str]
) -> None:
    path = tmp_path / "d"
    _interrupted_commit(path, monkeypatch, retry)
    unlisted = validate_dataset(path).notes
    assert len(unlisted) == 2 and all("interrupted commit" in n for n in unlisted)
    DatasetWriter(path, sync=False).close()
    assert len(os.listdir(path / QUARANTINE)) == 2
    (shard,) = relist_shards(path, sync=False)
    assert shard.relisted is relisted
    if not relisted:
        assert "the same steps as a listed piece" in (shard.problem or "")
        assert len(os.listdir(path / QUARANTINE)) == 2  # refused: it stays
    assert sorted(e.id_ for e in read_episodes(path)) == ids
    assert validate_dataset(path).ok


@pytest.mark.parametrize(
    "leftover",
    [
        "shards/.tmp-0123456789abcdef.arrow.part",
        "shards/.tmp-0123456789abcdef.parquet.part",
        "shards/.tmp-0123456789abcdef.arrow",
        "shards/.tmp-0123456789abcdef.json",
        ".tmp-manifest.jsonl",
    ],
)
def test_partial_temporary_files_are_still_removed(tmp_path: Path, leftover: str) -> None:
    path = tmp_path / "d"
    _write(path, ["a"])
    (path / leftover).write_bytes(b"left by a writer that died")
    DatasetWriter(path, sync=False).close()
    assert not (path / leftover).exists()
    assert not (path / "unlisted").exists()  # nothing to quarantine: no directory made


def test_a_torn_manifest_tail_is_still_cut(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a"])
    whole = (path / "manifest.jsonl").read_bytes()
    with open(path / "manifest.jsonl", "ab") as f:
        f.write(b'{"v": 2, "shard": "01234')
    DatasetWriter(path, sync=False).close()
    assert (path / "manifest.jsonl").read_bytes() == whole


def test_a_file_in_quarantine_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)
    (name,) = [p.name for p in (path / "shards").glob("*.arrow") if "b" in _ids_of(path, p)]
    (path / QUARANTINE).mkdir(parents=True)
    (path / QUARANTINE / name).write_bytes(b"quarantined before")
    held = (path / "shards" / name).read_bytes()
    DatasetWriter(path, sync=False).close()
    assert (path / QUARANTINE / name).read_bytes() == b"quarantined before"
    assert (path / "shards" / name).read_bytes() == held  # kept where it was: both kept
    # Relist refuses the damaged quarantined one and lists the one in shards/.
    by_place = {s.place: s for s in relist_shards(path, sync=False)}
    assert by_place["shards"].relisted and not by_place["unlisted/shards"].ok
    assert sorted(e.id_ for e in read_episodes(path)) == ["a", "b"]


def _ids_of(path: Path, data_file: Path) -> list[str]:
    import pyarrow.ipc

    return pyarrow.ipc.open_file(data_file).read_all().column("episode_id").to_pylist()


def test_a_writer_that_is_not_alone_moves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    first = DatasetWriter(path, sync=False)  # holds the dataset: the next one is not alone
    try:
        _cut_manifest(path, 2)
        before = _files(path)
        DatasetWriter(path, sync=False).close()
        assert _files(path) == before and not (path / "unlisted").exists()
    finally:
        first.close()


# ------------------------------------------------------------------- quarantine unsafe
def _symlink(path: Path, outside: Path) -> None:
    (path / "unlisted").symlink_to(outside, target_is_directory=True)


def _inner_symlink(path: Path, outside: Path) -> None:
    (path / "unlisted").mkdir()
    (path / QUARANTINE).symlink_to(outside, target_is_directory=True)


def _file(path: Path, outside: Path) -> None:
    (path / "unlisted").write_bytes(b"a user's file")


@pytest.mark.parametrize("make", [_symlink, _inner_symlink, _file])
def test_an_unsafe_quarantine_is_never_followed_and_nothing_is_deleted(
    tmp_path: Path, make: Any
) -> None:
    path, outside = tmp_path / "d", tmp_path / "outside"
    outside.mkdir()
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)
    make(path, outside)
    before = sorted(os.listdir(path / "shards"))
    DatasetWriter(path, sync=False).close()
    assert sorted(os.listdir(path / "shards")) == before  # left unlisted, not deleted
    assert os.listdir(outside) == []
    report = validate_dataset(path)
    assert report.ok and "symlink or not a directory" in report.notes[0]
    with pytest.raises(UnsafeDataError, match="symlink or not a directory"):
        relist_shards(path, sync=False)
    with pytest.raises(UnsafeDataError):
        discard_unlisted(path)
    assert os.listdir(outside) == []


# ---------------------------------------------------------------------- relist refuses
def _flip_data_byte(path: Path) -> None:
    (data,) = (path / QUARANTINE).glob("*.arrow")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))


def _cut_index(path: Path) -> None:
    (index,) = (path / QUARANTINE).glob("*.json")
    index.write_bytes(index.read_bytes()[:-5])


def _remove_index(path: Path) -> None:
    (index,) = (path / QUARANTINE).glob("*.json")
    index.unlink()


def _same_piece_again(path: Path) -> None:
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode("b", steps=2, start=1.0))


def _overlapping_piece(path: Path) -> None:
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode("b", steps=5))


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (_flip_data_byte, "CRC-32 mismatch"),
        (_cut_index, "not valid JSON"),
        (_remove_index, "no index file"),
        (_same_piece_again, "the same steps as a listed piece"),
        (_overlapping_piece, "steps overlapping a listed piece"),
    ],
    ids=["data byte", "cut index", "no index", "duplicate", "overlap"],
)
def test_relist_refuses_and_keeps_a_bad_shard(tmp_path: Path, damage: Any, words: str) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])  # b: 2 steps from t=0
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    damage(path)
    manifest, quarantined = (path / "manifest.jsonl").read_bytes(), _files(path / QUARANTINE)
    (shard,) = relist_shards(path, sync=False)
    assert not shard.ok and not shard.relisted and words in (shard.problem or ""), shard
    assert (path / "manifest.jsonl").read_bytes() == manifest
    assert _files(path / QUARANTINE) == quarantined
    assert validate_dataset(path).ok


def test_relist_lists_a_piece_that_follows_a_listed_piece_of_its_id(tmp_path: Path) -> None:
    path = tmp_path / "d"
    whole = _episode("b", steps=4)
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        w.write_many([_episode("a"), whole[:2], whole[2:]])
    _cut_manifest(path, 3)  # b's steps 0..2 listed; 2..4 lost: adjacent, no overlap
    DatasetWriter(path, sync=False).close()
    (shard,) = relist_shards(path, sync=False)
    assert shard.relisted and (shard.pieces, shard.steps) == (1, 2)
    assert validate_dataset(path).ok


@pytest.mark.parametrize("call", [relist_shards, discard_unlisted])
def test_relist_and_discard_refuse_while_a_writer_is_open(tmp_path: Path, call: Any) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    before = _files(path)
    with DatasetWriter(path, sync=False):
        with pytest.raises(DatasetLockedError, match="a writer has the dataset open"):
            call(path)
    assert _files(path) == before


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b", "c"])
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    with open(path / "manifest.jsonl", "ab") as f:
        f.write(b'{"torn')  # not even a torn tail is cut
    before = _files(path)
    shards = relist_shards(path, dry_run=True)
    assert [(s.ok, s.relisted) for s in shards] == [(True, False)] * 2
    assert discard_unlisted(path, dry_run=True) == sorted(os.listdir(path / QUARANTINE))
    assert _files(path) == before


def test_discard_removes_the_quarantine(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    names = sorted(os.listdir(path / QUARANTINE))
    assert len(names) == 2 and discard_unlisted(path) == names
    assert not (path / "unlisted").exists()
    assert relist_shards(path) == [] and validate_dataset(path).notes == []
    assert [e.id_ for e in read_episodes(path)] == ["a"]


@pytest.mark.parametrize(("argument", "value"), [("dry_run", "yes"), ("sync", None)])
def test_relist_refuses_a_flag_that_is_no_bool(tmp_path: Path, argument: str, value: Any) -> None:
    path = tmp_path / "d"
    _write(path, ["a"])
    with pytest.raises(TypeError, match=argument):
        relist_shards(path, **{argument: value})


# ------------------------------------------------------------------------------- the CLI
def test_cli_relist_dry_run_relist_and_discard(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b", "c"])
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    assert main(["validate", str(path)]) == 0
    assert "`episodes relist DIR` lists the good ones again" in capsys.readouterr().out

    assert main(["relist", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("would relist shard ") == 2 and "would relist 2 of 2" in out
    assert main(["relist", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("relisted shard ") == 2 and out.endswith("relisted 2 of 2 unlisted shards\n")
    assert main(["relist", str(path)]) == 0
    assert "nothing to relist" in capsys.readouterr().out


def test_cli_relist_exits_1_for_a_refused_shard_and_discards_it(
    tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "d"
    _write(path, ["a", "b"])
    _cut_manifest(path, 2)
    DatasetWriter(path, sync=False).close()
    _flip_data_byte(path)
    assert main(["relist", str(path)]) == 1
    captured = capsys.readouterr()
    assert "kept shard " in captured.err and "CRC-32 mismatch" in captured.err
    assert main(["relist", "--discard", str(path)]) == 0
    assert "removed 2 files of unlisted/shards/" in capsys.readouterr().out
    assert not (path / "unlisted").exists()


def test_cli_relist_refuses_while_a_writer_is_open(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "d"
    _write(path, ["a"])
    with DatasetWriter(path, sync=False):
        assert main(["relist", str(path)]) == 1
    assert "a writer has the dataset open" in capsys.readouterr().err


# ------------------------------------------------------------------------------ property
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shards=st.integers(1, 5), data=st.data(), lone_writer=st.booleans())
def test_any_cut_manifest_is_restored_by_relist(shards: int, data: Any, lone_writer: bool) -> None:
    keep = data.draw(st.integers(1, shards + 1), label="lines kept")
    root = Path(tempfile.mkdtemp())
    try:
        path = root / "d"
        _write(path, [f"e{i}" for i in range(shards)])
        before = _by_piece(list(read_episodes(path)))
        _cut_manifest(path, keep)
        if lone_writer:
            DatasetWriter(path, sync=False).close()
        relisted = relist_shards(path, sync=False)
        assert len(relisted) == shards - (keep - 1) and all(s.relisted for s in relisted)
        assert _by_piece(list(read_episodes(path))) == before
        assert validate_dataset(path).ok
    finally:
        shutil.rmtree(root)


# ------------------------------------------------------- every reader ignores unlisted/
def test_readers_and_copies_read_only_what_the_manifest_lists(tmp_path: Path) -> None:
    from episodes.io import Dataset, data_files, dataset_info, filter_dataset, merge, split
    from episodes.replay import EpisodeReplayBuffer

    path = tmp_path / "d"
    _write(path, ["a", "b", "c"])
    _cut_manifest(path, 3)
    DatasetWriter(path, sync=False).close()
    assert len(os.listdir(path / QUARANTINE)) == 2  # c's files
    assert [row.id_ for row in Dataset(path).summaries] == ["a", "b"]
    assert dataset_info(path).num_episodes == 2 and len(data_files(path)) == 2
    assert EpisodeReplayBuffer.from_dataset(path).get_num_episodes() == 2
    # A copy that replaces its source would lose the quarantined shards: each tool says so.
    words = rf"{path} holds 2 files in unlisted/shards/ .*: they are not copied .*episodes relist"
    with pytest.warns(UserWarning, match=words):
        merge([path], tmp_path / "m")
    with pytest.warns(UserWarning, match=words):
        split(path, tmp_path / "t", tmp_path / "v", fraction=0.5)
    with pytest.warns(UserWarning, match=words):
        filter_dataset(path, tmp_path / "f")
    for copy in ("m", "f"):
        assert sorted(e.id_ for e in read_episodes(tmp_path / copy)) == ["a", "b"]
        assert not (tmp_path / copy / "unlisted").exists()
    split_ids = [e.id_ for d in ("t", "v") for e in read_episodes(tmp_path / d)]
    assert sorted(split_ids) == ["a", "b"]


def test_minari_export_ignores_the_quarantine(tmp_path: Path) -> None:
    pytest.importorskip("minari")
    import gymnasium as gym

    from episodes.io import export_minari

    path = tmp_path / "d"
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        for id_ in "abc":
            w.write(
                SingleAgentEpisode(
                    id_,
                    observations=[0, 1, 2],
                    actions=[1, 0],
                    rewards=[1.0, 1.0],
                    terminated=True,
                    observation_space=gym.spaces.Discrete(5),
                    action_space=gym.spaces.Discrete(2),
                    len_lookback_buffer=0,
                )
            )
    _cut_manifest(path, 3)
    DatasetWriter(path, sync=False).close()
    assert export_minari(path, "toy/quarantine-v0", root=tmp_path / "minari") == 2


def test_a_copy_of_a_dataset_without_a_quarantine_warns_of_nothing(tmp_path: Path) -> None:
    import warnings

    from episodes.io import merge

    path = tmp_path / "d"
    _write(path, ["a", "b"])
    DatasetWriter(path, sync=False).close()  # alone, nothing unlisted: no quarantine made
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merge([path], tmp_path / "m")
    assert sorted(e.id_ for e in read_episodes(tmp_path / "m")) == ["a", "b"]
