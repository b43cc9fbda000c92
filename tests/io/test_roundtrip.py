from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _gen import ACTION_SPACES, SPACES, make_episode
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetLockedError,
    EpisodeNotFoundError,
    EpisodeWriter,
    NotADatasetError,
    UnstorableValueError,
    dataset_info,
    load_episode,
    read_episodes,
)


def roundtrip(tmp_path, episodes, **kwargs):
    path = tmp_path / "ds"
    with EpisodeWriter(path) as writer:
        writer.write_many(episodes)
    return list(read_episodes(path, verify=True, **kwargs))


@pytest.mark.parametrize("obs_space", sorted(SPACES))
@pytest.mark.parametrize("numpy", [False, True])
def test_every_space_kind_round_trips(tmp_path, obs_space, numpy):
    episodes = [
        make_episode(seed, obs_space=obs_space, act_space=act, numpy=numpy)
        for seed, act in enumerate(sorted(ACTION_SPACES))
    ]
    back = roundtrip(tmp_path, episodes)
    assert back == episodes
    for a, b in zip(back, episodes, strict=True):
        assert a.is_numpy == b.is_numpy
        assert a.get_duration_s() == b.get_duration_s()
        assert a.observations.lookback == b.observations.lookback == 2
        assert a.observation_space == b.observation_space
        assert list(a.extra_model_outputs) == list(b.extra_model_outputs)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    obs_space=st.sampled_from(sorted(SPACES)),
    act_space=st.sampled_from(sorted(ACTION_SPACES)),
    steps=st.integers(0, 6),
    lookback=st.integers(0, 4),
    numpy=st.booleans(),
    extra=st.booleans(),
    flags=st.sampled_from([(False, False), (True, False), (False, True)]),
    t_started=st.integers(0, 50),
)
def test_generated_episodes_round_trip(
    tmp_path_factory, seed, obs_space, act_space, steps, lookback, numpy, extra, flags, t_started
):
    ep = make_episode(
        seed,
        obs_space=obs_space,
        act_space=act_space,
        steps=steps,
        lookback=lookback,
        numpy=numpy,
        extra=extra,
        terminated=flags[0],
        truncated=flags[1],
        t_started=t_started,
    )
    (back,) = roundtrip(tmp_path_factory.mktemp("rt"), [ep])
    assert back == ep
    assert back.t == ep.t and back.t_started == ep.t_started and len(back) == steps
    assert back.get_infos() is not None
    assert back.custom_data == ep.custom_data or np.isnan(back.custom_data.get("score", 0))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(custom=st.dictionaries(st.text(max_size=8), json_values, max_size=4), info=json_values)
def test_json_values_in_custom_data_and_infos(tmp_path_factory, custom, info):
    ep = SingleAgentEpisode(
        "j",
        observations=[0, 1],
        infos=[{"v": info}, {}],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    ep.custom_data.update(custom)
    (back,) = roundtrip(tmp_path_factory.mktemp("js"), [ep])
    assert back == ep


def test_list_mode_python_types_survive(tmp_path):
    ep = SingleAgentEpisode(
        "types",
        observations=[1, 2, 3],
        actions=[True, False],
        rewards=[1, 0.5],  # mixed int/float: stored item by item
        extra_model_outputs={"c": [1 + 2j, 3j], "s": ["a", "bc"], "big": [2**80, 1]},
        len_lookback_buffer=0,
    )
    (back,) = roundtrip(tmp_path, [ep])
    assert back == ep
    assert [type(x) for x in back.get_observations()] == [int, int, int]
    assert [type(x) for x in back.get_actions()] == [bool, bool]
    assert [type(x) for x in back.get_rewards()] == [int, float]
    assert back.get_extra_model_outputs("big") == [2**80, 1]


@pytest.mark.parametrize("mode", [True, False])
def test_numpy_and_list_modes_on_request(tmp_path, mode):
    ep = make_episode(3, obs_space="dict", numpy=not mode)
    (back,) = roundtrip(tmp_path, [ep], numpy=mode)
    assert back.is_numpy is mode
    assert len(back) == len(ep)
    for ts in range(-2, len(ep)):
        want = ep.get_observations(ts, neg_index_as_lookback=True)
        got = back.get_observations(ts, neg_index_as_lookback=True)
        assert np.array_equal(got["pos"], want["pos"])
    # Both modes keep working after reading: append a step.
    back.add_env_step(
        SPACES["dict"].sample(),
        ACTION_SPACES["discrete"].sample(),
        0.0,
        extra_model_outputs={"action_logp": np.float32(0), "vf_preds": np.zeros(1)},
    )
    back.validate()


def test_memory_mapped_columns_are_copy_on_write(tmp_path):
    obs = [np.full((64, 64, 3), i, np.uint8) for i in range(100)]  # > 1 MiB
    ep = SingleAgentEpisode(
        "big", observations=obs, actions=[0] * 99, rewards=[0.0] * 99, len_lookback_buffer=0
    ).to_numpy()
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(ep)
    (back,) = read_episodes(path)
    base, chain = back.observations.data, []
    while base is not None:
        chain.append(type(base))
        base = getattr(base, "base", None)
    assert np.memmap in chain
    back.set_observations(new_data=np.zeros((64, 64, 3), np.uint8), at_indices=0)
    (again,) = read_episodes(path)
    assert again == ep  # the file did not change


def test_load_episode_joins_chunks_and_appending_works(tmp_path):
    ep = make_episode(1, steps=0, lookback=0, id_="joined", numpy=False)
    full = make_episode(1, steps=0, lookback=0, id_="joined", numpy=False)
    chunks = []
    rng = np.random.default_rng(0)
    for _chunk in range(3):
        for _ in range(4):
            kwargs = dict(
                observation=SPACES["box_f32"].sample(),
                action=1,
                reward=float(rng.normal()),
                extra_model_outputs={"action_logp": np.float32(1), "vf_preds": np.ones(1)},
            )
            ep.add_env_step(**kwargs)
            full.add_env_step(**kwargs)
        chunks.append(ep)
        ep = ep.cut(len_lookback_buffer=2)
    path = tmp_path / "ds"
    with EpisodeWriter(path) as w:
        w.write(chunks[0])
        w.write(make_episode(9))
    with EpisodeWriter(path) as w:  # append to an existing dataset
        w.write_many(chunks[1:])
    got = load_episode(path, "joined")
    assert len(got) == 12 and got.t == 12
    assert np.array_equal(np.asarray(got.get_observations()), np.asarray(full.get_observations()))
    assert got.get_rewards() == full.get_rewards()
    info = dataset_info(path)
    assert info.num_chunks == 4 and info.num_episodes == 2 and info.num_steps == 12 + 5
    assert [e.id_ for e in read_episodes(path, ids=["joined"])] == ["joined"] * 3
    assert len(list(read_episodes(path, start=-2))) == 2
    with pytest.raises(EpisodeNotFoundError):
        load_episode(path, "nope")


def test_write_refuses_unstorable_values_before_writing(tmp_path):
    path = tmp_path / "ds"

    class Thing:
        pass

    bad = [
        ("infos", SingleAgentEpisode(observations=[0], infos=[{"x": Thing()}])),
        ("custom_data", SingleAgentEpisode(observations=[0])),
        ("object", SingleAgentEpisode(observations=[np.array([Thing()], dtype=object)]).to_numpy()),
        (
            "graph",
            SingleAgentEpisode(
                observations=[gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None).sample()]
            ),
        ),
    ]
    bad[1][1].custom_data["arr"] = np.zeros(2)
    with EpisodeWriter(path) as w:
        for what, ep in bad:
            with pytest.raises(UnstorableValueError) as err:
                w.write(ep)
            assert str(err.value), what
        w.write(SingleAgentEpisode("fine", observations=[0]))
    assert [e.id_ for e in read_episodes(path)] == ["fine"]
    assert sorted(p.name for p in (path / "chunks").iterdir()) == sorted(
        p.name for p in (path / "chunks").iterdir() if not p.name.startswith(".")
    )


def test_one_writer_at_a_time_and_foreign_dirs(tmp_path):
    path = tmp_path / "ds"
    with EpisodeWriter(path):
        with pytest.raises(DatasetLockedError):
            EpisodeWriter(path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "file.txt").write_text("hi")
    with pytest.raises(NotADatasetError):
        EpisodeWriter(other)
    with pytest.raises(NotADatasetError):
        list(read_episodes(tmp_path / "missing"))


def test_writer_without_checksums(tmp_path):
    obs = [np.full((64, 64, 3), i, np.uint8) for i in range(100)]  # > 1 MiB: the sliced path
    ep = SingleAgentEpisode(
        "fast", observations=obs, actions=[0] * 99, rewards=[0.0] * 99, len_lookback_buffer=0
    ).to_numpy()
    path = tmp_path / "ds"
    with EpisodeWriter(path, checksums=False) as w:
        w.write(ep)
    (back,) = read_episodes(path, verify=True)  # nothing to verify, nothing refused
    assert back == ep
    with EpisodeWriter(path) as w:  # checksums again for the next chunk
        w.write(ep.cut())
    assert len(list(read_episodes(path, verify=True))) == 2
