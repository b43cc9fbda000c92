"""Items recorded as tuples in some steps and lists in others (no space, or a Tuple space).

gymnasium's ``Tuple`` space contains both forms, and a wrapper may turn one into the other
part way through an episode. Lists and tuples stand for each other: the episode batches,
joins and converts as if every item were a tuple (contract §7.1: ``to_numpy`` before or after
appending gives the same result).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.spaces import batch, equal_in_space

PAIR = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0, 9, (), np.float32)))


def _item(k: int, form: type) -> object:
    return form((k % 3, np.float32(k)))


def _episode(forms: list[type], space: gym.Space | None = None) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a",
        observations=[_item(k, form) for k, form in enumerate(forms)],
        actions=[0] * (len(forms) - 1),
        rewards=[1.0] * (len(forms) - 1),
        observation_space=space,
        len_lookback_buffer=0,
    )


def test_batch_takes_lists_beside_tuples_as_tuples() -> None:
    out = batch([_item(0, tuple), _item(1, list), _item(2, tuple)])
    assert isinstance(out, tuple)
    np.testing.assert_array_equal(out[0], [0, 1, 2])
    np.testing.assert_array_equal(out[1], np.float32([0, 1, 2]))


def test_batch_still_refuses_items_that_nest_otherwise() -> None:
    with pytest.raises(ValueError, match="differing structure"):
        batch([(1, 2), [1, 2, 3]])


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        pytest.param((1, 2.0), [1, 2.0], True, id="tuple-list"),
        pytest.param({"x": (1, 2)}, {"x": [1, 2]}, True, id="inside-a-dict"),
        pytest.param((1, 2.0), [1, 3.0], False, id="other-values"),
        pytest.param((1, 2), [1, 2, 3], False, id="other-length"),
        pytest.param([0.0, 0.1], np.float32([0.0, 0.1]), False, id="list-array-no-space"),
    ],
)
def test_equal_without_a_space_reads_lists_and_tuples_alike(a, b, equal) -> None:
    assert equal_in_space(a, b, None) is equal


@pytest.mark.parametrize("space", [None, PAIR], ids=["no-space", "tuple-space"])
def test_a_concat_of_list_steps_onto_tuple_steps_numpys_as_either_order(space) -> None:
    whole = _episode([tuple, tuple, tuple], space)
    successor = whole.cut()
    for k in (3, 4):
        successor.add_env_step(_item(k, list), 0, 1.0)
    early = copy.deepcopy(whole).to_numpy()
    early.concat_episode(copy.deepcopy(successor))
    whole.concat_episode(successor)
    late = copy.deepcopy(whole).to_numpy()
    for got in (early.get_observations(), late.get_observations()):
        assert isinstance(got, tuple)
        np.testing.assert_array_equal(got[0], [k % 3 for k in range(5)])
    assert episodes_to_batch([whole])["obs"][0].tolist() == [0, 1, 2, 0]


def test_a_rollout_joins_chunks_of_list_and_tuple_items_without_a_space() -> None:
    chunks = [
        SingleAgentEpisode(
            observations=[_item(k, form) for k in range(4)],
            actions=[0, 1, 0],
            rewards=[1.0] * 3,
            len_lookback_buffer=0,
            truncated=True,
            extra_model_outputs={"vf_preds": [0.0] * 3, "action_logp": [0.0] * 3},
        )
        for form in (tuple, list)
    ]

    def obs_fn(o: tuple) -> np.ndarray:
        assert isinstance(o, tuple)
        return np.stack([o[0].astype(np.float32), o[1]], -1)

    rollout = episodes_to_rollout(
        [[chunks[0]], [chunks[1]]], gamma=0.9, value_fn=lambda o: np.zeros(len(o)), obs_fn=obs_fn
    )
    assert tuple(rollout.storage.observations.shape) == (3, 2, 2)


@pytest.mark.parametrize("form", [tuple, list], ids=["tuples", "lists"])
@pytest.mark.parametrize("numpy", [False, True], ids=["list-mode", "numpy"])
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_replay_stores_a_tuple_space_whatever_the_item_form(cls, numpy, form) -> None:
    ep = _episode([form] * 4, PAIR)
    ep.is_terminated = True
    if numpy:
        ep.to_numpy()
    buffer = cls(100, seed=0)
    buffer.add([ep])
    assert buffer.get_num_timesteps() == 3
    [stored] = buffer.get_episodes()
    for t in range(4):  # given as lists or tuples, the items come back as the space's tuples
        item = stored.get_observations(t)
        assert isinstance(item, tuple) and equal_in_space(item, _item(t, tuple), PAIR)
