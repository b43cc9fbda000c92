"""Library-level pins for a bug hunt's findings in the readers: NaN ids, file descriptors per
mapped leaf, OS errors taken for damage, relative paths read lazily, stored episodes without
observations, list/array joins in the validator, index checks and messages, numpy ids, and a
piece without steps that ends an episode (each test failed before its fix)."""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    PieceJoins,
    load_episode,
    read_episodes,
    validate_dataset,
)

MMAP = mmap.mmap  # the type, kept from a test that patches the constructor
WRITERS = [pytest.param(EpisodeWriter, id="v1"), pytest.param(DatasetWriter, id="v2")]
NAN = float("nan")


def steps(id_, obs, t_started=0, terminated=False) -> SingleAgentEpisode:
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t_started,
        terminated=terminated,
        len_lookback_buffer=0,
    )


def write(writer, path: Path, pieces) -> Path:
    with writer(path, sync=False) as w:
        w.write_many(pieces)
    return path


# ------------------------------------------------------------------- 1: NaN ids in pieces
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("id_", [NAN, ("run", NAN)], ids=["nan", "tuple-with-nan"])
def test_an_id_holding_nan_written_in_pieces_loads_joined(tmp_path, writer, id_):
    whole = steps(id_, [0.0, 1.0, 2.0], terminated=True)
    path = write(writer, tmp_path / "ds", [whole[0:1], whole[1:2]])
    assert validate_dataset(path).ok
    joined = load_episode(path, id_)
    assert len(joined) == 2 and joined.get_observations() == [0.0, 1.0, 2.0]
    first, second = read_episodes(path)  # one id object, so a dict keyed by id finds both
    assert first.id_ is second.id_


@pytest.mark.parametrize("writer", WRITERS)
def test_a_nan_id_joins_across_column_layouts_in_the_validator(tmp_path, writer):
    # A list-mode piece, then a numpy'd one: the validator tries the join by concat.
    first = steps(NAN, [0.0, 1.0])
    second = steps(NAN, [1.0, 2.0], t_started=1, terminated=True).to_numpy()
    path = write(writer, tmp_path / "ds", [first, second])
    assert validate_dataset(path).problems == []
    assert len(load_episode(path, NAN)) == 2


# ------------------------------------------------------- 2: descriptors per mapped leaf
_FD_SCRIPT = textwrap.dedent(
    """
    import os, resource, sys
    import numpy as np
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, EpisodeWriter, read_episodes

    writer, path = {"v1": EpisodeWriter, "v2": DatasetWriter}[sys.argv[1]], sys.argv[2]
    frame = np.zeros((84, 84, 4), np.uint8)
    with writer(path, sync=False) as w:
        for k in range(48):  # 48 episodes of a 1.1 MiB observation leaf each
            w.write(SingleAgentEpisode(
                f"e{k}", observations=[frame + k % 7] * 41, actions=[0] * 40,
                rewards=[1.0] * 40, len_lookback_buffer=0).to_numpy())
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    kept = list(read_episodes(path))
    for k, ep in enumerate(kept):
        obs = ep.observations.data
        assert int(obs[3, 0, 0, 0]) == k % 7, k
        obs[3, 0, 0, 0] = 99  # writable, and the file never changes
    again = next(iter(read_episodes(path)))
    assert int(again.observations.data[3, 0, 0, 0]) == 0
    print("read", len(kept), "fds", len(os.listdir("/proc/self/fd")))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_holding_more_read_episodes_than_the_fd_limit_allows(tmp_path, version):
    result = subprocess.run(
        [sys.executable, "-c", _FD_SCRIPT, version, str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("read 48 ")


def _mapped(array: np.ndarray) -> bool:
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's view of the map
        base = base.obj
    return isinstance(base, MMAP)


@pytest.mark.parametrize("writer", WRITERS)
def test_large_leaves_are_mapped_within_the_bound_and_read_past_it(tmp_path, writer, monkeypatch):
    from episodes.io import leaf_maps  # new with the fix

    big = [np.full((512, 512), i, np.uint8) for i in range(5)]  # 1.25 MiB of observations
    path = write(writer, tmp_path / "ds", [steps("a", big).to_numpy()])
    (mapped,) = read_episodes(path)
    assert _mapped(mapped.observations.data)  # zero-copy, as before
    monkeypatch.setattr(leaf_maps, "map_limit", lambda: 0)
    (read,) = read_episodes(path)
    assert not _mapped(read.observations.data)
    assert read == mapped and read.observations.data.flags.writeable


@pytest.mark.parametrize("writer", WRITERS)
def test_a_map_refused_by_the_system_is_read_instead(tmp_path, writer, monkeypatch):
    big = [np.full((512, 512), i, np.uint8) for i in range(5)]
    path = write(writer, tmp_path / "ds", [steps("a", big).to_numpy()])

    def refuse(*args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(mmap, "mmap", refuse)
    (read,) = read_episodes(path)
    assert not _mapped(read.observations.data)
    assert [int(o[0, 0]) for o in read.get_observations()] == list(range(5))


# ---------------------------------------------- 3: OS errors are not damage, nor cached
def _refuse_opening(monkeypatch, suffix: str) -> None:
    real = os.open

    def fake(path, *args, **kwargs):
        if str(path).endswith(suffix):
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


def test_a_transient_os_error_opening_a_shard_is_not_cached_as_damage(tmp_path, monkeypatch):
    from episodes.io import DatasetIOError  # new with the fix

    path = write(DatasetWriter, tmp_path / "ds", [steps("a", [0.0, 1.0])])
    ds = Dataset(path)
    with monkeypatch.context() as patch:
        _refuse_opening(patch, ".json")
        with pytest.raises(DatasetIOError) as info:
            ds.episode(0)
    err = info.value
    assert not isinstance(err, CorruptDatasetError)
    assert isinstance(err, OSError) and isinstance(err, DatasetError)
    assert err.errno == errno.EMFILE
    assert ds.episode(0).id_ == "a"  # once the descriptors are back


def test_an_os_error_reading_a_v1_leaf_is_no_corruption(tmp_path, monkeypatch):
    from episodes.io import DatasetIOError  # new with the fix

    path = write(EpisodeWriter, tmp_path / "ds", [steps("a", [0.0, 1.0])])
    _refuse_opening(monkeypatch, ".npy")
    with pytest.raises(DatasetIOError):
        list(read_episodes(path))


def test_the_validator_raises_an_os_error_instead_of_reporting_damage(tmp_path, monkeypatch):
    from episodes.io import DatasetIOError  # new with the fix

    path = write(DatasetWriter, tmp_path / "ds", [steps("a", [0.0, 1.0])])
    _refuse_opening(monkeypatch, ".arrow")
    with pytest.raises(DatasetIOError):
        validate_dataset(path)


def test_real_damage_is_still_corruption(tmp_path):
    path = write(DatasetWriter, tmp_path / "ds", [steps("a", [0.0, 1.0])])
    next((path / "shards").glob("*.arrow")).unlink()
    ds = Dataset(path)
    for _ in range(2):  # remembered
        with pytest.raises(CorruptDatasetError, match="missing"):
            ds.episode(0)


# ------------------------------------------------------- 4: relative paths, read lazily
def _two_runs(tmp_path: Path) -> None:
    for run, value in [("a", 1.0), ("b", 2.0)]:
        (tmp_path / run).mkdir()
        for writer, name in [(DatasetWriter, "v2"), (EpisodeWriter, "v1")]:
            obs = [np.float32([value])] * 3
            write(writer, tmp_path / run / name, [steps("e", obs).to_numpy()])


def test_readers_keep_the_directory_they_were_given(tmp_path, monkeypatch):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    _two_runs(tmp_path)
    monkeypatch.chdir(tmp_path / "a")
    transitions = torch_data.TransitionDataset("v2")
    sequences = torch_data.SequenceDataset("v2", length=1)
    ds = Dataset("v2")
    v1_stream = read_episodes("v1")
    monkeypatch.chdir(tmp_path / "b")
    assert float(transitions[0]["obs"][0]) == 1.0
    assert float(sequences[0]["obs"][0, 0]) == 1.0
    assert float(ds.episode(0).get_observations(0)[0]) == 1.0
    assert float(next(v1_stream).get_observations(0)[0]) == 1.0


# ------------------------------------------------- 5: a stored episode not reset yet
def test_steps_of_a_stored_episode_without_observations(tmp_path):
    path = write(DatasetWriter, tmp_path / "ds", [steps("a", [0.0, 1.0]), SingleAgentEpisode("e")])
    ds = Dataset(path)
    out = ds.steps(1, 0, 0)
    assert len(out["observations"]) == 0 and len(out["actions"]) == 0
    assert ds.steps(0, 0, 1)["observations"].tolist() == [0.0, 1.0]


# --------------------------------------- 6: the validator joins list and array Box items
def _list_then_numpy_pieces(
    second_start: list[float], terminated: bool
) -> tuple[SingleAgentEpisode, SingleAgentEpisode]:
    """Episode "x" as a list-mode Box piece, then a numpy'd one starting at ``second_start``."""
    space = gym.spaces.Box(-10, 10, (2,), np.float64)
    first = SingleAgentEpisode(
        "x",
        observations=[[0.0, 1.0], [1.0, 2.0]],
        observation_space=space,
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    second = SingleAgentEpisode(
        "x",
        observations=[np.float64(second_start), np.float64([2.0, 3.0])],
        observation_space=space,
        actions=[1],
        rewards=[1.0],
        t_started=1,
        terminated=terminated,
        len_lookback_buffer=0,
    ).to_numpy()
    return first, second


@pytest.mark.parametrize("writer", WRITERS)
def test_validate_accepts_a_list_box_piece_before_a_numpy_one(tmp_path, writer):
    first, second = _list_then_numpy_pieces([1.0, 2.0], terminated=True)
    path = write(writer, tmp_path / "ds", [first, second])
    assert len(load_episode(path, "x")) == 2
    assert validate_dataset(path).problems == []


def test_pieces_that_differ_in_the_space_are_still_a_broken_join():
    first, second = _list_then_numpy_pieces([1.0, 2.5], terminated=False)
    joins = PieceJoins([("x", 0, 1, False), ("x", 1, 2, False)])
    assert joins.check(0, first) == []
    assert "does not start with" in joins.check(1, second)[0]


# ------------------------------------------------- 7 and suspects: indices of the torch data
@pytest.fixture
def four_steps(tmp_path) -> Path:
    return write(DatasetWriter, tmp_path / "ds", [steps("a", [0, 1, 2, 3]).to_numpy()])


@pytest.mark.parametrize(
    ("kind", "index", "shown"),
    [("transitions", -10, "index -10 "), ("sequences", -5, "index -5 ")],
)
def test_an_out_of_range_negative_index_is_reported_as_given(four_steps, kind, index, shown):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    data = (
        torch_data.TransitionDataset(four_steps)
        if kind == "transitions"
        else torch_data.SequenceDataset(four_steps, length=2)
    )
    with pytest.raises(IndexError, match=shown):
        data[index]


@pytest.mark.parametrize("index", [True, np.True_, 1.0, "1"], ids=repr)
def test_torch_datasets_refuse_indices_that_are_not_ints(four_steps, index):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    with pytest.raises(TypeError, match="index must be an int"):
        torch_data.TransitionDataset(four_steps)[index]


@pytest.mark.parametrize("index", [True, 0.0], ids=repr)
def test_dataset_refuses_indices_that_are_not_ints(four_steps, index):
    with pytest.raises(TypeError, match="episode index must be an int"):
        Dataset(four_steps).episode(index)


def test_numpy_and_torch_integer_indices_still_work(four_steps):
    torch = pytest.importorskip("torch")
    from episodes.io.torch_data import TransitionDataset

    data = TransitionDataset(four_steps)
    assert int(data[np.int64(1)]["obs"]) == int(data[torch.tensor(1)]["obs"]) == 1
    assert Dataset(four_steps).episode(np.int64(0)).id_ == "a"


# --------------------------------------------------------------- suspects: numpy ids
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("stored", "asked"),
    [("a", np.str_("a")), (3, np.int64(3)), (2.5, np.float64(2.5)), (True, np.True_)],
    ids=["str_", "int64", "float64", "bool_"],
)
def test_numpy_scalar_ids_find_the_python_id(tmp_path, writer, stored, asked):
    path = write(writer, tmp_path / "ds", [steps(stored, [0.0]), steps("other", [0.0])])
    assert load_episode(path, asked).id_ == stored
    assert [ep.id_ for ep in read_episodes(path, ids=[asked])] == [stored]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_numpy_int_id_still_does_not_find_a_float_id(tmp_path, writer):
    path = write(writer, tmp_path / "ds", [steps(3.0, [0.0])])
    assert list(read_episodes(path, ids=[np.int64(3)])) == []


# ----------------------------------------- suspects: a piece without steps ends the episode
def test_a_later_piece_without_steps_that_ends_the_episode_ends_the_last_transition(tmp_path):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    body = steps("a", [0.0, 1.0, 2.0, 3.0]).to_numpy()
    end = steps("a", [3.0], t_started=3, terminated=True).to_numpy()
    path = write(DatasetWriter, tmp_path / "ds", [body, end, steps("b", [0.0, 1.0]).to_numpy()])
    assert validate_dataset(path).ok and load_episode(path, "a").is_terminated
    transitions = torch_data.TransitionDataset(path)
    assert [transitions[t]["terminated"] for t in range(4)] == [False, False, True, False]
    n_step = torch_data.TransitionDataset(path, n_step=2)
    assert [n_step[t]["terminated"] for t in range(3)] == [False, True, True]
    windows = torch_data.SequenceDataset(path, length=2)
    assert windows[1]["terminated"].tolist() == [False, True]
    ds = Dataset(path)
    assert ds.steps(0, 0, 3)["terminated"] and not ds.steps(0, 0, 2)["terminated"]
