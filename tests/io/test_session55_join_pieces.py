"""merge(..., join_pieces=True): each id stored as one piece that loads back as its pieces did.

A continuing task written chunk by chunk leaves thousands of pieces of one id; the joined copy
must give ``load_episode(dst, id) == load_episode(src, id)`` field by field for every id, keep
the metadata, hold one piece per id, and leave ``src`` untouched, also when it refuses.
"""

from __future__ import annotations

import hashlib
import math
import os

import gymnasium as gym
import numpy as np
import pytest
from _gen import make_episode, moved
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    dataset_info,
    load_episode,
    merge,
)
from episodes.io.shard_reader import Dataset
from episodes.io.v2_read import piece_walls
from episodes.io.values import id_key
from episodes.testing.compare import outputs_equal
from episodes.testing.strategies import chunked_episodes

NAN = float("nan")
WRITERS = {
    "v1": lambda path: EpisodeWriter(path, sync=False),
    "v2": lambda path: DatasetWriter(path, sync=False),
    "v2-one-piece-shards": lambda path: DatasetWriter(path, sync=False, shard_bytes=1),
    "v2-parquet": lambda path: DatasetWriter(path, sync=False, data_format="parquet"),
}


def write(path, writer, pieces):
    with WRITERS[writer](path) as w:
        w.write_many(pieces)
    return path


def assert_same(a: SingleAgentEpisode, b: SingleAgentEpisode) -> None:
    assert a == b  # field by field (ids with NaNs as equal)
    assert (a.is_numpy, a.t_started, a.t, a.is_terminated, a.is_truncated) == (
        b.is_numpy,
        b.t_started,
        b.t,
        b.is_terminated,
        b.is_truncated,
    )
    assert a.observations.lookback == b.observations.lookback
    assert outputs_equal(a.get_state(), b.get_state(), check_dtype=True)


def fingerprint(root) -> dict[str, str]:
    """Every file under ``root`` with the SHA-256 of its bytes (the source must not change)."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


def split_into(episode: SingleAgentEpisode, cuts: list[int]) -> list[SingleAgentEpisode]:
    """``episode`` as the pieces between ``cuts`` (slices keep their lookback: as chunks do)."""
    bounds = [0, *cuts, len(episode)]
    return [episode[a:b] for a, b in zip(bounds, bounds[1:])]


def check_joined(src, dst, ids) -> None:
    info = dataset_info(dst)
    assert info.num_chunks == len(ids) == info.num_episodes  # one piece per id
    for id_ in ids:
        assert_same(load_episode(dst, id_), load_episode(src, id_))
        assert_same(load_episode(dst, id_, numpy=True), load_episode(src, id_, numpy=True))


# name -> (observation space of _gen, ids, pieces per id)
CASES = {
    "one piece": ("box_f32", ["a"], 1),
    "two pieces": ("box_f32", ["a"], 2),
    "many pieces": ("box_f32", ["a"], 12),
    "nested dict space": ("dict", ["a", "b"], 3),
    "nested tuple space": ("tuple", ["a"], 4),
    "text observations": ("text", ["a"], 3),
    "ids of several types": ("box_f32", ["a", 1, 1.0, True, ("t", 2), None], 3),
    "ids holding NaN": ("box_f32", [NAN, ("x", NAN), "n"], 2),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_id_becomes_one_piece_that_loads_as_before(tmp_path, case, numpy, writer):
    space, ids, count = CASES[case]
    pieces = []
    for k, id_ in enumerate(ids):
        steps = 2 * count + k  # the same seed, other lengths: no two ids alike
        whole = make_episode(k, obs_space=space, steps=steps, lookback=2, numpy=numpy, id_="x")
        whole.id_ = id_
        cuts = list(range(2, steps, 2))[: count - 1]
        assert len(split_into(whole, cuts)) == count
        pieces += split_into(whole, cuts)
    pieces = pieces[::-1]  # stored out of time order, the ids interleaved
    src = write(tmp_path / "src", writer, pieces)
    before = fingerprint(src)

    written = merge([src], tmp_path / "dst", join_pieces=True)

    assert written == len(ids)
    check_joined(src, tmp_path / "dst", ids)
    assert fingerprint(src) == before


def test_a_continuing_run_of_hundreds_of_chunks_is_one_piece(tmp_path):
    whole = make_episode(7, steps=600, lookback=3, numpy=True, id_="run")
    pieces = split_into(whole, list(range(4, 600, 4)))
    src = write(tmp_path / "src", "v2-one-piece-shards", pieces)
    assert merge([src], tmp_path / "dst", join_pieces=True) == 1
    check_joined(src, tmp_path / "dst", ["run"])
    assert len(Dataset(tmp_path / "dst")) == 1


def test_pieces_of_one_id_in_two_sources_join_into_one(tmp_path):
    whole = make_episode(3, steps=9, id_="x", terminated=True)
    first, middle, last = split_into(whole, [3, 6])
    other = make_episode(4, steps=2, id_="y")
    a = write(tmp_path / "a", "v2", [last, other])
    b = write(tmp_path / "b", "v1", [first, middle])
    assert merge([a, b], tmp_path / "dst", join_pieces=True) == 2
    joined = load_episode(tmp_path / "dst", "x")
    assert joined == whole  # field by field, the clocks (not stored) aside
    assert joined.observations.lookback == whole.observations.lookback == 2
    assert_same(load_episode(tmp_path / "dst", "y"), load_episode(a, "y"))
    assert [s.id_ for s in dataset_info(tmp_path / "dst").episodes] == ["x", "y"]


def test_metadata_kept_and_walls_span_the_pieces(tmp_path):
    pieces = split_into(make_episode(1, steps=6, id_="w"), [2, 4])
    meta = DatasetMetadata(env_id="Forever-v0", user={"run": 5})
    with DatasetWriter(tmp_path / "src", sync=False, metadata=meta) as w:
        for k, piece in enumerate(pieces):
            w._write(piece, (100.0 + 10 * k, 105.0 + 10 * k))  # as the copy tools keep them
    merge([tmp_path / "src"], tmp_path / "dst", join_pieces=True)
    got = dataset_info(tmp_path / "dst").metadata
    assert got["env_id"] == "Forever-v0" and got["user"]["run"] == 5
    assert got["user"]["merged_from"] == [str(tmp_path / "src")]
    assert piece_walls(Dataset(tmp_path / "dst"), 0) == (100.0, 125.0)


def test_without_the_keyword_every_piece_is_kept(tmp_path):
    src = write(tmp_path / "src", "v2", split_into(make_episode(1, steps=6, id_="k"), [2, 4]))
    assert merge([src], tmp_path / "dst") == 3
    assert dataset_info(tmp_path / "dst").num_chunks == 3


SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ID_POOL = ["a", "b", 1, 1.0, ("t", 2), NAN]


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    writer=st.sampled_from(sorted(WRITERS)),
    which=st.lists(st.integers(0, len(ID_POOL) - 1), min_size=1, max_size=3, unique=True),
)
def test_joined_copy_loads_equal_for_random_splits(tmp_path_factory, data, writer, which):
    ids = [ID_POOL[k] for k in which]
    pieces = []
    for id_ in ids:
        chunked = data.draw(
            chunked_episodes(observation_space=SPACE, action_space=SPACE, max_len=8, max_chunks=5)
        )
        for piece in chunked.chunks:
            piece.id_ = id_
            pieces.append(piece)
    pieces = data.draw(st.permutations(pieces))
    root = tmp_path_factory.mktemp("join")
    src = write(root / "src", writer, pieces)
    assert merge([src], root / "dst", join_pieces=True) == len(ids)
    check_joined(src, root / "dst", ids)
    assert len({id_key(s.id_) for s in dataset_info(root / "dst").episodes}) == len(ids)


def test_a_destination_that_exists_is_refused_and_src_untouched(tmp_path):
    src = write(tmp_path / "src", "v2", split_into(make_episode(1, steps=6, id_="k"), [3]))
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "mine.txt").write_text("keep")
    before = fingerprint(src)
    with pytest.raises(DatasetError, match=r"dst exists and is not empty; choose a new"):
        merge([src], tmp_path / "dst", join_pieces=True)
    assert fingerprint(src) == before
    assert os.listdir(tmp_path / "dst") == ["mine.txt"]


def test_a_source_that_is_no_dataset_is_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotADatasetError, match="plain"):
        merge([tmp_path / "plain"], tmp_path / "dst", join_pieces=True)
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize("flag", ["yes", 1, None], ids=["str", "int", "None"])
def test_join_pieces_must_be_a_bool(tmp_path, flag):
    src = write(tmp_path / "src", "v2", [make_episode(1, steps=2, id_="k")])
    with pytest.raises(TypeError, match=r"join_pieces must be a bool, got"):
        merge([src], tmp_path / "dst", join_pieces=flag)
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize("writer", ["v1", "v2"])
def test_pieces_that_do_not_join_are_refused_and_nothing_is_left(tmp_path, writer):
    # The manifest says they join (the steps tile), the data does not: the observation a
    # piece starts from is not the one its predecessor ends with.
    first, second = split_into(make_episode(1, steps=6, lookback=0, id_="k"), [3])
    src = write(tmp_path / "src", writer, [first, moved(second)])
    before = fingerprint(src)
    with pytest.raises(CorruptDatasetError, match=r"pieces of episode 'k' do not join at t=3"):
        merge([src], tmp_path / "dst", join_pieces=True)
    assert not (tmp_path / "dst").exists()
    assert sorted(os.listdir(tmp_path)) == ["src"]  # no staged directory left behind
    assert fingerprint(src) == before
    assert math.isfinite(dataset_info(src).episodes[0].ret)
