"""Paths a user may give the writers, the copies and a replay save: relative, long, below a file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    UnstorableValueError,
    read_episodes,
)
from episodes.io.tools import filter_dataset, migrate
from episodes.replay import EpisodeReplayBuffer

WRITERS = {"v1": EpisodeWriter, "v2": DatasetWriter}


def _episode(id_: str = "a", info: object = 0) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        infos=[{}, {"x": info}],
        len_lookback_buffer=0,
    )


@pytest.fixture
def in_tmp(tmp_path: Path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


@pytest.mark.parametrize("version", WRITERS)
def test_a_writer_opened_by_a_relative_path_keeps_writing_there_after_a_chdir(in_tmp, version):
    (in_tmp / "elsewhere" / "ds").mkdir(parents=True)  # the same relative path, elsewhere
    writer = WRITERS[version]("ds")
    writer.write(_episode("a"))
    os.chdir(in_tmp / "elsewhere")
    writer.write(_episode("b"))
    writer.close()
    assert [ep.id_ for ep in read_episodes(in_tmp / "ds")] == ["a", "b"]
    assert os.listdir(in_tmp / "elsewhere" / "ds") == []
    assert writer.path == in_tmp / "ds"


@pytest.mark.parametrize("version", WRITERS)
@pytest.mark.parametrize("below", ["afile", "afile/x", "afile/x/y"])
def test_a_writer_below_a_file_is_not_a_dataset(in_tmp, version, below):
    (in_tmp / "afile").write_text("x")
    with pytest.raises(NotADatasetError, match="is a file or lies under one"):
        WRITERS[version](below)
    assert (in_tmp / "afile").read_text() == "x"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    with DatasetWriter(tmp_path / "src") as writer:
        writer.write(_episode("a"))
    return tmp_path / "src"


@pytest.mark.parametrize("copy", ["migrate", "filter"])
def test_copies_take_any_name_a_writer_takes(source, copy):
    dst = source.parent / ("d" * 240)
    DatasetWriter(source.parent / ("w" * 240)).close()  # the writer takes it
    if copy == "migrate":
        migrate(source, dst)
    else:
        filter_dataset(source, dst, min_length=0)
    assert [ep.id_ for ep in read_episodes(dst)] == ["a"]
    assert sorted(os.listdir(source.parent)) == sorted(["src", "d" * 240, "w" * 240])


def test_a_copy_two_levels_below_a_file_names_the_file(source):
    (source.parent / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match="afile is not a directory"):
        migrate(source, source.parent / "afile" / "x" / "y")


def _buffer(info: object = 0) -> EpisodeReplayBuffer:
    buffer = EpisodeReplayBuffer(10, seed=0)
    buffer.add(_episode("a", info))
    return buffer


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda root: (root / "afile").write_text("x") and root / "afile" / "s",
            NotADirectoryError,
            "afile is not a directory",
        ),
        (
            lambda root: (root / "afile").write_text("x") and root / "afile" / "s" / "t",
            NotADirectoryError,
            "afile is not a directory",
        ),
        (
            lambda root: (root / "link").symlink_to(root / "nowhere") or root / "link",
            FileExistsError,
            "exists",
        ),
    ],
    ids=["below-a-file", "two-below-a-file", "dangling-link"],
)
def test_save_refuses_paths_it_cannot_make(tmp_path, make, error, match):
    before = sorted(os.listdir(tmp_path))
    path = make(tmp_path)
    after_setup = sorted(os.listdir(tmp_path))
    with pytest.raises(error, match=match):
        _buffer().save(path)
    assert sorted(os.listdir(tmp_path)) == after_setup != before


def test_save_takes_a_long_name_and_makes_a_directory_others_may_read(tmp_path):
    path = tmp_path / ("s" * 250)
    _buffer().save(path)
    probe = tmp_path / "probe"
    probe.mkdir()  # the mode any new directory gets here
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(probe.stat().st_mode)
    assert EpisodeReplayBuffer.load(path).get_episode_ids() == ["a"]


def test_a_failed_save_takes_back_the_parents_it_made(tmp_path):
    with pytest.raises(UnstorableValueError, match=r"\(id 'a'\), cannot be saved: infos\[1\]"):
        _buffer(info=object()).save(tmp_path / "new" / "deeper" / "buf")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "version, note",
    [
        ("1", "the episodes it stored before the failure stay in rec"),
        ("2", "this record is taken back"),
    ],  # v1 stores each episode, v2 its first shard fails
)
def test_record_onto_a_full_disk_says_what_stays(tmp_path, version, note):
    # RLIMIT_FSIZE stands in for a full disk: writes past 64 KiB fail with EFBIG.
    code = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16)); "
        "from episodes.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ["record", "CartPole-v1", "--steps", "6000", "--out", "rec", "--format", version]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].startswith("episodes: error: writing rec failed (")
    assert note in lines[-1], lines[-1]
    assert (tmp_path / "rec").exists() == (version == "1")


def test_a_copy_onto_a_full_disk_says_where_and_that_nothing_was_written(tmp_path):
    with DatasetWriter(tmp_path / "src") as writer:
        writer.write_many([_episode(str(i), info="x" * 4096) for i in range(40)])
    code = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16)); "
        "from episodes.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "migrate", "src", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("episodes: error: writing out failed ("), proc.stderr
    assert proc.stderr.rstrip().endswith("nothing was written")
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_a_failed_block_takes_back_its_dataset_after_a_chdir(in_tmp):
    from episodes.io.tools import removed_if_failed

    (in_tmp / "a").mkdir()
    (in_tmp / "b").mkdir()
    os.chdir(in_tmp / "a")
    with pytest.raises(KeyError), removed_if_failed("ds"):
        DatasetWriter("ds").close()
        os.chdir(in_tmp / "b")  # an env that changes directory, say
        raise KeyError("the env failed")
    assert os.listdir(in_tmp / "a") == [] and os.listdir(in_tmp / "b") == []
