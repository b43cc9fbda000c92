"""Round 25 (strategies hunt): list-mode and numpy'd outputs that are the same compare equal."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.testing import check_list_numpy_agree, outputs_equal

DICT = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,))})
TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))))
NESTED_TUPLE = gym.spaces.Tuple((gym.spaces.Tuple((gym.spaces.Discrete(3),)),))


@pytest.mark.parametrize(
    ("listed", "batched", "equal"),
    [
        pytest.param([], {"a": np.zeros(0, np.int64)}, True, id="no steps of a Dict"),
        pytest.param([], ({"a": np.zeros((0, 2))}, np.zeros(0)), True, id="no steps, nested"),
        pytest.param([], {"a": np.zeros(1, np.int64)}, False, id="a row is no empty column"),
        pytest.param([], {}, False, id="an empty dict holds no batch"),
        pytest.param([], {"a": {}}, False, id="nor does a dict of an empty dict"),
        pytest.param([], ((),), False, id="nor a tuple of an empty tuple"),
        pytest.param([], {"a": ()}, False, id="nor a dict of an empty tuple"),
        pytest.param([((1,),), ((2,),)], ((np.array([1, 2]),),), True, id="Tuple in a Tuple"),
        pytest.param([((1,),), ((2,),)], ((np.array([2, 1]),),), False, id="other order"),
    ],
)
def test_outputs_equal_regroups_list_items_beside_their_batch(listed, batched, equal) -> None:
    assert outputs_equal(listed, batched) is equal
    assert outputs_equal(batched, listed) is equal
    assert outputs_equal(listed, batched, check_dtype=True) is False


def _episode(space: gym.Space, steps: int) -> SingleAgentEpisode:
    space.seed(0)
    actions = gym.spaces.Discrete(2)
    return SingleAgentEpisode(
        observations=[space.sample() for _ in range(steps + 1)], actions=[0] * steps,
        rewards=[0.0] * steps, observation_space=space, action_space=actions,
        len_lookback_buffer=0,
    )  # fmt: skip


@pytest.mark.parametrize("space", [DICT, TUPLE, NESTED_TUPLE], ids=["Dict", "Tuple", "Tuple²"])
@pytest.mark.parametrize("steps", [0, 3])
def test_a_read_only_connector_agrees_in_both_modes(space: gym.Space, steps: int) -> None:
    def data_dicts(episodes, batch):
        return {"dd": [ep.get_data_dict() for ep in episodes]}

    check_list_numpy_agree(data_dicts, [_episode(space, steps)])
