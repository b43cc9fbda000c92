"""What the disk format needs from the system, refused clearly where it is missing.

``episodes.io`` runs on POSIX systems only: elsewhere (no ``fcntl``) importing it is an
``ImportError`` that says so. A filesystem without hard links (FAT, exFAT) cannot hold a new
v2 dataset, one without file locks (Lustre mounted ``noflock``) no writer at all: both are a
``DatasetIOError`` saying what the filesystem lacks, and nothing is left behind. A v2 dataset
written on a machine of the other byte order is refused as such, not called damaged.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetIOError,
    DatasetLockedError,
    DatasetWriter,
    EpisodeWriter,
    UnsupportedVersionError,
    arrow_leaves,
    load_episode,
    migrate,
    read_episodes,
    validate_dataset,
)
from episodes.io.arrow_leaves import check_leaf_info
from episodes.io.manifest_lines import seal_lines, unseal_line

NATIVE = "<" if sys.byteorder == "little" else ">"
OTHER = ">" if NATIVE == "<" else "<"
ENDIAN = {"<": "little", ">": "big"}


def episode(i: int = 0) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=np.arange(6, dtype=np.float32).reshape(3, 2) + i,
        actions=[1, 2],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
    )


def v2_dataset(root: Path, count: int = 2) -> Path:
    with DatasetWriter(root) as writer:
        writer.write_many(episode(i) for i in range(count))
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with a file's bytes (None for a directory)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in root.rglob("*")
    }


# ------------------------------------------------------------------------- not on Windows
def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


NO_FCNTL = "import sys; sys.modules['fcntl'] = None\n"


@pytest.mark.parametrize("module", ["episodes.io", "episodes.io.writer", "episodes.io.errors"])
def test_without_fcntl_import_says_posix_is_needed(module):
    code = NO_FCNTL + (
        "import episodes  # the package itself still imports\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as err:\n"
        "    print(type(err).__name__, '|', err, '|', type(err.__cause__).__name__)\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    kind, message, cause = done.stdout.strip().split(" | ")
    assert kind == "ImportError"  # not a bare ModuleNotFoundError for fcntl
    assert cause == "ModuleNotFoundError"
    for words in ("POSIX", "Linux or macOS", "file locks", "hard links", "fsync"):
        assert words in message


def test_without_fcntl_the_rest_of_the_package_imports():
    done = run_python(NO_FCNTL + "import episodes; print(episodes.SingleAgentEpisode.__name__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SingleAgentEpisode"


# ---------------------------------------------------------------------- no hard links
NO_LINK_ERRNOS = sorted({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})


def failing_link(monkeypatch, code: int, when=lambda dst: True) -> None:
    real = os.link

    def link(src, dst, *args, **kwargs):
        if when(Path(dst)):
            raise OSError(code, os.strerror(code), str(src), None, str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize("code", NO_LINK_ERRNOS, ids=errno.errorcode.get)
def test_new_v2_dataset_without_hard_links_is_refused_leaving_nothing(tmp_path, monkeypatch, code):
    root = tmp_path / "ds"
    failing_link(monkeypatch, code)
    with pytest.raises(DatasetIOError) as caught:
        DatasetWriter(root)
    err = caught.value
    assert err.errno == code
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == code
    message = str(err)
    assert str(root) in message
    assert "does not support hard links" in message
    assert "atomically" in message and "format v1" in message
    assert os.listdir(root) == []  # no temporary manifest, no shards/
    monkeypatch.undo()
    with EpisodeWriter(root) as writer:  # format v1 needs no links: the directory takes it
        writer.write(episode())
    assert [ep.id_ for ep in read_episodes(root)] == ["e0"]


@pytest.mark.parametrize(
    "code, raised",
    [(errno.EACCES, PermissionError), (errno.EIO, OSError), (errno.ENOSPC, OSError)],
    ids=["EACCES", "EIO", "ENOSPC"],
)
def test_other_link_failures_stay_what_they_were(tmp_path, monkeypatch, code, raised):
    failing_link(monkeypatch, code)
    with pytest.raises(raised) as caught:
        DatasetWriter(tmp_path)
    assert caught.value.errno == code
    assert not isinstance(caught.value, DatasetIOError)
    assert os.listdir(tmp_path) == []


def test_a_manifest_another_writer_linked_first_still_stands(tmp_path, monkeypatch):
    real = os.link

    def link(src, dst, *args, **kwargs):  # another writer wins the race: EEXIST
        real(src, dst, *args, **kwargs)
        raise FileExistsError(errno.EEXIST, "File exists")

    monkeypatch.setattr(os, "link", link)
    with DatasetWriter(tmp_path) as writer:
        writer.write(episode())
    monkeypatch.undo()
    assert [ep.id_ for ep in read_episodes(tmp_path)] == ["e0"]
    assert sorted(os.listdir(tmp_path)) == ["manifest.jsonl", "shards"]


@pytest.mark.parametrize("code", [errno.EPERM, errno.ENOTSUP], ids=errno.errorcode.get)
def test_copy_into_an_empty_directory_without_hard_links(tmp_path, monkeypatch, code):
    src, dst = v2_dataset(tmp_path / "src"), tmp_path / "dst"
    dst.mkdir()
    # Only the final step fails: the manifest linked from the staged copy into ``dst``.
    failing_link(monkeypatch, code, when=lambda target: target.parent == dst)
    with pytest.raises(DatasetIOError, match="does not support hard links") as caught:
        migrate(src, dst)
    assert caught.value.errno == code and str(dst) in str(caught.value)
    assert os.listdir(dst) == []  # what was moved in went back, and the staged copy went
    assert sorted(os.listdir(tmp_path)) == ["dst", "src"]


# ---------------------------------------------------------------------- no file locks
NO_LOCK_ERRNOS = [errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL]
WRITERS = {
    "EpisodeWriter": EpisodeWriter,
    "DatasetWriter": DatasetWriter,
    "DatasetWriter(clean=False)": lambda path: DatasetWriter(path, clean=False),
}


def failing_flock(monkeypatch, code: int, only_nonblocking: bool = False) -> list[int]:
    real, calls = fcntl.flock, []

    def flock(fd, operation):
        calls.append(operation)
        if operation != fcntl.LOCK_UN and (operation & fcntl.LOCK_NB or not only_nonblocking):
            raise OSError(code, os.strerror(code))
        return real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    return calls


def check_no_locks(err: DatasetIOError, code: int, root: Path) -> None:
    assert err.errno == code
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == code
    assert str(root) in str(err)
    assert "does not support file locks" in str(err)
    assert "another writer" not in str(err)


@pytest.mark.parametrize("code", NO_LOCK_ERRNOS, ids=errno.errorcode.get)
@pytest.mark.parametrize("name", WRITERS)
def test_new_dataset_without_file_locks_is_refused_leaving_nothing(
    tmp_path, monkeypatch, name, code
):
    root = tmp_path / "ds"
    failing_flock(monkeypatch, code)
    with pytest.raises(DatasetIOError) as caught:
        WRITERS[name](root)
    check_no_locks(caught.value, code, root)
    assert os.listdir(root) == []  # no manifest, shards/, .lock or format.json


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.ENOLCK], ids=errno.errorcode.get)
@pytest.mark.parametrize("name", WRITERS)
def test_existing_dataset_without_file_locks_is_refused_unchanged(
    tmp_path, monkeypatch, name, code
):
    with (EpisodeWriter if name == "EpisodeWriter" else DatasetWriter)(tmp_path) as writer:
        writer.write(episode())
    before = snapshot(tmp_path)
    failing_flock(monkeypatch, code)
    with pytest.raises(DatasetIOError) as caught:
        WRITERS[name](tmp_path)
    check_no_locks(caught.value, code, tmp_path)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("code", [errno.EWOULDBLOCK, errno.EACCES], ids=errno.errorcode.get)
def test_a_held_lock_still_means_another_writer(tmp_path, monkeypatch, code):
    with EpisodeWriter(tmp_path) as writer:
        writer.write(episode())
    failing_flock(monkeypatch, code, only_nonblocking=True)
    with pytest.raises(DatasetLockedError, match="another writer"):
        EpisodeWriter(tmp_path)
    # A v2 writer that finds the dataset held opens beside the others (shared lock).
    with DatasetWriter(tmp_path / "v2") as v2:
        v2.write(episode())
    assert [ep.id_ for ep in read_episodes(tmp_path / "v2")] == ["e0"]


def test_a_real_held_lock_is_dataset_locked(tmp_path):
    with EpisodeWriter(tmp_path), pytest.raises(DatasetLockedError, match="another writer"):
        EpisodeWriter(tmp_path)
    with DatasetWriter(tmp_path / "v2") as first, DatasetWriter(tmp_path / "v2") as second:
        first.write(episode(0))
        second.write(episode(1))
    assert sorted(ep.id_ for ep in read_episodes(tmp_path / "v2")) == ["e0", "e1"]


def test_copy_without_file_locks_leaves_nothing(tmp_path, monkeypatch):
    src = v2_dataset(tmp_path / "src")
    failing_flock(monkeypatch, errno.ENOSYS)
    with pytest.raises(DatasetIOError, match="does not support file locks"):
        migrate(src, tmp_path / "dst")
    assert sorted(os.listdir(tmp_path)) == ["src"]


# ---------------------------------------------------------------------- byte order
def leaf(dtype: str, storage: str, shape: list[int] | None = None) -> dict:
    return {"path": ["x"], "dtype": dtype, "shape": shape or [2], "storage": storage, "count": 3}


# (dtype, storage, shape, what the reader of this machine's byte order says)
LEAVES = [
    (f"{NATIVE}f4", "arrow", None, "ok"),
    (f"{NATIVE}i8", "arrow", None, "ok"),
    (f"{OTHER}f4", "raw", None, "ok"),  # an array of the other byte order, written here
    ("|u1", "arrow", None, "ok"),
    (f"{NATIVE}U2", "raw", None, "ok"),
    (f"{OTHER}f4", "arrow", None, "other"),  # native numbers of the other machine
    (f"{OTHER}u2", "arrow", None, "other"),
    (f"{NATIVE}f4", "raw", None, "other"),  # what the other machine stores for this dtype
    (f"{OTHER}f4", "arrow", [1 << 21, 1 << 20], "corrupt"),  # too big, whatever the order
    (f"{NATIVE}f4", "empty", None, "corrupt"),
    ("|u1", "raw", None, "corrupt"),  # one byte has no byte order: no machine stores it so
    (f"{NATIVE}U2", "arrow", None, "corrupt"),
    (f"{OTHER}U2", "arrow", None, "corrupt"),
    (f"{NATIVE}f4", "bits", None, "corrupt"),
]


@pytest.mark.parametrize("dtype, storage, shape, says", LEAVES)
def test_check_leaf_info_tells_byte_order_from_damage(dtype, storage, shape, says):
    info = leaf(dtype, storage, shape)
    if says == "ok":
        assert check_leaf_info(info, "x") == (np.dtype(dtype), tuple(info["shape"]))
    elif says == "other":
        with pytest.raises(UnsupportedVersionError) as caught:
            check_leaf_info(info, "x")
        assert not isinstance(caught.value, CorruptDatasetError)
        assert f"written on a {ENDIAN[OTHER]}-endian machine" in str(caught.value)
        assert f"this one is {sys.byteorder}-endian" in str(caught.value)
        assert "across byte orders is not supported" in str(caught.value)
    else:
        with pytest.raises(CorruptDatasetError, match="storage disagrees"):
            check_leaf_info(info, "x")


def written_elsewhere(root: Path) -> Path:
    """A dataset whose float32 leaves say what a machine of the other byte order writes."""
    v2_dataset(root, count=3)
    lines = [unseal_line(line, "x") for line in (root / "manifest.jsonl").read_bytes().splitlines()]
    index_path = root / "shards" / f"{lines[1]['shard']}.json"
    index = json.loads(index_path.read_text())
    for entry in index["episodes"]:
        for info in entry["leaves"].values():
            if info["dtype"] == f"{NATIVE}f4":
                info["dtype"] = f"{OTHER}f4"
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines[1].update(index_size=len(raw), index_sha256=hashlib.sha256(raw).hexdigest())
    for line in lines:
        line.pop("prev", None)
        line.pop("crc32", None)
    (root / "manifest.jsonl").write_bytes(seal_lines(lines))
    return root


READS = {
    "read_episodes": lambda root: list(read_episodes(root)),
    "read_episodes_numpy": lambda root: list(read_episodes(root, numpy=True, verify=True)),
    "load_episode": lambda root: load_episode(root, "e1"),
    "Dataset.episode": lambda root: Dataset(root).episode(2),
}


@pytest.mark.parametrize("read", READS)
def test_dataset_of_the_other_byte_order_is_refused_as_such(tmp_path, read):
    root = written_elsewhere(tmp_path)
    for _ in range(2):  # and again: not remembered as damage either
        with pytest.raises(UnsupportedVersionError, match="across byte orders") as caught:
            READS[read](root)
        assert not isinstance(caught.value, CorruptDatasetError)


@pytest.mark.parametrize("read", READS)
def test_reading_on_a_machine_of_the_other_byte_order(tmp_path, monkeypatch, read):
    root = v2_dataset(tmp_path, count=3)  # written here, read as the other machine would
    monkeypatch.setattr(arrow_leaves, "_NATIVE", OTHER)
    with pytest.raises(UnsupportedVersionError) as caught:
        READS[read](root)
    assert f"written on a {sys.byteorder}-endian machine" in str(caught.value)
    assert f"this one is {ENDIAN[OTHER]}-endian" in str(caught.value)


def test_validate_reports_the_byte_order_once_not_damage(tmp_path, capsys):
    root = written_elsewhere(tmp_path)
    report = validate_dataset(root)
    assert report.pieces == 3
    assert len(report.problems) == 1  # one message for the dataset, not one per piece
    assert "across byte orders is not supported" in report.problems[0]
    assert "disagrees" not in report.problems[0]
    assert main(["validate", str(root)]) == 1
    err = capsys.readouterr().err
    assert f"written on a {ENDIAN[OTHER]}-endian machine" in err
    assert "1 problem in 3 episode pieces" in err


def old_storage(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    """The storage rule before the byte order could be asked for (as it was written)."""
    if dtype.itemsize * int(np.prod(shape)) == 0:
        return "empty"
    native = dtype.byteorder in ("=", "|") or dtype.byteorder == NATIVE
    arrow_type = dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (2, 4, 8))
    return "arrow" if arrow_type and native else "raw"


CODES = [c for c in np.typecodes["All"] if c not in "O"] + ["U3", "S2", "M8[ns]", "m8[s]", "V4"]


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("order", ["=", "<", ">", "|"])
def test_storage_rule_unchanged_on_this_machine(code, order):
    dtype = np.dtype(code).newbyteorder(order) if order != "|" else np.dtype(code)
    for shape in [(), (2,), (0,), (3, 1)]:
        assert arrow_leaves._storage(dtype, shape) == old_storage(dtype, shape)
        if dtype.kind != "V":  # what this machine writes, it reads
            stored = arrow_leaves.leaf_info(np.zeros((1, *shape), dtype), ["x"])
            assert check_leaf_info(stored, "x") == (np.dtype(stored["dtype"]), shape)
