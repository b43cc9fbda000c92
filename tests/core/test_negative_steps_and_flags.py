"""Slices with a negative step (getters and setters), flag types, and removed RLlib methods."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

# Storage [10, 11 | 12, 13, 14, 15]: lookback 2, so ts 0..3 hold 12..15.
READS = [
    ("explicit_bounds", slice(3, 1, -1), False, None, [15, 14]),
    ("into_the_lookback", slice(1, -3, -1), True, None, [13, 12, 11, 10]),
    ("default_bounds_stop_after_ts0", slice(None, None, -1), False, None, [15, 14, 13, 12]),
    ("step_two", slice(None, None, -2), False, None, [15, 13]),
    ("from_the_end", slice(-1, -3, -1), False, None, [15, 14]),
    ("clipped_right", slice(9, 2, -1), False, None, [15]),
    ("filled_right", slice(5, 2, -1), False, 0, [0, 0, 15]),
    ("filled_left", slice(0, -5, -1), True, 0, [12, 11, 10, 0, 0]),
    ("empty", slice(1, 3, -1), False, None, []),
]


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("name,index,neg,fill,expected", READS, ids=[r[0] for r in READS])
def test_negative_step_reads(name, index, neg, fill, expected, mode):
    buf = InfiniteLookbackBuffer([10, 11, 12, 13, 14, 15], lookback=2)
    if mode == "numpy":
        buf.finalize()
    got = buf.get(index, neg_index_as_lookback=neg, fill=fill)
    assert list(np.asarray(got).tolist()) == expected


WRITES = [
    ("issue_example", slice(3, 1, -1), True, [-1, -4], [10, 11, 12, 13, -4, -1]),
    ("whole_visible_reversed", slice(None, None, -1), False, [4, 3, 2, 1], [10, 11, 1, 2, 3, 4]),
    ("into_the_lookback", slice(0, -3, -1), True, [7, 8, 9], [9, 8, 7, 13, 14, 15]),
]


@pytest.mark.parametrize("mode", ["list", "numpy"])
@pytest.mark.parametrize("name,index,neg,values,expected", WRITES, ids=[w[0] for w in WRITES])
def test_negative_step_writes(name, index, neg, values, expected, mode):
    buf = InfiniteLookbackBuffer([10, 11, 12, 13, 14, 15], lookback=2)
    if mode == "numpy":
        buf.finalize()
    buf.set(values, at_indices=index, neg_index_as_lookback=neg)
    assert np.asarray(buf.data).tolist() == expected


def test_episode_setters_take_negative_steps():
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3], actions=[0, 1, 2], rewards=[0.0] * 3, len_lookback_buffer=1
    )
    ep.set_actions(new_data=[9, 8], at_indices=slice(1, -1, -1), neg_index_as_lookback=True)
    assert ep.get_actions() == [8, 9] and ep.get_actions(-1, neg_index_as_lookback=True) == 0


@pytest.mark.parametrize("flag", ["yes", 1, None, 0.0, np.int64(1)])
@pytest.mark.parametrize("which", ["terminated", "truncated"])
def test_flags_must_be_bools_and_nothing_changes(flag, which):
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    before = ep.get_state()
    with pytest.raises(TypeError, match=f"{which} must be a bool"):
        ep.add_env_step(1, 0, 0.0, **{which: flag})
    assert SingleAgentEpisode.from_state(before) == ep
    with pytest.raises(TypeError, match=f"{which} must be a bool"):
        SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[0.0], **{which: flag})


@pytest.mark.parametrize("flag", [True, np.True_, np.bool_(True)])
def test_numpy_bools_are_flags(flag):
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 0.0, terminated=flag)
    assert ep.is_terminated is True


@pytest.mark.parametrize("method", ["add_temporary_timestep_data", "get_temporary_timestep_data"])
def test_temporary_timestep_data_points_to_custom_data(method):
    with pytest.raises(ValueError, match="custom_data"):
        getattr(SingleAgentEpisode(), method)("key")


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_out_of_space_errors_are_plain_value_errors(mode):
    ep = SingleAgentEpisode(
        observation_space=gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        action_space=gym.spaces.Discrete(2),
    )
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.to_numpy()
    with pytest.raises(ValueError) as caught:
        ep.add_env_step(np.full(2, 5.0, np.float32), 0, 0.0)
    # The error's class is public: users catch ValueError, tracebacks name no private type.
    assert type(caught.value) is ValueError
    assert len(ep) == 0
