"""Session 16 io fixes: a failed close() says what it did not store and releases the dataset;
"no permission" is DatasetIOError on every read path; a symlinked manifest is NotADatasetError
for the writer; datasets under non-UTF-8 directory names read back; a damaged v2 header is
damage, not "no dataset"."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetIOError,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnsafeDataError,
    dataset_info,
    load_episode,
    read_episodes,
    validate_dataset,
)
from episodes.io.shard_stream import ShardStream


def _ep(id_: str = "a") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


def _ids(path: Path | str) -> list[str]:
    return [e.id_ for e in read_episodes(path)]


def _full_disk(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The next ``times`` commits fail as on a full disk (in DatasetWriter._publish)."""
    real, calls = DatasetWriter._publish, []

    def publish(self, *args, **kwargs):
        calls.append(1)
        if len(calls) <= times:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DatasetWriter, "_publish", publish)
    return calls


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_failed_close_says_what_was_not_stored_and_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_format: str
) -> None:
    # A Python file's close: the first close raises (never a quiet success with episodes
    # unstored), the dataset is released, and a later close does nothing.
    path = tmp_path / "ds"
    w = DatasetWriter(path, data_format=data_format)
    w.write(_ep("a"))
    w.write(_ep("b"))
    _full_disk(monkeypatch, 1)
    with pytest.raises(DatasetIOError, match="2 buffered episodes were not stored") as info:
        w.close()
    assert isinstance(info.value, OSError) and "No space left" in str(info.value.__cause__)
    assert w.close() is None
    with pytest.raises(DatasetError, match="closed"):
        w.write(_ep("c"))
    with DatasetWriter(path) as other:  # not held by the failed writer
        other.write(_ep("d"))
    assert _ids(path) == ["d"]


def test_flush_keeps_the_episodes_for_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    w = DatasetWriter(path)
    w.write(_ep("a"))
    calls = _full_disk(monkeypatch, 2)
    for _ in range(2):
        with pytest.raises(OSError, match="No space left"):
            w.flush()
    assert len(calls) == 2
    w.write(_ep("b"))  # the writer is open and still takes episodes
    w.close()
    assert _ids(path) == ["a", "b"]


def test_with_block_ending_normally_on_a_full_disk_raises_and_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    _full_disk(monkeypatch, 1)
    with pytest.raises(DatasetIOError, match="1 buffered episodes"), DatasetWriter(path) as w:
        w.write(_ep("a"))
    assert _ids(path) == []
    assert w.close() is None
    with DatasetWriter(path) as other:
        other.write(_ep("b"))
    assert _ids(path) == ["b"]


def test_with_block_left_by_an_exception_still_drops_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    with pytest.raises(KeyError), DatasetWriter(path) as w:
        w.write(_ep("a"))
        raise KeyError("caller's error")
    assert _ids(path) == []
    with pytest.raises(DatasetError, match="closed"):
        w.write(_ep("b"))
    assert w.close() is None


def test_close_whose_episodes_are_lost_reports_it_and_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ds"
    w = DatasetWriter(path)
    w.write(_ep("a"))

    def fail(self, *args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ShardStream, "finish", fail)
    monkeypatch.setattr(ShardStream, "recover", fail)
    with pytest.raises(DatasetError, match="1 episodes written since the last commit are lost"):
        w.close()
    monkeypatch.undo()
    assert w.close() is None  # nothing left to retry: closed
    with pytest.raises(DatasetError, match="closed"):
        w.write(_ep("b"))
    with DatasetWriter(path) as other:  # the dataset is not held by the failed writer
        other.write(_ep("c"))
    assert _ids(path) == ["c"]


# ---------------------------------------------- 2. a failed look is DatasetIOError, not "none"
def _v2(path: Path) -> Path:
    with DatasetWriter(path) as w:
        w.write(_ep())
    return path


def _v1(path: Path) -> Path:
    with EpisodeWriter(path) as w:
        w.write(_ep())
    return path


def _data_file(path: Path) -> Path:
    return next((path / "shards").glob("*.arrow"))


def _chunk_dir(path: Path) -> Path:
    return next((path / "chunks").iterdir())


READERS = {
    "read_episodes": lambda p: list(read_episodes(p)),
    "dataset_info": dataset_info,
    "load_episode": lambda p: load_episode(p, "a"),
    "validate_dataset": validate_dataset,
}

# (name, dataset maker, the path whose stat fails, readers that reach it)
FAILED_LOOKS = [
    ("v2-format-json", _v2, lambda p: p / "format.json", list(READERS)),
    ("v2-data-file", _v2, _data_file, ["dataset_info"]),
    ("v1-format-json", _v1, lambda p: p / "format.json", list(READERS)),
    ("v1-chunk-dir", _v1, _chunk_dir, list(READERS)),
    ("v2-manifest-dataset", _v2, lambda p: p / "manifest.jsonl", ["Dataset"]),
    ("v2-root-dataset", _v2, lambda p: p, ["Dataset"]),
]


def _stat_fails(monkeypatch: pytest.MonkeyPatch, target: Path, code: int) -> None:
    real_stat, real_lstat = os.stat, os.lstat
    target_name = os.fspath(target)

    def failing(real):
        def stat(path, *args, **kwargs):
            if not isinstance(path, int) and os.fsdecode(path) == target_name:
                raise OSError(code, os.strerror(code), target_name)
            return real(path, *args, **kwargs)

        return stat

    monkeypatch.setattr(os, "stat", failing(real_stat))
    monkeypatch.setattr(os, "lstat", failing(real_lstat))


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO], ids=["EACCES", "EIO"])
@pytest.mark.parametrize(
    ("make", "where", "readers"),
    [pytest.param(m, w, r, id=n) for n, m, w, r in FAILED_LOOKS],
)
def test_failed_look_is_dataset_io_error_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make, where, readers, code: int
) -> None:
    path = make(tmp_path / "ds")
    target = where(path)
    calls = {**READERS, "Dataset": Dataset}
    _stat_fails(monkeypatch, target, code)
    for name in readers:
        with pytest.raises(DatasetIOError) as caught:
            calls[name](path)
        assert caught.value.errno == code, name
        assert target.name in str(caught.value), name


def test_missing_files_stay_what_they_were(tmp_path: Path) -> None:
    v2 = _v2(tmp_path / "v2")
    _data_file(v2).unlink()
    with pytest.raises(CorruptDatasetError, match="is missing"):
        dataset_info(v2)
    v1 = _v1(tmp_path / "v1")
    shutil.rmtree(_chunk_dir(v1))
    with pytest.raises(CorruptDatasetError, match="missing on disk"):
        list(read_episodes(v1))
    for gone in (tmp_path / "nothing", tmp_path / "nothing" / "below"):
        with pytest.raises(NotADatasetError):
            dataset_info(gone)
        with pytest.raises(NotADatasetError):
            Dataset(gone)


_NO_PERMISSION = r"""
import sys
from episodes.io import DatasetIOError, dataset_info, read_episodes
for path in sys.argv[1:]:
    for read in (dataset_info, lambda p: list(read_episodes(p))):
        try:
            read(path)
        except DatasetIOError as err:
            print("DatasetIOError", err.errno)
        except BaseException as err:
            print("other", type(err).__name__, err)
"""


def test_real_permission_denied_is_dataset_io_error(tmp_path: Path) -> None:
    v2, v1 = _v2(tmp_path / "v2"), _v1(tmp_path / "v1")
    locked = [v2 / "shards", v1 / "chunks", v2]  # listable, not searchable
    cmd = [sys.executable, "-c", _NO_PERMISSION, str(v2), str(v1)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permissions are not enforced")
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *cmd]
    for p in locked[:2]:
        os.chmod(p, 0o644)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        os.chmod(v2, 0o644)  # the root itself: format.json cannot even be looked at
        out2 = subprocess.run(cmd[:-1], capture_output=True, text=True, check=False, timeout=120)
    finally:
        for p in locked:
            os.chmod(p, 0o755)
    lines = out.stdout.split("\n")[:-1] + out2.stdout.split("\n")[:-1]
    if "setpriv" in cmd[0] and ("failed" in out.stderr or not lines):
        pytest.skip(f"setpriv cannot drop the capability here: {out.stderr.strip()}")
    assert lines == [f"DatasetIOError {errno.EACCES}"] * 6, (out.stdout, out.stderr, out2.stderr)


# --------------------------------------------------- 3. a symlinked manifest, for the writer
@pytest.mark.parametrize("what", ["manifest.jsonl", "shards"])
def test_writer_refuses_a_symlinked_manifest_or_shards_dir_as_not_a_dataset(
    tmp_path: Path, what: str
) -> None:
    path = _v2(tmp_path / "ds")
    real = tmp_path / f"{what}-real"
    os.rename(path / what, real)
    os.symlink(real, path / what)
    with pytest.raises(NotADatasetError, match="symlink"):
        DatasetWriter(path)
    if what == "manifest.jsonl":  # readers: a symlinked file is unsafe data
        with pytest.raises(UnsafeDataError, match="symlink"):
            list(read_episodes(path))
    assert os.path.islink(path / what) and real.exists()  # nothing was changed


# ----------------------------------------------- 4. directories named in no valid UTF-8
@pytest.mark.parametrize(
    ("data_format", "compression"), [("arrow", None), ("arrow", "zstd"), ("parquet", None)]
)
def test_dataset_under_a_non_utf8_directory_reads_back(
    tmp_path: Path, data_format: str, compression: str | None
) -> None:
    path = tmp_path / os.fsdecode(b"runs-\xff")
    with DatasetWriter(path, data_format=data_format, compression=compression) as w:
        w.write_many([_ep("a"), _ep("b")])
    assert _ids(path) == ["a", "b"]
    assert list(read_episodes(path, verify=True))[1] == _ep("b")
    assert validate_dataset(path).problems == []
    assert dataset_info(path).num_episodes == 2
    assert load_episode(path, "b") == _ep("b")
    assert Dataset(path).episode(0) == _ep("a")


# ---------------------------------------------------- 5. a damaged v2 header is damage
@pytest.mark.parametrize("shards", [0, 1], ids=["empty", "one-shard"])
def test_damaged_v2_header_is_corrupt_naming_the_manifest(tmp_path: Path, shards: int) -> None:
    path = tmp_path / "ds"
    with DatasetWriter(path) as w:
        if shards:
            w.write(_ep())
    with open(path / "manifest.jsonl", "r+b") as f:
        f.write(b"X")  # '{"format"...' -> 'X"format"...'
    calls = {**READERS, "Dataset": Dataset, "DatasetWriter": DatasetWriter}
    for name, call in calls.items():
        with pytest.raises(CorruptDatasetError, match="manifest.jsonl") as caught:
            call(path)
        assert not isinstance(caught.value, NotADatasetError), name


def test_v1_without_format_json_is_still_not_a_dataset(tmp_path: Path) -> None:
    path = _v1(tmp_path / "ds")
    (path / "format.json").unlink()
    with pytest.raises(NotADatasetError, match="no format v2 manifest.jsonl, no v1 format.json"):
        dataset_info(path)
