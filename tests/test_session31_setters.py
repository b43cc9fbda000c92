"""A setter takes any sequence of items (a deque, a ``UserList``, a range) as a list of them.

``new_data`` for a slice or a list of indices that was no list went through ``np.asarray`` as
a "batched struct", which made its items one dtype: ``1`` beside ``"a"`` became ``"1"``,
``True`` beside ``2.5`` became ``1.0``, ints became ``np.int64``, and a numpy'd Text column
took the int ``1`` as the text ``"1"`` (refused when given in a list). Contract §4.2 takes any
other sequence as the list of its items, and §3.7 stores an object column's values as given.
"""

from __future__ import annotations

import collections
import warnings

import gymnasium as gym
import pytest

from episodes import SingleAgentEpisode

SEQUENCES = {
    "deque": collections.deque,
    "UserList": collections.UserList,
}


def _extras_episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[0.0, 1.0],
        extra_model_outputs={"x": [None, "note"]},
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


def _typed(values):
    return [(type(value), value) for value in values]


@pytest.mark.parametrize("numpy", [False, True], ids=["list mode", "numpy'd object column"])
@pytest.mark.parametrize("kind", sorted(SEQUENCES))
@pytest.mark.parametrize("at", [slice(0, 2), [0, 1]], ids=["slice", "index list"])
def test_a_sequence_of_items_keeps_its_values_as_a_list_does(kind, numpy, at):
    for items in ([1, "a"], [True, 2.5]):
        ep = _extras_episode(numpy)
        ep.set_extra_model_outputs(key="x", new_data=SEQUENCES[kind](items), at_indices=at)
        assert _typed(ep.get_extra_model_outputs("x")) == _typed(items)


def test_a_range_is_a_list_of_its_python_ints():
    ep = _extras_episode(numpy=False)
    ep.set_extra_model_outputs(key="x", new_data=range(5, 7), at_indices=slice(0, 2))
    assert _typed(ep.get_extra_model_outputs("x")) == [(int, 5), (int, 6)]


@pytest.mark.parametrize("kind", sorted(SEQUENCES))
def test_a_numpy_text_column_refuses_an_int_in_any_sequence(kind):
    ep = SingleAgentEpisode(observation_space=gym.spaces.Text(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep.add_env_reset("ab")
        ep.add_env_step("cd", 0, 0.0)
        ep.add_env_step("ef", 0, 0.0)
    ep.to_numpy()
    for given in (["x", 1], SEQUENCES[kind](["x", 1])):
        with pytest.raises(ValueError, match="value 1 is not in the buffer's space"):
            ep.set_observations(new_data=given, at_indices=slice(0, 2))
        assert ep.get_observations().tolist() == ["ab", "cd", "ef"]  # nothing changed
    ep.set_observations(new_data=SEQUENCES[kind](["x", "yz"]), at_indices=slice(0, 2))
    assert ep.get_observations().tolist() == ["x", "yz", "ef"]
