"""load_episodes: many episodes by id at once, each exactly what load_episode gives for it."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    EpisodeNotFoundError,
    EpisodeWriter,
    NotADatasetError,
    load_episode,
    load_episodes,
)
from episodes.io import shard_reader as shard_reader_module
from episodes.io.values import id_key
from episodes.testing.compare import outputs_equal
from episodes.testing.strategies import chunked_episodes

NAN = float("nan")
# Ids a dataset keeps apart (1, 1.0 and True are three ids), and ids holding NaNs.
ID_POOL = ["a", "b", 1, 1.0, True, ("t", 2), NAN, ("x", NAN)]
WRITERS = {
    "v1": lambda path: EpisodeWriter(path, sync=False),
    "v2": lambda path: DatasetWriter(path, sync=False),
    "v2-one-piece-shards": lambda path: DatasetWriter(path, sync=False, shard_bytes=1),
}


def _numpy_twin(id_):
    """The numpy scalar a caller might pass for ``id_`` (load_episode finds the id with it)."""
    if isinstance(id_, bool):
        return np.bool_(id_)
    if isinstance(id_, int):
        return np.int64(id_)
    if isinstance(id_, float):
        return np.float64(id_)
    if isinstance(id_, str):
        return np.str_(id_)
    return id_


def _write(path, writer, pieces):
    with WRITERS[writer](path) as w:
        w.write_many(pieces)
    return path


def _assert_same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a == b  # field by field (ids with NaNs as equal)
        assert a.is_numpy == b.is_numpy
        assert (a.t_started, a.t, a.observations.lookback) == (
            b.t_started,
            b.t,
            b.observations.lookback,
        )
        assert outputs_equal(a.get_state(), b.get_state(), check_dtype=True)


SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    writer=st.sampled_from(sorted(WRITERS)),
    numpy=st.sampled_from([None, True, False]),
    which=st.lists(st.integers(0, len(ID_POOL) - 1), min_size=1, max_size=4, unique=True),
)
def test_load_episodes_equals_load_episode_per_id(tmp_path_factory, data, writer, numpy, which):
    ids = [ID_POOL[k] for k in which]
    drawn = [
        data.draw(chunked_episodes(observation_space=SPACE, action_space=SPACE, max_len=6))
        for _ in ids
    ]
    pieces = []
    for id_, chunked in zip(ids, drawn, strict=True):
        chunked.episode.id_ = id_
        for piece in chunked.chunks:
            piece.id_ = id_
            pieces.append(piece)
    pieces = data.draw(st.permutations(pieces))  # pieces stored out of time order
    path = _write(tmp_path_factory.mktemp("loads") / "ds", writer, pieces)
    # Asked in any order, some twice, some as the numpy scalar holding them.
    asked = data.draw(st.lists(st.sampled_from(ids), min_size=0, max_size=8))
    asked = [_numpy_twin(x) if data.draw(st.booleans()) else x for x in asked]

    got = load_episodes(path, asked, numpy=numpy)

    _assert_same(got, [load_episode(path, x, numpy=numpy) for x in asked])
    if numpy is None:  # as stored: the pieces joined are the episode they were cut from
        originals = {id_key(i): c.episode for i, c in zip(ids, drawn, strict=True)}
        for x, episode in zip(asked, got, strict=True):
            assert episode == originals[id_key(x)]
    assert len({id(e) for e in got}) == len(got)  # an id asked twice: two episodes


def _abc(path, writer):
    """Episodes "a" (two pieces, written end first), "b" and 1, in ``writer``'s format."""
    a = SingleAgentEpisode(
        "a", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    rest = a.cut()
    rest.add_env_step(2, 1, 2.0, terminated=True)
    b = SingleAgentEpisode("b", observations=[5, 6], actions=[1], rewards=[0.5])
    one = SingleAgentEpisode(1, observations=[7])
    return _write(path, writer, [rest, b, one, a])


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_order_duplicates_and_independence(tmp_path, writer):
    path = _abc(tmp_path / "ds", writer)
    got = load_episodes(path, iter(["b", "a", np.int64(1), "a"]))  # any iterable, read once
    assert [e.id_ for e in got] == ["b", "a", 1, "a"]
    assert got[1].get_observations() == [0, 1, 2] and got[1].is_terminated
    assert got[1] is not got[3]
    got[1].custom_data["mine"] = True
    got[1].observations[0] = 99  # a change to one copy stays in it
    assert "mine" not in got[3].custom_data and got[3].get_observations()[0] == 0
    assert load_episodes(path, []) == []


# (ids asked, error type, text the message holds)
ERROR_CASES = {
    "unknown id": (["a", "zz"], EpisodeNotFoundError, "holds no episode with id 'zz'"),
    "first unknown named": (["yy", "a", "zz"], EpisodeNotFoundError, "with id 'yy'"),
    "1.0 is not 1": ([1.0], EpisodeNotFoundError, "with id 1.0"),
    "True is not 1": ([True], EpisodeNotFoundError, "with id True"),
    "np.float64(1) is not 1": ([np.float64(1)], EpisodeNotFoundError, "with id "),
    "a tuple of ids is not an id": ([("a", "b")], EpisodeNotFoundError, "('a', 'b')"),
    "one str": ("a", TypeError, "pass ['a']"),
    "bytes": (b"ab", TypeError, "single id"),
    "an int": (1, TypeError, "pass [1]"),
    "None": (None, TypeError, "single id None"),
}


@pytest.mark.parametrize("writer", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors(tmp_path, writer, case):
    ids, error, text = ERROR_CASES[case]
    path = _abc(tmp_path / "ds", writer)
    with pytest.raises(error) as caught:
        load_episodes(path, ids)
    assert text in str(caught.value)
    if error is EpisodeNotFoundError:  # word for word what load_episode says of that id
        missing = next(x for x in ids if x not in ("a",))
        with pytest.raises(EpisodeNotFoundError) as one:
            load_episode(path, missing)
        assert str(caught.value) == str(one.value)


FLAG_CASES = {
    "numpy a str": ({"numpy": "no"}, "numpy must be None, True or False"),
    "verify an int": ({"verify": 1}, "verify must be a bool"),
}


@pytest.mark.parametrize("case", sorted(FLAG_CASES))
def test_flags_are_checked_before_reading(tmp_path, case):
    kwargs, text = FLAG_CASES[case]
    with pytest.raises(TypeError, match=text):
        load_episodes(tmp_path / "nothing here", ["a"], **kwargs)


@pytest.mark.parametrize("ids", [[], ["a"]], ids=["no ids", "one id"])
def test_not_a_dataset(tmp_path, ids):
    with pytest.raises(NotADatasetError):
        load_episodes(tmp_path / "missing", ids)


@pytest.mark.parametrize("writer", ["v1", "v2"])
def test_pieces_that_do_not_join_raise_as_load_episode(tmp_path, writer):
    ep = SingleAgentEpisode(
        "a", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    path = _write(tmp_path / "ds", writer, [ep, ep, SingleAgentEpisode("b", observations=[0])])
    with pytest.raises(CorruptDatasetError) as many:
        load_episodes(path, ["b", "a"])
    with pytest.raises(CorruptDatasetError) as one:
        load_episode(path, "a")
    assert str(many.value) == str(one.value)
    assert load_episodes(path, ["b"])[0].id_ == "b"


@pytest.mark.parametrize("writer", ["v1", "v2"])
def test_unknown_id_raises_before_any_piece_is_read(tmp_path, writer, monkeypatch):
    path = _abc(tmp_path / "ds", writer)
    read = []
    if writer == "v1":
        from episodes.io import episode_loads

        real = episode_loads.load_chunk
        monkeypatch.setattr(
            episode_loads, "load_chunk", lambda *a, **k: read.append(a) or real(*a, **k)
        )
    else:
        real_episode = shard_reader_module.Dataset.episode

        def counted(self, i, **kwargs):
            read.append(i)
            return real_episode(self, i, **kwargs)

        monkeypatch.setattr(shard_reader_module.Dataset, "episode", counted)
    with pytest.raises(EpisodeNotFoundError, match="'missing'"):
        load_episodes(path, ["a", "b", "missing"])
    assert read == []
    assert len(load_episodes(path, ["a", "b"])) == 2 and len(read) == 3  # "a" has two pieces


def test_each_shard_is_opened_once(tmp_path, monkeypatch):
    pieces = [SingleAgentEpisode(f"e{k}", observations=[k]) for k in range(6)]
    path = _write(tmp_path / "ds", "v2-one-piece-shards", pieces)  # one shard per piece
    opened = []
    real_init = shard_reader_module.Shard.__init__

    def counted(self, root, entry, **kwargs):
        opened.append(entry.name)
        real_init(self, root, entry, **kwargs)

    monkeypatch.setattr(shard_reader_module.Shard, "__init__", counted)
    asked = ["e4", "e1", "e4", "e0", "e5", "e1"]
    got = load_episodes(path, asked)
    assert [e.id_ for e in got] == asked
    assert len(opened) == len(set(opened)) == 4
    opened.clear()
    for x in asked:
        load_episode(path, x)
    assert len(opened) == len(asked)  # one Dataset per call: its shard opened again


def test_nan_ids_are_found_and_joined(tmp_path):
    ep = SingleAgentEpisode(
        ("x", NAN), observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    rest = ep.cut()
    rest.add_env_step(2, 1, 2.0)
    path = _write(tmp_path / "ds", "v2", [rest, ep])
    got = load_episodes(path, [("x", NAN), ("x", np.float64("nan"))])
    assert [len(e) for e in got] == [2, 2]
    assert all(math.isnan(e.id_[1]) for e in got)
