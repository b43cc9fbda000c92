"""What foreign readers (pyarrow, Polars, DuckDB) of a v2 dataset's ``shards/`` find there.

- A data file being written was named ``.tmp-NAME.arrow``: Polars' and DuckDB's globs
  (``shards/*.arrow``) match dot files, so they read a shard in progress (an invalid footer)
  or a killed writer's leftover (its rows twice). Temporary files now end in ``.part``, and
  the clean-up still removes those of the old naming.
- Files no manifest line lists (an interrupted commit's shard) are noted by
  ``validate_dataset``; ``data_files`` gives the files the manifest lists.
- ``merge``, ``split`` and ``filter_dataset`` wrote uncompressed Arrow whatever the sources
  were; they now keep the sources' data format and compression, or take them as arguments.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

import episodes.io.shard_writer as shard_writer
from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnsupportedVersionError,
    data_files,
    filter_dataset,
    merge,
    read_episodes,
    split,
    validate_dataset,
)


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"ep-{i}",
        observations=[0.0, 0.5, 1.0],
        actions=[1, 0],
        rewards=[1.0, float(i)],
        terminated=True,
        len_lookback_buffer=0,
    )


def _listed(path: Path) -> set[str]:
    return {f.name for f in data_files(path)}


def _glob_matches(path: Path, pattern: str) -> list[str]:
    """What ``shards/PATTERN`` matches in Polars or DuckDB: dot files too (unlike Python's)."""
    return sorted(fnmatch.filter(os.listdir(path / "shards"), pattern))


# --------------------------------------------------------------------- 1. temporary names
@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_no_data_glob_matches_a_shard_being_written(
    tmp_path: Path, data_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    publish = shard_writer.publish_shard

    def looking(*args: Any, **kwargs: Any) -> Any:  # the data file is written, not renamed
        seen.append(_glob_matches(tmp_path, f"*.{data_format}"))
        return publish(*args, **kwargs)

    monkeypatch.setattr(shard_writer, "publish_shard", looking)
    with DatasetWriter(tmp_path, data_format=data_format, sync=False) as w:
        w.write(_episode(0))
        w.flush()
        w.write(_episode(1))
        open_shard = _glob_matches(tmp_path, f"*.{data_format}")  # an Arrow one is streamed
        assert set(open_shard) == _listed(tmp_path), open_shard
        w.flush()
    assert len(seen) == 2
    assert all(not name.startswith(".") for names in seen for name in names), seen
    assert _glob_matches(tmp_path, f"*.{data_format}") == sorted(_listed(tmp_path))


@pytest.mark.parametrize(
    "leftover",
    [".tmp-0123456789abcdef.arrow", ".tmp-0123456789abcdef.parquet", ".tmp-0123456789abcdef.json"]
    + [".tmp-0123456789abcdef.arrow.part", ".tmp-0123456789abcdef.parquet.part"],
    ids=["old arrow", "old parquet", "index", "arrow", "parquet"],
)
def test_a_writer_alone_removes_temporary_files_of_either_naming(
    tmp_path: Path, leftover: str
) -> None:
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write(_episode(0))
    (tmp_path / "shards" / leftover).write_bytes(b"left by a writer that died")
    DatasetWriter(tmp_path, sync=False).close()
    assert not (tmp_path / "shards" / leftover).exists()
    assert [e.id_ for e in read_episodes(tmp_path)] == ["ep-0"]


# ---------------------------------------------------------- 2. unlisted files, data_files
def _interrupted_commit(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit interrupted after its files took their final names, before its line."""
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode(0))
    w = DatasetWriter(path, sync=False)
    w.write(_episode(1))
    with monkeypatch.context() as m:
        m.setattr(shard_writer, "append_line", _raise_interrupt)
        with pytest.raises(KeyboardInterrupt):
            w.flush()
    w.flush()  # as documented: the episode stays buffered, and is committed now
    w.write(_episode(2))  # and an Arrow shard still being written
    w.close()


def _raise_interrupt(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


def _leftover_temp(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode(0))
    (path / "shards" / ".tmp-0123456789abcdef.arrow").write_bytes(b"a killed writer's")


def _user_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with DatasetWriter(path, sync=False) as w:
        w.write(_episode(0))
    (path / "shards" / "notes.arrow").write_bytes(b"not ours")


@pytest.mark.parametrize(
    ("make", "pattern", "words"),
    [
        (_interrupted_commit, "*.arrow", "interrupted commit"),
        (_leftover_temp, ".tmp-*", "temporary file"),
        (_user_file, "notes.arrow", "not a file of the dataset"),
    ],
    ids=["interrupted commit", "old temporary name", "other file"],
)
def test_validate_notes_files_no_manifest_line_lists(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path, pytest.MonkeyPatch], None],
    pattern: str,
    words: str,
) -> None:
    make(tmp_path, monkeypatch)
    unlisted = [n for n in _glob_matches(tmp_path, pattern) if n not in _listed(tmp_path)]
    assert len(unlisted) == 1, os.listdir(tmp_path / "shards")
    report = validate_dataset(tmp_path)
    assert report.ok and report.problems == []  # a note, no failure
    notes = [n for n in report.notes if n.startswith(f"shards/{unlisted[0]}:")]
    assert len(notes) == 1 and words in notes[0], report.notes


def test_validate_notes_nothing_in_a_clean_dataset(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write_many([_episode(0), _episode(1)])
    assert validate_dataset(tmp_path).notes == []


def test_data_files_leave_out_an_interrupted_commits_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupted_commit(tmp_path, monkeypatch)
    files = data_files(tmp_path)
    ids = [
        i
        for f in files
        for i in pyarrow.ipc.open_file(f).read_all().column("episode_id").to_pylist()
    ]
    assert sorted(set(ids)) == ["ep-0", "ep-1", "ep-2"]
    assert len(ids) == 3 * 3  # each episode's 3 rows once; a glob reads ep-1's twice
    assert len(_glob_matches(tmp_path, "*.arrow")) == len(files) + 1


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda p: EpisodeWriter(p).close(), UnsupportedVersionError),
        (lambda p: None, NotADatasetError),
        (lambda p: p.mkdir(), NotADatasetError),
    ],
    ids=["v1", "missing", "empty directory"],
)
def test_data_files_refuse_what_has_no_shards(
    tmp_path: Path, make: Callable[[Path], None], error: type[Exception]
) -> None:
    make(tmp_path / "d")
    with pytest.raises(error):
        data_files(tmp_path / "d")


# ----------------------------------------------------------- 5. copies keep the storage
def _source(path: Path, data_format: str, compression: str | None, ids: range) -> Path:
    with DatasetWriter(path, data_format=data_format, compression=compression, sync=False) as w:
        w.write_many([_episode(i) for i in ids])
    return path


def _storage(path: Path) -> set[tuple[str, str | None]]:
    """Each shard's (format, compression), from its index and its data file."""
    found = set()
    for f in data_files(path):
        index = json.loads(f.with_suffix(".json").read_text())
        fmt, comp = index["data"]["format"], index["data"]["compression"]
        if fmt == "parquet":  # the file says so too
            meta = pq.ParquetFile(f).metadata
            codecs = {meta.row_group(0).column(c).compression for c in range(meta.num_columns)}
            assert codecs == {"ZSTD" if comp == "zstd" else "UNCOMPRESSED"}
        found.add((fmt, comp))
    return found


def _merge(src: list[Path], dst: Path, **kw: Any) -> list[Path]:
    merge(src, dst, **kw)
    return [dst]


def _split(src: list[Path], dst: Path, **kw: Any) -> list[Path]:
    split(src[0], dst / "train", dst / "val", fraction=0.5, seed=1, **kw)
    return [dst / "train", dst / "val"]


def _filter(src: list[Path], dst: Path, **kw: Any) -> list[Path]:
    filter_dataset(src[0], dst, min_return=-1.0, **kw)
    return [dst]


COPIES = [_merge, _split, _filter]
COPY_IDS = ["merge", "split", "filter"]


@pytest.mark.parametrize(
    ("data_format", "compression"),
    [("parquet", "zstd"), ("parquet", None), ("arrow", "zstd")],
    ids=["parquet zstd", "parquet", "arrow zstd"],
)
@pytest.mark.parametrize("copy", COPIES, ids=COPY_IDS)
def test_copies_keep_the_sources_format_and_compression(
    tmp_path: Path, copy: Callable[..., list[Path]], data_format: str, compression: str | None
) -> None:
    src = _source(tmp_path / "src", data_format, compression, range(8))
    outs = copy([src], tmp_path / "out")
    assert set.union(*(_storage(out) for out in outs)) == {(data_format, compression)}
    copied = sorted((e for out in outs for e in read_episodes(out)), key=lambda e: e.id_)
    assert copied == list(read_episodes(src))  # the round trip is exact


@pytest.mark.parametrize("copy", COPIES, ids=COPY_IDS)
def test_copies_take_a_format_and_compression_given(
    tmp_path: Path, copy: Callable[..., list[Path]]
) -> None:
    src = _source(tmp_path / "src", "parquet", "zstd", range(8))
    outs = copy([src], tmp_path / "out", data_format="arrow", compression=None)
    assert set.union(*(_storage(out) for out in outs)) == {("arrow", None)}
    outs = copy([src], tmp_path / "out2", compression=None)  # the format still the source's
    assert set.union(*(_storage(out) for out in outs)) == {("parquet", None)}


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (("arrow", "zstd"), ("arrow", "zstd"), ("arrow", "zstd")),
        (("parquet", "zstd"), ("parquet", "zstd"), ("parquet", "zstd")),
        (("parquet", "zstd"), ("arrow", "zstd"), ("arrow", "zstd")),
        (("parquet", "zstd"), ("parquet", None), ("parquet", None)),
        (("parquet", "zstd"), ("arrow", None), ("arrow", None)),
        (("parquet", "zstd"), ("v1", None), ("arrow", None)),
        (("parquet", "zstd"), ("empty", None), ("parquet", "zstd")),
    ],
    ids=["arrow zstd", "parquet zstd", "formats differ", "compressions differ", "both differ"]
    + ["a v1 source", "a source without shards"],
)
def test_merge_keeps_what_its_sources_agree_on(
    tmp_path: Path,
    first: tuple[str, str | None],
    second: tuple[str, str | None],
    expected: tuple[str, str | None],
) -> None:
    a = _source(tmp_path / "a", *first, range(3))
    b = tmp_path / "b"
    if second[0] == "v1":
        with EpisodeWriter(b) as w:
            w.write_many([_episode(i) for i in range(3, 6)])
    elif second[0] == "empty":
        DatasetWriter(b, sync=False).close()
    else:
        _source(b, *second, range(3, 6))
    merge([a, b], tmp_path / "out")
    assert _storage(tmp_path / "out") == {expected}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"data_format": "feather"}, "data_format must be"),
        ({"data_format": None}, "data_format must be"),
        ({"compression": "gzip"}, "compression must be"),
        ({"compression": "none"}, "compression must be"),
    ],
    ids=["unknown format", "format None", "unknown compression", "compression text none"],
)
@pytest.mark.parametrize("copy", COPIES, ids=COPY_IDS)
def test_copies_refuse_a_bad_format_or_compression_before_writing(
    tmp_path: Path, copy: Callable[..., list[Path]], kwargs: dict[str, Any], words: str
) -> None:
    src = _source(tmp_path / "src", "arrow", None, range(2))
    with pytest.raises(ValueError, match=words):
        copy([src], tmp_path / "out", **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
