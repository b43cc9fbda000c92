"""Columns whose items need their space to stack: reads, widths and refusals (a hunt's cases)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

NESTED_READS = {
    # (items, fill): a filler that does not nest like the items, padded on the left
    "dict items": ([{"a": 1, "b": 2.5}, {"a": 3, "b": 4.5}], 0),
    "tuple items": ([(0, 1.0), (1, 2.0)], 0),
    "dict extra outputs": ([{"h": 0.0, "c": 10.0}, {"h": 1.0, "c": 11.0}], 0.0),
}


@pytest.mark.parametrize("case", list(NESTED_READS))
def test_a_left_filler_that_nests_otherwise_is_refused_not_truncated(case):
    # join() zipped leaf lists of different lengths: [0, 0, 1] with the float leaf gone.
    items, fill = NESTED_READS[case]
    buf = InfiniteLookbackBuffer(list(items))
    buf.finalize()
    with pytest.raises(ValueError, match="cannot pad"):
        buf.get(slice(-2, 1), neg_index_as_lookback=True, fill=fill)
    with pytest.raises(ValueError, match="cannot pad"):  # on the right it always raised
        buf.get(slice(0, 4), fill=fill)


def test_a_text_column_is_as_wide_as_its_space():
    space = gym.spaces.Text(5)
    for numpy_at in ("after steps", "after reset"):
        ep = SingleAgentEpisode(observation_space=space, action_space=space)
        ep.add_env_reset("ab")
        if numpy_at == "after reset":
            ep.to_numpy()
        ep.add_env_step("abc", "a", 1.0)
        if numpy_at == "after steps":
            ep.to_numpy()
        ep.add_env_step("hello", "ab", 1.0)  # valid strings, longer than any seen before
        ep.set_observations(new_data="hello", at_indices=0)
        assert ep.get_observations().tolist() == ["hello", "abc", "hello"]
        assert ep.get_actions().tolist() == ["a", "ab"]
        assert ep.observations.store.leaf_views()[0].dtype == np.dtype("<U5")


def test_text_fill_is_a_string_in_both_modes():
    ep = SingleAgentEpisode(observation_space=gym.spaces.Text(5))
    ep.add_env_reset("ab")
    ep.add_env_step("abc", 0, 1.0)
    listed = ep.get_observations(slice(0, 4), fill="")
    assert listed == ["ab", "abc", "", ""]
    with pytest.raises(ValueError, match="give a string"):
        ep.get_observations(slice(0, 4), fill=0)
    ep.to_numpy()
    assert ep.get_observations(slice(0, 4), fill="").tolist() == listed
    with pytest.raises(ValueError, match="give a string"):
        ep.get_observations(slice(0, 4), fill=0)


UNSTACKABLE = {
    "sequence, equal lengths": (gym.spaces.Sequence(gym.spaces.Discrete(3)), [(0, 1), (1, 2)]),
    "sequence, other lengths": (gym.spaces.Sequence(gym.spaces.Discrete(3)), [(0,), (1, 2)]),
    "one-of, one sub-space": (
        gym.spaces.OneOf([gym.spaces.Discrete(2), gym.spaces.Discrete(3)]),
        [(0, 1), (0, 0)],
    ),
    "sequence inside a dict": (
        gym.spaces.Dict({"s": gym.spaces.Sequence(gym.spaces.Discrete(3))}),
        [{"s": (0, 1)}, {"s": (1, 2)}],
    ),
}


@pytest.mark.parametrize("case", list(UNSTACKABLE))
def test_spaces_without_a_fixed_layout_never_numpy(case):
    # Equal-length items used to stack, and then refuse the next, longer, valid item.
    space, observations = UNSTACKABLE[case]
    for steps in (len(observations) - 1, 0):
        ep = SingleAgentEpisode(observation_space=space)
        ep.add_env_reset(observations[0])
        for obs in observations[1 : steps + 1]:
            ep.add_env_step(obs, 0, 1.0)
        before = ep.get_state()
        with pytest.raises(ValueError, match="no fixed layout"):
            ep.to_numpy()
        assert not ep.is_numpy and ep.get_state() == before


def test_concat_takes_a_box_row_given_as_a_list_as_the_same_observation():
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    for numpy_first in (True, False):
        first = SingleAgentEpisode(observation_space=box, len_lookback_buffer=0)
        first.add_env_reset([0.0, 0.1])
        first.add_env_step([0.2, 0.3], 0, 1.0)
        second = SingleAgentEpisode(
            first.id_,
            observation_space=box,
            observations=[[0.2, 0.3]],
            t_started=1,
            len_lookback_buffer=0,
        )
        second.add_env_step([0.4, 0.5], 1, 1.0)
        (first if numpy_first else second).to_numpy()
        first.concat_episode(second)
        assert np.asarray(first.get_observations(), np.float64).tolist() == [
            [0.0, 0.1],
            [0.2, 0.3],
            [0.4, 0.5],
        ]


def test_mixed_dict_keys_are_a_value_error_naming_the_column():
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), 1: gym.spaces.Discrete(2)})
    ep = SingleAgentEpisode(observation_space=space)
    ep.add_env_reset({"a": 0, 1: 1})
    with pytest.raises(ValueError, match="observations cannot be stacked"):
        ep.to_numpy()
    assert not ep.is_numpy


def test_to_numpy_keeps_a_list_mode_string_longer_than_its_text_space():
    # List mode checks no space, so a longer string may be there; to_numpy must not cut it
    # (getters give the same values before and after).
    ep = SingleAgentEpisode(
        observation_space=gym.spaces.Text(3), action_space=gym.spaces.Discrete(2)
    )
    ep.add_env_reset("ab")
    ep.add_env_step("abcdef", 0, 1.0)
    before = ep.get_observations()
    ep.to_numpy()
    assert ep.get_observations().tolist() == before == ["ab", "abcdef"]
