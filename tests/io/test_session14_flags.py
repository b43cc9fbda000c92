"""The readers' ``numpy=`` and ``verify=`` flags are checked (each test failed before its fix).

``numpy`` is None (as stored), True or False and ``verify`` a bool (numpy booleans too);
anything else (``"no"`` numpy'd everything, ``[]`` meant False) is a ``TypeError`` naming
the flag, raised before anything is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter, EpisodeWriter, load_episode, read_episodes
from episodes.io.reader import iter_chunks, load_chunk
from episodes.io.v2_read import load_episode_v2, read_episodes_v2

BAD_NUMPY = ["no", "false", "as stored", [], 0, 1, 0.0, np.array(True), np.int64(1)]
BAD_VERIFY = ["no", "", [], 0, 1, None, np.array(True), np.int64(0)]


def _write(path: Path, version: int) -> Path:
    writer = EpisodeWriter if version == 1 else DatasetWriter
    with writer(path) as w:  # a list-mode episode: numpy=True would convert it
        w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0]))
    return path


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def dataset(request: Any, tmp_path: Path) -> Path:
    return _write(tmp_path / "d", request.param)


NUMPY_CALLS = {
    "read_episodes": lambda p, flag: list(read_episodes(p, numpy=flag)),
    "load_episode": lambda p, flag: load_episode(p, "a", numpy=flag),
}
VERIFY_CALLS = {
    "read_episodes": lambda p, flag: list(read_episodes(p, verify=flag)),
    "load_episode": lambda p, flag: load_episode(p, "a", verify=flag),
}


@pytest.mark.parametrize("call", list(NUMPY_CALLS), ids=str)
@pytest.mark.parametrize("flag", BAD_NUMPY, ids=repr)
def test_a_numpy_flag_that_is_no_bool_or_none_is_refused(dataset: Path, call: str, flag: Any):
    with pytest.raises(TypeError, match="numpy must be None, True or False"):
        NUMPY_CALLS[call](dataset, flag)


@pytest.mark.parametrize("call", list(VERIFY_CALLS), ids=str)
@pytest.mark.parametrize("flag", BAD_VERIFY, ids=repr)
def test_a_verify_flag_that_is_no_bool_is_refused(dataset: Path, call: str, flag: Any):
    with pytest.raises(TypeError, match="verify must be a bool"):
        VERIFY_CALLS[call](dataset, flag)


@pytest.mark.parametrize(
    "flag, is_numpy",
    [(None, False), (True, True), (False, False), (np.True_, True), (np.False_, False)],
    ids=repr,
)
def test_good_numpy_flags_still_read(dataset: Path, flag: Any, is_numpy: bool):
    assert [e.is_numpy for e in read_episodes(dataset, numpy=flag)] == [is_numpy]
    assert load_episode(dataset, "a", numpy=flag, verify=np.True_).is_numpy == is_numpy


BEFORE_READING = {  # a path that is no dataset: the flag is refused first
    "read_episodes numpy": lambda p: read_episodes(p, numpy="no"),
    "read_episodes verify": lambda p: read_episodes(p, verify="yes"),
    "load_episode numpy": lambda p: load_episode(p, "a", numpy=[]),
    "load_episode verify": lambda p: load_episode(p, "a", verify=1),
    "Dataset verify": lambda p: Dataset(p, verify="no"),
    "read_episodes_v2": lambda p: read_episodes_v2(
        p, ids=None, start=None, stop=None, numpy="no", verify=False
    ),
    "load_episode_v2": lambda p: load_episode_v2(p, "a", numpy=None, verify="no"),
}


@pytest.mark.parametrize("name", list(BEFORE_READING), ids=str)
def test_flags_are_refused_before_anything_is_read(tmp_path: Path, name: str):
    with pytest.raises(TypeError, match="must be"):
        BEFORE_READING[name](tmp_path / "missing")


@pytest.mark.parametrize("flag", ["no", [], 0, 1.0], ids=repr)
def test_dataset_methods_refuse_a_bad_numpy_flag(tmp_path: Path, flag: Any):
    ds = Dataset(_write(tmp_path / "d", 2))
    with pytest.raises(TypeError, match="numpy must be None, True or False"):
        ds.episode(0, numpy=flag)
    with pytest.raises(TypeError, match="numpy must be None, True or False"):
        ds.iter_episodes(numpy=flag)  # when called, not at the first next()
    assert [e.is_numpy for e in ds.iter_episodes(numpy=np.True_)] == [True]


def test_dataset_keeps_a_numpy_bool_verify_as_a_bool(tmp_path: Path):
    ds = Dataset(_write(tmp_path / "d", 2), verify=np.True_)
    assert ds._verify is True
    assert ds.episode(0).id_ == "a"


def test_load_chunk_checks_its_flags(tmp_path: Path):
    root, entries, _ = iter_chunks(_write(tmp_path / "d", 1))
    with pytest.raises(TypeError, match="numpy must be None"):
        load_chunk(root, entries[0], numpy="no")
    with pytest.raises(TypeError, match="verify must be a bool"):
        load_chunk(root, entries[0], verify="no")
    assert load_chunk(root, entries[0], numpy=np.False_, verify=np.True_).id_ == "a"
