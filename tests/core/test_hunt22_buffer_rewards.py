"""A numpy'd rewards column takes its own reads back, and padded reads keep the column's dtype.

- contract §3.7: a finalized buffer takes its own reads back; the rewards column's unbounded
  scalar Box (unchecked by ``add_env_step``) takes NaN and 0-d arrays, while every other space
  refuses what ``add_env_step`` refuses.
- contract §3.5 / deviation list-fill-dtype: fillers take the column's dtype where ``fill``
  keeps its value there, for int, index-list and slice reads alike.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

BIG = 2**53 + 1
UNBOUNDED = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)


def _nan_rewards_episode() -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()
    ep.add_env_step(2.0, 0, float("nan"))  # rewards are recorded unchecked
    ep.add_env_step(3.0, 0, np.array(4.0))  # a 0-d float64 array
    return ep


# ------------------------------------------------------------------ set takes its own reads back
READ_BACK = {
    "whole read": lambda ep: ep.set_rewards(new_data=ep.get_rewards()),
    "slice read": lambda ep: ep.set_rewards(
        new_data=ep.get_rewards(slice(0, 3)), at_indices=slice(0, 3)
    ),
    "list of items": lambda ep: ep.set_rewards(new_data=list(ep.get_rewards())),
    "nan at an index": lambda ep: ep.set_rewards(new_data=float("nan"), at_indices=1),
    "numpy nan at an index": lambda ep: ep.set_rewards(new_data=np.float32("nan"), at_indices=1),
    "0-d float64 array": lambda ep: ep.set_rewards(new_data=np.array(4.0), at_indices=2),
    "0-d nan array": lambda ep: ep.set_rewards(new_data=np.array(np.nan), at_indices=1),
    "0-d int array": lambda ep: ep.set_rewards(new_data=np.array(4), at_indices=2),
}


@pytest.mark.parametrize("write", READ_BACK.values(), ids=READ_BACK.keys())
def test_numpyd_rewards_take_their_own_reads_back(write):
    ep = _nan_rewards_episode()
    write(ep)
    rewards = ep.get_rewards()
    assert rewards[0] == 1.0 and np.isnan(rewards[1]) and rewards[2] == 4.0


def test_buffer_with_the_rewards_space_takes_nan_in_batches_and_items():
    buf = InfiniteLookbackBuffer([0.0, 1.0, 2.0], space=UNBOUNDED)
    buf.finalize()
    buf.set(np.array([np.nan, 5.0, np.nan]))
    buf.set(float("nan"), at_indices=1)
    assert np.isnan(buf.get()).tolist() == [True, True, True]


# ------------------------------------------------------------- real refusals are kept
REWARD_REFUSALS = {
    "wrong shape": np.array([1.0, 2.0]),
    "a string": "x",
    "beyond any float": 10**400,
    "complex": 1 + 2j,
    "None": None,
}


@pytest.mark.parametrize("value", REWARD_REFUSALS.values(), ids=REWARD_REFUSALS.keys())
def test_rewards_still_refuse_what_the_column_cannot_hold(value):
    ep = _nan_rewards_episode()
    with pytest.raises(ValueError):
        ep.set_rewards(new_data=value, at_indices=0)
    assert ep.get_rewards()[0] == 1.0


OBSERVATION_SPACES = {
    "finite vector": (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), np.zeros(2, np.float32)),
    "finite scalar": (gym.spaces.Box(-1.0, 1.0, (), np.float32), np.float32(0.0)),
    "unbounded vector": (
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        np.zeros(2, np.float32),
    ),
}


def _obs_episode(space, first) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observation_space=space, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(first)
    ep.add_env_step(first, 0, 1.0)
    return ep.to_numpy()


@pytest.mark.parametrize("space, first", OBSERVATION_SPACES.values(), ids=OBSERVATION_SPACES.keys())
def test_nan_observations_are_refused_by_set_as_by_add_env_step(space, first):
    nan = np.full(space.shape, np.nan, np.float32)
    ep = _obs_episode(space, first)
    with pytest.raises(ValueError, match="observation space"):
        ep.add_env_step(nan, 0, 1.0)
    for kwargs in ({"at_indices": 0}, {"at_indices": slice(0, 1)}):
        data = nan if kwargs["at_indices"] == 0 else nan[None]
        with pytest.raises(ValueError, match="not in the"):
            ep.set_observations(new_data=data, **kwargs)
    assert not np.isnan(ep.get_observations()).any()


def test_values_outside_a_finite_box_are_still_refused():
    space, first = OBSERVATION_SPACES["finite vector"]
    ep = _obs_episode(space, first)
    with pytest.raises(ValueError, match="not in the"):
        ep.set_observations(new_data=np.full(2, 2.0, np.float32), at_indices=0)
    with pytest.raises(ValueError):
        ep.set_observations(new_data=np.zeros(3, np.float32), at_indices=0)
    assert ep.get_observations().tolist() == [[0.0, 0.0], [0.0, 0.0]]


# ------------------------------------------------------------- fillers in the column's dtype
def _int_rewards(numpy: bool = True) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=[BIG, 3], len_lookback_buffer=0
    )
    return ep.to_numpy() if numpy else ep


PADDED_READS = {
    "index list": ([0, 5], {}, [BIG, 0]),
    "slice": (slice(0, 4), {}, [BIG, 3, 0, 0]),
    "index list into the lookback": ([-1, 0], {"neg_index_as_lookback": True}, [0, BIG]),
    "slice into the lookback": (slice(-2, 1), {"neg_index_as_lookback": True}, [0, 0, BIG]),
    "backwards slice": (slice(3, None, -1), {}, [0, 0, 3, BIG]),
}


@pytest.mark.parametrize("index, kwargs, want", PADDED_READS.values(), ids=PADDED_READS.keys())
def test_padded_reads_of_int_rewards_keep_int64(index, kwargs, want):
    out = _int_rewards().get_rewards(index, fill=0, **kwargs)
    assert out.dtype == np.int64
    assert out.tolist() == want
    listed = _int_rewards(numpy=False).get_rewards(index, fill=0, **kwargs)
    assert [int(v) for v in listed] == want


def test_int_read_filler_of_int_rewards_is_int64():
    filler = _int_rewards().get_rewards(5, fill=0)
    assert filler.dtype == np.int64 and int(filler) == 0


@pytest.mark.parametrize("fill, want", [(0, [True, False]), (1, [True, True])])
def test_padded_reads_of_bool_rewards_stay_bool(fill, want):
    ep = SingleAgentEpisode(
        "b", observations=[0.0, 1.0], actions=[0], rewards=[True], len_lookback_buffer=0
    ).to_numpy()
    for index in ([0, 3], slice(0, 2)):
        out = ep.get_rewards(index, fill=fill)
        assert out.dtype == np.bool_ and out.tolist() == want


@pytest.mark.parametrize("fill", [0.5, float("nan")])
def test_a_fill_ints_cannot_hold_promotes_alike_in_list_and_slice_reads(fill):
    ep = _int_rewards()
    listed, sliced = ep.get_rewards([0, 1, 2], fill=fill), ep.get_rewards(slice(0, 3), fill=fill)
    assert listed.dtype == sliced.dtype == np.float64
    np.testing.assert_array_equal(listed, sliced)
    np.testing.assert_array_equal(listed[2:], [fill])


@pytest.mark.parametrize(
    "rewards, space_dtype",
    [([1.0], np.float32), (np.array([1.0], np.float16), np.float32), ([1.0], np.float64)],
    ids=["float64-under-float32", "float16-under-float32", "float64-under-float64"],
)
def test_float_fillers_join_as_in_list_mode(rewards, space_dtype):
    """A float filler is joined as numpy joins it: list and numpy'd reads give the same values
    (fill=0.1 rounded by a float32 space, not again by a narrower column)."""
    space = gym.spaces.Box(-np.inf, np.inf, (), space_dtype)
    listed = SingleAgentEpisode(
        "c", observations=[0.0, 1.0], actions=[0], rewards=list(rewards),
        len_lookback_buffer=0,
    )  # fmt: skip
    listed.rewards.space = space
    numpyd = SingleAgentEpisode.from_state(listed.get_state()).to_numpy()
    numpyd.rewards.space = space
    for index in ([0, 1], slice(0, 2)):
        want = np.asarray(listed.get_rewards(index, fill=0.1), dtype=np.float64)
        got = numpyd.get_rewards(index, fill=0.1)
        assert got.astype(np.float64).tolist() == want.tolist(), index


def test_nested_column_fillers_take_each_leafs_dtype():
    space = gym.spaces.Dict(
        {
            "a": gym.spaces.Box(-np.inf, np.inf, (), np.float32),
            "b": gym.spaces.Box(-1.0, 1.0, (), np.float32),
        }
    )
    buf = InfiniteLookbackBuffer([{"a": np.int64(BIG), "b": np.float32(0.5)}], space=space)
    buf.finalize()
    for index in ([0, 1], slice(0, 2)):
        out = buf.get(index, fill=0)
        assert out["a"].dtype == np.int64 and out["a"].tolist() == [BIG, 0]
        assert out["b"].dtype == np.float32 and out["b"].tolist() == [0.5, 0.0]


def test_int32_actions_of_a_discrete_space_pad_as_int32():
    buf = InfiniteLookbackBuffer([np.int32(1), np.int32(0)], space=gym.spaces.Discrete(3))
    buf.finalize()
    assert buf.get([0, 4], fill=-1).dtype == np.int32
    assert buf.get(slice(0, 4), fill=2).tolist() == [1, 0, 2, 2]
    # One-hot fillers stay float32 zero-hot vectors.
    assert buf.get([0, 4], fill=0, one_hot_discrete=True).tolist() == [[0, 1, 0], [0, 0, 0]]


def test_the_space_still_checks_the_fill_first():
    with pytest.raises(ValueError, match="fill="):
        _int_rewards().get_rewards([0, 5], fill="1")


# ------------------------------------------------------------- vector rewards (items outside)
def test_vector_rewards_read_with_space_fillers_in_list_mode_and_refuse_stacking_numpyd():
    rewards = [np.array([1.0, 10.0]), np.array([2.0, 20.0])]
    ep = SingleAgentEpisode(
        "v", observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=rewards, len_lookback_buffer=0
    )
    listed = ep.get_rewards([-1, 0], neg_index_as_lookback=True, fill=0.0)
    assert listed[0].shape == () and listed[1].tolist() == [1.0, 10.0]
    ep.to_numpy()
    with pytest.raises(ValueError, match="space Box"):
        ep.get_rewards([-1, 0], neg_index_as_lookback=True, fill=0.0)
