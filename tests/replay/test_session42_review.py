"""Review fixes to replay's nested observations and the runner's env actions (session 42).

* A list-mode episode whose Tuple-space observations are given as one array of the parts
  (``np.array([1, 0])`` for two Discretes, which gymnasium's ``Tuple.contains`` takes) was
  refused ("the items differ in structure"), while the same episode numpy'd was stored.
* A numpy'd episode whose list items hold a dict was refused with words saying nested spaces
  are not supported but for observations, about observations.
* The runner judged whether a policy's actions hold a torch tensor by walking every leaf, a
  call per sub-env and step for a list of 1,024 ints; a list is judged by its first item.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner.host_values import env_actions, host_array

PAIRS = {
    "two Discretes": (
        gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3))),
        [np.array([1, 0]), np.array([2, 1]), np.array([0, 0])],
    ),
    "a Box and a Discrete, one object array each": (
        gym.spaces.Tuple((gym.spaces.Box(0.0, 9.0, (2,)), gym.spaces.Discrete(3))),
        [np.array([np.float32([k, k + 1]), k % 3], dtype=object) for k in range(3)],
    ),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("name", list(PAIRS))
def test_tuple_items_given_as_arrays_are_stored_in_list_mode_as_numpyd(cls, name):
    space, items = PAIRS[name]
    stored = []
    for numpy in (False, True):
        ep = SingleAgentEpisode(
            "a", observations=items, actions=[0, 0], rewards=[1.0, 1.0],
            observation_space=space, len_lookback_buffer=0,
        )  # fmt: skip
        buf = cls(10, seed=0)
        buf.add(ep.to_numpy() if numpy else ep)
        stored.append(buf.get_episodes()[0].get_observations(slice(None)))
    (list_mode, numpyd) = stored
    assert isinstance(list_mode, tuple) and len(list_mode) == 2, name
    for a, b in zip(list_mode, numpyd):
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_a_tuple_item_of_another_size_is_still_refused():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))
    ep = SingleAgentEpisode(
        "a", observations=[np.array([1, 0]), np.array([2, 1, 0]), np.array([0, 0])],
        actions=[0, 0], rewards=[1.0, 1.0], observation_space=space, len_lookback_buffer=0,
    )  # fmt: skip
    buf = EpisodeReplayBuffer(10)
    with pytest.raises(TypeError, match="differ in structure"):
        buf.add(ep)
    assert buf.get_num_timesteps() == 0


def test_a_dict_inside_a_numpyd_list_item_is_named_for_observations():
    ep = SingleAgentEpisode(
        observations=[[{"a": 1.0}, 2.0]] * 3, actions=[0, 0], rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    with pytest.raises(TypeError) as caught:
        EpisodeReplayBuffer(10).add(ep)
    words = str(caught.value)
    assert "nested observations are Dict or Tuple items" in words
    assert "not supported but for observations" not in words


ACTIONS = [
    ("a tensor", torch.zeros(3), True),
    ("a tensor needing grad in a dict", {"a": torch.zeros(3, requires_grad=True)}, True),
    ("a tuple with a tensor second", (np.zeros(3), torch.zeros(3)), True),
    ("a list of tensors", [torch.tensor(0), torch.tensor(1)], True),
    ("a list of ints", [0, 1, 2], False),
    ("an empty list", [], False),
    ("a numpy array", np.zeros(3), False),
    ("a dict of arrays", {"a": np.zeros(3)}, False),
]


@pytest.mark.parametrize("name, given, tensor", ACTIONS, ids=[c[0] for c in ACTIONS])
def test_env_actions_hands_host_arrays_for_tensors_only(name, given, tensor):
    host = object()
    assert (env_actions(given, host) is host) is tensor, name


def test_a_list_of_tensors_reaches_the_env_as_one_array():
    given = [torch.tensor(1), torch.tensor(0)]
    assert env_actions(given, host_array(given)).tolist() == [1, 0]
