"""Counts, eviction order, bad input (buffer unchanged) and get_state/set_state round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import (
    EmptyBufferError,
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)

from ._episodes import chunk, chunk_streams, episode, make_episode_data
from .reference import assert_states_equal


def test_counts_and_eviction_order():
    buf = EpisodeReplayBuffer(25)
    for i, length in enumerate([10, 5, 8]):
        buf.add(episode(f"e{i}", i, length))
    assert (buf.get_num_timesteps(), buf.get_num_episodes()) == (23, 3)
    buf.add(episode("e3", 3, 6))  # 29 > 25: the oldest whole episode goes
    assert buf.get_episode_ids() == ["e1", "e2", "e3"]
    assert (buf.get_num_timesteps(), buf.get_added_timesteps()) == (19, 29)
    assert buf.get_num_episodes_evicted() == 1
    buf.add(episode("big", 4, 40))  # larger than capacity: everything else goes, it stays
    assert buf.get_episode_ids() == ["big"] and len(buf) == 40


def test_continuing_chunks_extend_their_episode():
    data = make_episode_data(0, 9)
    buf = EpisodeReplayBuffer(100)
    buf.add([chunk("a", data, 0, 4), episode("b", 1, 3)])
    buf.add(chunk("a", data, 4, 9, terminated=True))
    assert buf.get_num_episodes() == 2 and len(buf) == 12
    got = buf.get_transitions(buf.locate("a", [3, 8]), n_step=2, gamma=1.0)
    assert got["next_obs"][:, 1].tolist() == [5.0, 9.0]  # across the chunk border
    assert got["terminateds"].tolist() == [False, True]


def test_continuation_border_compares_nan_observations_as_equal():
    nan_first = make_episode_data(0, 4)
    nan_first["obs"][2] = np.array([np.nan, 2.0], np.float32)  # the border observation
    buf = EpisodeReplayBuffer(100)
    buf.add([chunk("a", nan_first, 0, 2), chunk("b", nan_first, 0, 2)])
    buf.add(chunk("a", nan_first, 2, 4))  # the same NaN on both sides of the border
    assert len(buf) == 6
    with pytest.raises(ValueError, match="differs"):
        buf.add(chunk("b", make_episode_data(0, 4), 2, 4))  # 0.0 where the buffer holds NaN


def _bad_cases():
    data = make_episode_data(0, 6)
    wide = SingleAgentEpisode(
        "w",
        observations=[np.zeros(3, np.float32)] * 2,
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    nested = SingleAgentEpisode(
        "n", observations=[{"a": 1}, {"a": 2}], actions=[0], rewards=[0.0], len_lookback_buffer=0
    )
    other_keys = SingleAgentEpisode(
        "k",
        observations=[np.zeros(2, np.float32)] * 2,
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    other = make_episode_data(7, 6)  # observations [7, t] where "a" has [0, t]
    return [
        ("gap in time", [chunk("a", data, 4, 6)], ValueError),
        ("continues with another observation", [chunk("a", other, 2, 4)], ValueError),
        (
            "new episode continued with another observation in the same add",
            [chunk("n", data, 0, 2), chunk("n", other, 2, 4)],
            ValueError,
        ),
        ("continues a done episode", [chunk("d", data, 3, 4)], ValueError),
        ("continues an evicted episode", [chunk("old", data, 2, 3)], EvictedEpisodeError),
        ("observation shape differs", [wide], ValueError),
        ("nested observations", [nested], TypeError),
        ("extra-model-output keys differ", [other_keys], ValueError),
        ("not an episode", ["x"], TypeError),
        ("a string", "abc", TypeError),
        ("not iterable", 3, TypeError),
        ("a good chunk then a bad one", [episode("ok", 5, 3), wide], ValueError),
    ]


@pytest.mark.parametrize(("name", "chunks", "error"), _bad_cases(), ids=lambda c: str(c)[:30])
def test_bad_input_leaves_buffer_unchanged(name, chunks, error):
    data = make_episode_data(0, 6)
    buf = PrioritizedEpisodeReplayBuffer(12, seed=0)
    buf.add(chunk("old", data, 0, 2))
    buf.add(
        [episode("filler", 1, 10), chunk("a", data, 0, 2), chunk("d", data, 0, 3, terminated=True)]
    )
    assert "old" not in buf.get_episode_ids()
    before = buf.get_state()
    with pytest.raises(error):
        buf.add(chunks)
    assert_states_equal(buf.get_state(), before)


@pytest.mark.parametrize(
    ("name", "kwargs", "error"),
    [
        ("n_step 0", {"n_step": 0}, ValueError),
        ("n_step range empty", {"n_step": (3, 3)}, ValueError),
        ("num_items and batch_size_B", {"num_items": 2, "batch_size_B": 2}, ValueError),
        ("negative lookback", {"lookback": -1, "batch_length_T": 2}, ValueError),
        ("sequence longer than every episode", {"batch_length_T": 11}, EmptyBufferError),
        ("batch size 0", {"num_items": 0}, ValueError),
        ("gamma above 1", {"gamma": 1.5}, ValueError),
        ("gamma NaN", {"gamma": float("nan")}, ValueError),
        ("n_step with sequences", {"batch_length_T": 2, "n_step": 3}, ValueError),
        ("float n_step", {"n_step": 2.0}, ValueError),
        ("n_step range with a step", {"n_step": range(1, 5, 2)}, ValueError),
        ("n_step range empty", {"n_step": range(3, 3)}, ValueError),
        ("n_step tuple of three", {"n_step": (1, 2, 3)}, ValueError),
    ],
)
def test_bad_sample_arguments(name, kwargs, error):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10))
    before = buf.get_state()
    with pytest.raises(error):
        buf.sample(**{"num_items": 4, **kwargs} if "batch_size_B" not in kwargs else kwargs)
    assert_states_equal(buf.get_state(), before)


def test_sampling_an_empty_buffer_is_an_error():
    with pytest.raises(EmptyBufferError, match="empty"):
        EpisodeReplayBuffer(10).sample(4)


@given(stream=chunk_streams(), capacity=st.integers(5, 40), prioritized=st.booleans())
def test_state_round_trip(stream, capacity, prioritized):
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(capacity, seed=5)
    try:
        buf.add(stream)
    except EvictedEpisodeError:
        return
    buf.sample(3)
    state = buf.get_state()
    copy = cls(1)
    copy.set_state(state)
    assert_states_equal(copy.get_state(), state)
    # Same answers for every stored item.
    uids = state["steps"]["uid"]
    if len(uids):
        a, b = buf.get_transitions(uids, n_step=2), copy.get_transitions(uids, n_step=2)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
        assert copy.sample(4)["obs"].shape == (4, 2)


def test_set_state_refuses_garbage():
    with pytest.raises(ValueError, match="version"):
        EpisodeReplayBuffer(10).set_state({"version": 99})
