"""Property suite for SingleAgentEpisode, built on episodes.testing.strategies."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import tree
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing.strategies import chunked_episodes, episodes

from ._compare import values_equal

small = episodes(max_len=5)


# The comparison the properties below rest on: exact values, no cast between the two sides.
COMPARED = {
    "rounded-floats": ([1, 2], np.array([1.7, 2.2]), False),
    "ints-shifted": (np.array([1, 2]), np.array([1, 2]) + 0.4, False),
    "wrapped-uint8": (np.uint8(255), np.int64(-1), False),
    "empty-shapes": (np.zeros((0,)), np.zeros((0, 3)), False),
    "shapes": (np.zeros((2, 1)), np.zeros(2), False),
    "float32-of-float": ([0.1], np.array([0.1], np.float32), False),
    "dict-keys": ({"a": [1]}, {"b": [1]}, False),
    "nested-value": ([{"a": (1, 2.0)}], {"a": (np.array([1]), np.array([2.5]))}, False),
    "int-float": (1, 1.0, True),
    "list-array": ([1, 2], np.array([1, 2], np.int32), True),
    "nan": ([float("nan")], np.array([np.nan], np.float32), True),
    "empty-list": ([], np.zeros((0, 3), np.float32), True),
    "empty-struct": ([], {"a": np.zeros(0), "b": (np.zeros((0, 2)),)}, True),
    "nested": ([{"a": (1, 2.0)}], {"a": (np.array([1]), np.array([2.0]))}, True),
}


@pytest.mark.parametrize("case", list(COMPARED))
def test_values_equal_compares_values_exactly(case):
    a, b, equal = COMPARED[case]
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal


def _without_spaces(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    ep.observation_space = None
    ep.action_space = None
    return ep


def _concat(chunks):
    whole = copy.deepcopy(chunks[0])
    for chunk in chunks[1:]:
        whole.concat_episode(chunk)
        whole.validate()
    return whole


@given(chunked_episodes(max_len=6))
def test_chunks_concat_back_to_the_episode(ce):
    assert _concat(ce.chunks) == ce.episode


@given(chunked_episodes(max_len=6))
def test_appending_to_a_chunk_never_changes_its_predecessors(ce):
    before = copy.deepcopy(ce.chunks)
    last = ce.chunks[-1]
    if last.is_done:
        return
    emo = {k: np.float32(0.0) for k in last.extra_model_outputs} or None
    last.add_env_step(
        last.observation_space.sample(), last.action_space.sample(), 0.0, extra_model_outputs=emo
    )
    last.validate()
    for old, new in zip(before[:-1], ce.chunks[:-1]):
        assert old == new


@given(small, st.data())
def test_cut_then_concat_is_identity(ep, data):
    if ep.is_done:
        return
    lookback = data.draw(st.integers(0, 4), label="lookback")
    original = copy.deepcopy(ep)
    successor = ep.cut(len_lookback_buffer=lookback)
    successor.validate()
    assert ep == original
    assert len(successor) == 0 and successor.t_started == successor.t == ep.t
    ep.concat_episode(successor)
    assert ep == original


@given(small, st.data())
def test_slices_equal_the_getters_view(ep, data):
    a = data.draw(st.integers(0, len(ep)), label="a")
    b = data.draw(st.integers(a, len(ep)), label="b")
    part = ep[a:b]
    part.validate()
    assert len(part) == b - a and part.t_started == ep.t_started + a
    assert values_equal(part.get_observations(), ep.get_observations(slice(a, b + 1)))
    assert values_equal(part.get_actions(), ep.get_actions(slice(a, b)))
    assert values_equal(part.get_rewards(), ep.get_rewards(slice(a, b)))
    assert part.get_infos() == ep.get_infos(slice(a, b + 1))
    for key in ep.extra_model_outputs:
        assert values_equal(
            part.get_extra_model_outputs(key), ep.get_extra_model_outputs(key, slice(a, b))
        )
    assert part.is_done == (ep.is_done and b == len(ep))


@given(small, st.data())
def test_adjacent_slices_concat_back(ep, data):
    cut = data.draw(st.integers(0, len(ep)), label="cut")
    left, right = ep[:cut], ep[cut:]
    if left.is_done:
        return
    left.concat_episode(right)
    assert left == ep


@given(episodes(max_len=5, numpy=False), st.data())
def test_list_getters_equal_numpy_getters(ep, data):
    numpy_ep = copy.deepcopy(ep).to_numpy()
    numpy_ep.validate()
    n_obs = ep.observations.len_incl_lookback()
    index = st.integers(-n_obs - 2, n_obs + 2)
    indices = data.draw(
        st.one_of(
            st.none(),
            index,
            st.builds(slice, st.none() | index, st.none() | index),
            st.lists(index, max_size=3),
        ),
        label="indices",
    )
    neg = data.draw(st.booleans(), label="neg_index_as_lookback")
    fill = data.draw(st.sampled_from([None, 0]), label="fill")
    one_hot = data.draw(st.booleans(), label="one_hot_discrete")
    kwargs = dict(neg_index_as_lookback=neg, fill=fill)
    for name in ("observations", "actions", "rewards"):
        list_get = getattr(ep, f"get_{name}")
        numpy_get = getattr(numpy_ep, f"get_{name}")
        try:
            expected = list_get(indices, **kwargs, one_hot_discrete=one_hot)
        except IndexError:
            try:
                numpy_get(indices, **kwargs, one_hot_discrete=one_hot)
            except IndexError:
                continue
            raise AssertionError(
                f"{name}: list mode raised IndexError, numpy mode did not"
            ) from None
        got = numpy_get(indices, **kwargs, one_hot_discrete=one_hot)
        assert values_equal(expected, got), (name, indices, kwargs, expected, got)


@given(small)
def test_to_numpy_keeps_values_and_validates(ep):
    before = copy.deepcopy(ep)
    ep.to_numpy()
    ep.validate()
    assert ep.is_numpy
    assert values_equal(before.get_observations(), ep.get_observations())
    assert values_equal(before.get_actions(), ep.get_actions())
    assert values_equal(before.get_rewards(), ep.get_rewards())
    assert before.get_infos() == ep.get_infos()


@given(small)
def test_state_round_trip(ep):
    rebuilt = SingleAgentEpisode.from_state(ep.get_state())
    rebuilt.validate()
    assert rebuilt == ep


@given(small)
def test_state_round_trip_through_pickle(ep):
    rebuilt = SingleAgentEpisode.from_state(pickle.loads(pickle.dumps(ep.get_state())))
    assert rebuilt == ep


def test_episode_pickles_with_spaces():
    ep = SingleAgentEpisode(observations=[0], observation_space=gym.spaces.Discrete(2))
    assert pickle.loads(pickle.dumps(ep)) == ep


@given(episodes(max_len=5, observation_space=gym.spaces.Discrete(3)).map(_without_spaces))
def test_episode_pickles(ep):
    assert pickle.loads(pickle.dumps(ep)) == ep


@given(small)
def test_deepcopy_equals_and_is_independent(ep):
    clone = copy.deepcopy(ep)
    assert clone == ep
    clone.custom_data["x"] = 1
    assert "x" not in ep.custom_data


@given(small)
def test_data_dict_has_one_row_per_step(ep):
    batch = ep.get_data_dict()
    for key in ("obs", "actions", "rewards", "terminateds", "truncateds", "t"):
        leaves = tree.flatten(batch[key]) if isinstance(batch[key], (dict, tuple)) else [batch[key]]
        assert all(len(leaf) == len(ep) for leaf in leaves), key
    assert list(batch["t"]) == list(range(ep.t_started, ep.t))
    if len(ep):
        assert bool(batch["terminateds"][-1]) == ep.is_terminated
        assert not any(batch["terminateds"][:-1])
