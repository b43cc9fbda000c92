"""What a numpy'd column takes: list-valued items of array spaces, and the misfit rules for
setters as for appends (a value the column cannot hold is a ValueError, nothing changed)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode


def _rows_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.zeros(2), np.ones(2), np.ones(2)],
        actions=[0, 1],
        rewards=[1, 2],
        extra_model_outputs={"mask": [True, False]},
        len_lookback_buffer=0,
    ).to_numpy()


def _int8_rows() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([np.zeros(2, np.int8), np.zeros(2, np.int8)])
    buf.finalize()
    return buf


def _text_episode() -> SingleAgentEpisode:
    ep = SingleAgentEpisode()  # no Text space: the strings seen decide the column's width
    ep.add_env_reset("ab")
    ep.add_env_step("cd", 0, 1.0)
    return ep.to_numpy()


# (case, make the object, write a value it cannot hold, read what must not change)
MISFITS = {
    "a scalar set into rows of two (was broadcast)": (
        _rows_episode,
        lambda ep: ep.set_observations(new_data=5.0, at_indices=0),
        lambda ep: ep.get_observations().tolist(),
    ),
    "0.5 set into int rewards (was truncated to 0)": (
        _rows_episode,
        lambda ep: ep.set_rewards(new_data=0.5, at_indices=0),
        lambda ep: ep.get_rewards().tolist(),
    ),
    "an int16 300 set into int8 rows (wrapped to 44)": (
        _int8_rows,
        lambda buf: buf.set(np.array([300, 1], np.int16), at_indices=0),
        lambda buf: buf.get().tolist(),
    ),
    "a batch of (2, 1) rows set into (2,) rows (was broadcast)": (
        _int8_rows,
        lambda buf: buf.set(np.array([[7], [8]], np.int8)),
        lambda buf: buf.get().tolist(),
    ),
    "0.5 appended to a bool column (stored True)": (
        _rows_episode,
        lambda ep: ep.add_env_step(np.ones(2), 0, 1, extra_model_outputs={"mask": 0.5}),
        lambda ep: (len(ep), ep.get_extra_model_outputs("mask").tolist()),
    ),
    "5 appended to a bool column (stored True)": (
        _rows_episode,
        lambda ep: ep.add_env_step(np.ones(2), 0, 1, extra_model_outputs={"mask": 5}),
        lambda ep: (len(ep), ep.get_extra_model_outputs("mask").tolist()),
    ),
    "a longer string appended to a <U2 column (cut to 'he')": (
        _text_episode,
        lambda ep: ep.add_env_step("hello", 0, 1.0),
        lambda ep: (len(ep), ep.get_observations().tolist()),
    ),
    "a longer string set into a <U2 column": (
        _text_episode,
        lambda ep: ep.set_observations(new_data="hello", at_indices=0),
        lambda ep: ep.get_observations().tolist(),
    ),
}


@pytest.mark.parametrize("case", list(MISFITS))
def test_values_a_numpy_column_cannot_hold_are_refused(case):
    make, write, read = MISFITS[case]
    target = make()
    before = read(target)
    with pytest.raises(ValueError, match="does not fit|cannot be stored"):
        write(target)
    assert read(target) == before


def test_bools_count_as_discrete_values_in_one_hot_slices():
    # A slice read refused bools ("one-hot needs integer values"); an index list took them.
    for numpy in (False, True):
        ep = SingleAgentEpisode(action_space=gym.spaces.Discrete(2))
        ep.add_env_reset(0)
        ep.add_env_step(1, True, 1.0)
        ep.add_env_step(2, False, 1.0)
        if numpy:
            ep.to_numpy()
        by_list = np.asarray(ep.get_actions([0, 1], one_hot_discrete=True))
        by_slice = np.asarray(ep.get_actions(slice(0, 2), one_hot_discrete=True))
        assert by_slice.tolist() == by_list.tolist() == [[0.0, 1.0], [1.0, 0.0]]


# (case, space, items recorded as Python lists, a list item appended after to_numpy)
LIST_ITEMS = {
    "Box": (
        gym.spaces.Box(-5, 5, (2,), np.float32),
        [[0.0, 0.5], [1.0, 2.0], [2.0, 2.0]],
        [3.0, 1.0],
    ),
    "MultiDiscrete": (gym.spaces.MultiDiscrete([3, 3]), [[0, 1], [2, 0], [1, 1]], [2, 2]),
    "MultiBinary": (gym.spaces.MultiBinary(3), [[0, 1, 1], [1, 0, 0], [1, 1, 1]], [0, 0, 1]),
    "Box in a Dict": (
        gym.spaces.Dict({"pos": gym.spaces.Box(-5, 5, (2,)), "n": gym.spaces.Discrete(3)}),
        [{"pos": [0.0, 0.5], "n": 1}, {"pos": [1.0, 2.0], "n": 2}, {"pos": [2.0, 2.0], "n": 0}],
        {"pos": [3.0, 1.0], "n": 1},
    ),
}


@pytest.mark.parametrize("case", list(LIST_ITEMS))
def test_list_items_of_array_spaces_are_rows_after_to_numpy(case):
    # They were stacked component by component: slices read back transposed, one-hot mixed
    # components across steps, and list items appended later were refused.
    space, items, later = LIST_ITEMS[case]
    ep = SingleAgentEpisode(observation_space=space, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(items[0])
    for item in items[1:]:
        ep.add_env_step(item, 0, 1.0)
    as_list = ep.get_observations(slice(0, 2))
    filled = ep.get_observations(slice(-2, 2), neg_index_as_lookback=True, fill=0.0)
    ep.to_numpy()
    got = ep.get_observations(slice(0, 2))
    if isinstance(space, gym.spaces.Dict):
        assert got["pos"].tolist() == [x["pos"] for x in as_list]
        assert got["n"].tolist() == [x["n"] for x in as_list]
    else:
        assert got.tolist() == as_list
        numpy_filled = ep.get_observations(slice(-2, 2), neg_index_as_lookback=True, fill=0.0)
        assert np.asarray(numpy_filled).tolist() == np.asarray(filled).tolist()
    ep.add_env_step(later, 0, 1.0)
    ep.set_observations(new_data=later, at_indices=0)
    last = ep.get_observations(-1)
    first = ep.get_observations(0)
    for read in (last, first):
        if isinstance(space, gym.spaces.Dict):
            assert read["pos"].tolist() == later["pos"] and int(read["n"]) == later["n"]
        else:
            assert read.tolist() == later


def test_multidiscrete_list_actions_one_hot_the_same_in_both_modes():
    ep = SingleAgentEpisode(action_space=gym.spaces.MultiDiscrete([3, 3]))
    ep.add_env_reset(0)
    for action in ([0, 1], [2, 0], [1, 1]):
        ep.add_env_step(1, action, 1.0)
    before = np.asarray(ep.get_actions(slice(0, 3), one_hot_discrete=True)).tolist()
    ep.to_numpy()
    assert np.asarray(ep.get_actions(slice(0, 3), one_hot_discrete=True)).tolist() == before
    assert before[1] == [0, 0, 1, 1, 0, 0]
