"""Counts, eviction order, bad input (buffer unchanged) and get_state/set_state round trips."""

from __future__ import annotations

import gymnasium as gym
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


def _scalar_chunk(id_, values, dtype, t0=0):
    n = len(values) - 1
    return SingleAgentEpisode(
        id_,
        observations=[dtype(v) for v in values],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    ("name", "stored", "given", "values"),
    [
        ("int64 into int8 column, wraps", np.int8, np.int64, [1, 300]),
        ("int64 into int8 column, final observation wraps", np.int8, np.int64, [1, 2, -200]),
        ("uint16 into uint8 column, wraps", np.uint8, np.uint16, [1, 300]),
        ("float64 into float32 column, overflows", np.float32, np.float64, [0.0, 1e300]),
        # A same-width round trip (int8 -> uint8 -> int8) gives the values back: wraps hid.
        ("int8 into uint8 column, -1 wraps to 255", np.uint8, np.int8, [-1, 5]),
        ("uint64 into int64 column, 2**63 wraps", np.int64, np.uint64, [5, 2**63 + 5]),
    ],
)
def test_rows_whose_values_the_columns_cannot_hold_are_refused(name, stored, given, values):
    buf = EpisodeReplayBuffer(100)
    buf.add(_scalar_chunk("a", [0, 1, 2], stored))
    before = buf.get_state()
    for bad in (_scalar_chunk("b", values, given), _scalar_chunk("a", [2, *values], given, 2)):
        with pytest.raises(ValueError, match="cannot"):
            buf.add(bad)
        assert_states_equal(buf.get_state(), before)
    assert buf.get_episode_ids() == ["a"] and len(buf.get_episodes()[0]) == 2


def test_rows_of_a_wider_dtype_that_fit_are_stored_in_the_columns_dtype():
    buf = EpisodeReplayBuffer(100)
    buf.add(_scalar_chunk("x", [0.5, 1.5], np.float32))  # the column: float32
    # A float64 env continuing the episode, across calls and within one call alike.
    buf.add(_scalar_chunk("x", [1.5, 2.5], np.float64, 1))
    buf.add(
        [_scalar_chunk("y", [0.1, 0.2], np.float64), _scalar_chunk("y", [0.2, 0.3], np.float64, 1)]
    )
    assert buf.get_num_timesteps() == 4
    batch = buf.sample(8)
    assert batch["obs"].dtype == np.float32 and batch["next_obs"].dtype == np.float32


def test_infos_are_copied_in_and_out():
    data = make_episode_data(0, 3)
    added = chunk("a", data, 0, 3)
    added.get_infos(1)["nested"] = [1]  # a mutable value inside an info
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(added)
    added.get_infos(1)["nested"].append(2)  # the caller changes its chunk afterwards
    added.get_infos(2)["new"] = True
    out = buf.sample(16, include_infos=True)["infos"]
    for info in out:
        info["t"] = -1  # a learner changes a batch
    state = buf.get_state()
    state["steps"]["infos"][0]["t"] = -2  # and a snapshot
    stored = buf.get_episodes()[0].get_infos()
    assert stored[1] == {"t": 1, "nested": [1]} and "new" not in stored[2]
    assert [info["t"] for info in stored] == [0, 1, 2, 3]


@pytest.mark.parametrize("some_info", [False, True])
def test_empty_infos_of_an_added_chunk_are_not_the_buffers(some_info):
    # Empty infos were kept as the caller's own dicts: filling them later changed the buffer.
    infos = [{}, {"x": 1} if some_info else {}, {}, {}]
    added = SingleAgentEpisode(
        "a", observations=[np.zeros(2, np.float32)] * 4, actions=[0] * 3, rewards=[0.0] * 3,
        infos=infos, terminated=True, len_lookback_buffer=0,
    )  # fmt: skip
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(added)
    before = buf.get_episodes()[0].get_infos()
    added.get_infos(0)["late"] = True
    added.get_infos(-1)["late"] = True
    assert buf.get_episodes()[0].get_infos() == before
    chunk_infos = buf.sample(1, sample_episodes=True, batch_length_T=3)[0].get_infos()
    assert not any("late" in info for info in chunk_infos)
    assert all("late" not in info for info in buf.sample(32, include_infos=True)["infos"])


@pytest.mark.parametrize(
    "bad",
    [
        lambda data: chunk("a", data, 6, 7),  # a gap: "a" is stored up to t=5
        lambda data: chunk("a", make_episode_data(9, 8), 5, 7),  # another first observation
    ],
    ids=["gap", "other_first_observation"],
)
def test_a_bad_chunk_is_refused_in_either_order_even_when_its_episode_goes(bad):
    data = make_episode_data(0, 8)
    for order in (0, 1):
        buf = EpisodeReplayBuffer(10, seed=0)
        buf.add(chunk("a", data, 0, 5))
        before = buf.get_state()
        batch = [bad(data), chunk("b", make_episode_data(1, 8), 0, 8)]
        with pytest.raises(ValueError):
            buf.add(batch[::-1] if order else batch)  # "b" evicts "a" when it comes first
        assert_states_equal(buf.get_state(), before)


@pytest.mark.parametrize(
    ("stored", "given", "value"),
    [(np.float32, np.int64, 2**24 + 1), (np.int64, np.bool_, True), (np.float32, np.bool_, True)],
    ids=["int_into_float", "bool_into_int", "bool_into_float"],
)
def test_rows_of_another_kind_are_refused(stored, given, value):
    buf = EpisodeReplayBuffer(100)
    buf.add(_scalar_chunk("a", [0, 1], stored))
    with pytest.raises(ValueError, match="do not fit"):
        buf.add(_scalar_chunk("b", [value, value], given))


def test_rewards_that_overflow_float32_are_refused():
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0], actions=[0], rewards=[1e39], len_lookback_buffer=0
    )
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match="overflow"):
        buf.add(ep)
    assert buf.get_num_timesteps() == 0


def test_complex_rewards_are_refused():
    # They were stored as their real part, with only a numpy ComplexWarning.
    ep = SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1 + 2j, 3 - 4j],
        len_lookback_buffer=0,
    )
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError, match="real numbers"):
        buf.add(ep)
    assert buf.get_num_timesteps() == 0


def test_chunk_order_within_one_add_does_not_decide_refusal():
    """A continuation of an episode that an earlier chunk of the same add evicts goes with it."""
    data, new_data = make_episode_data(0, 8), make_episode_data(1, 6)
    ends = []
    for reverse in (False, True):
        buf = EpisodeReplayBuffer(10, seed=0)
        buf.add(chunk("old", data, 0, 6))
        batch = [chunk("old", data, 6, 8), chunk("new", new_data, 0, 6)]
        buf.add(batch[::-1] if reverse else batch)
        ends.append((buf.get_episode_ids(), buf.get_num_timesteps(), buf.get_added_timesteps()))
    assert ends[0] == ends[1] == (["new"], 6, 14)
    with pytest.raises(EvictedEpisodeError):  # a later add still refuses it
        buf.add(chunk("old", data, 6, 8))


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
    pair = gym.spaces.Tuple([gym.spaces.Box(-9, 9, (2,)), gym.spaces.Box(-9, 9, (2,))])
    pairs = [(np.full(2, t, np.float32), np.full(2, -t, np.float32)) for t in range(4)]

    def tuple_obs(numpy: bool) -> SingleAgentEpisode:
        ep = SingleAgentEpisode(
            "t", observations=pairs, actions=[0] * 3, rewards=[0.0] * 3,
            observation_space=pair, len_lookback_buffer=0,
        )  # fmt: skip
        return ep.to_numpy() if numpy else ep

    numpy_tuple_actions = SingleAgentEpisode(
        "u", observations=[np.zeros(2, np.float32)] * 3, actions=pairs[:2], rewards=[0.0] * 2,
        action_space=pair, len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
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
        # Nested observations are stored, but not into a buffer of flat ones (a layout
        # mismatch); equal-shaped Tuple members were once stacked into one flat row.
        ("nested observations into flat ones", [nested], ValueError),
        ("tuple observations into flat ones", [tuple_obs(numpy=False)], ValueError),
        ("numpy'd tuple observations into flat ones", [tuple_obs(numpy=True)], ValueError),
        # Nested actions are stored (session 43), but not into a buffer of flat ones.
        ("numpy'd tuple actions into flat ones", [numpy_tuple_actions], ValueError),
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
        ("a device torch does not know", {"device": "nonsense"}, RuntimeError),
    ],
)
def test_bad_sample_arguments(name, kwargs, error):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10))
    before = buf.get_state()
    with pytest.raises(error):
        buf.sample(**{"num_items": 4, **kwargs} if "batch_size_B" not in kwargs else kwargs)
    assert_states_equal(buf.get_state(), before)


@pytest.mark.parametrize("kwargs", [{}, {"batch_length_T": 2}], ids=["transitions", "sequences"])
def test_n_step_none_is_one_step_as_in_rllib(kwargs):
    # It was refused ("n_step must be an int"); RLlib's default is None.
    a, b = EpisodeReplayBuffer(100, seed=0), EpisodeReplayBuffer(100, seed=0)
    for buf in (a, b):
        buf.add(episode("a", 0, 10))
    got, want = a.sample(4, n_step=None, **kwargs), b.sample(4, **kwargs)
    assert all(np.array_equal(got[k], want[k]) for k in want if k != "infos")


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
    # The layout and the generator came along: both draw the same samples from here on.
    for kwargs in ({"n_step": 2}, {"batch_length_T": 2, "pad": True}):
        a, b = buf.sample(5, **kwargs), copy.sample(5, **kwargs)
        np.testing.assert_array_equal(a["indices"], b["indices"])
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


def _broken(state, change):
    import copy

    state = copy.deepcopy(state)
    change(state)
    return state


BROKEN_STATES = {
    # The contents were swapped in before the generator's state was read.
    "no generator state": lambda s: s.pop("rng"),
    "steps but no episodes": lambda s: s["episodes"].update(
        {k: v[:0] for k, v in s["episodes"].items()}
    ),
    "steps of an episode it does not hold": lambda s: s["steps"]["ep"].__setitem__(0, 7),
    "a missing column": lambda s: s["steps"].pop("uid"),
    "negative leaves": lambda s: s["prioritized"]["leaves"].__setitem__(0, -1.0),
    "one leaf for every step": lambda s: s["prioritized"].update(leaves=np.ones(1)),
    "a NaN alpha": lambda s: s["prioritized"].update(alpha=float("nan")),
    # Columns of one row were broadcast over every step.
    "one observation for every step": lambda s: s["steps"].update(obs=s["steps"]["obs"][:1]),
    "one action for every step": lambda s: s["steps"].update(actions=s["steps"]["actions"][:1]),
    "final observations of another shape": lambda s: s["episodes"].update(
        final_obs=s["episodes"]["final_obs"][:, :1]
    ),
    "one final observation for two episodes": lambda s: s["episodes"].update(
        final_obs=s["episodes"]["final_obs"][:1]
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_STATES))
def test_a_broken_state_is_refused_and_changes_nothing(case):
    source = PrioritizedEpisodeReplayBuffer(100, seed=1)
    source.add([episode("a", 0, 4), episode("b", 1, 3)])
    broken = _broken(source.get_state(), BROKEN_STATES[case])
    target = PrioritizedEpisodeReplayBuffer(50, seed=2)
    target.add(episode("z", 9, 5))
    before = target.get_state()
    with pytest.raises(ValueError, match="broken"):
        target.set_state(broken)
    assert_states_equal(target.get_state(), before)
    assert target.get_episode_ids() == ["z"]


@pytest.mark.parametrize(
    ("name", "kwargs", "prioritized"),
    [
        ("n_step", {}, False),
        ("obs", {"batch_length_T": 2}, False),
        ("mask", {"batch_length_T": 2}, False),
        ("weights", {}, True),
    ],
)
def test_an_extra_output_named_like_a_batch_column_is_refused(name, kwargs, prioritized):
    # It overwrote the column (an RLlib-style "n_step" extra replaced the steps taken).
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(100, seed=0)
    ep = SingleAgentEpisode(
        "a",
        observations=[np.zeros(2, np.float32)] * 5,
        actions=[0] * 4,
        rewards=[1.0] * 4,
        extra_model_outputs={name: [7.0] * 4},
        len_lookback_buffer=0,
    )
    buf.add(ep)
    before = buf.get_state()
    with pytest.raises(ValueError, match=f"extra-model-output '{name}' has the name"):
        buf.sample(3, include_extra_model_outputs=True, **kwargs)
    assert_states_equal(buf.get_state(), before)
    buf.sample(3, **kwargs)  # without the extras: sampled as ever
