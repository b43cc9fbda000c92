"""episodes_to_batch over chunks whose Tuple items were recorded as tuples or as lists.

gymnasium's ``Tuple`` space contains both forms, so chunks of one space may hold either; the
batch nests as the space says (a tuple) and joins them, in list and numpy mode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch

SPACE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))


def _episode(id_: str, item_type: type, numpy: bool, space: gym.Space | None = SPACE):
    observations = [item_type((k % 3, np.full(2, k / 10, np.float32))) for k in range(3)]
    ep = SingleAgentEpisode(
        id_,
        observations=observations,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "forms", [(list, tuple), (tuple, list), (list, list)], ids=["list-tuple", "tuple-list", "lists"]
)
def test_tuple_and_list_items_join_as_the_space_nests(numpy: bool, forms: tuple) -> None:
    a = _episode("a", forms[0], numpy)
    b = _episode("b", forms[1], numpy)
    batch = episodes_to_batch([a, b])
    for column, first in (("obs", 0), ("next_obs", 1)):
        value = batch[column]
        assert isinstance(value, tuple) and len(value) == 2
        expected = [k % 3 for k in range(first, first + 2)] * 2
        np.testing.assert_array_equal(value[0], expected)
        assert value[1].shape == (4, 2) and value[1].dtype == np.float32


def test_spaceless_chunks_of_lists_and_tuples_join_as_tuples() -> None:
    a = _episode("a", list, False, space=None)
    b = _episode("b", tuple, False, space=None)
    obs = episodes_to_batch([a, b])["obs"]
    assert isinstance(obs, tuple) and obs[1].shape == (4, 2)


def test_a_chunk_with_a_space_joins_one_without() -> None:
    obs = episodes_to_batch([_episode("a", list, False), _episode("b", list, False, None)])["obs"]
    assert isinstance(obs, tuple) and obs[1].shape == (4, 2)


def test_chunks_that_nest_differently_name_the_column() -> None:
    a = _episode("a", list, False, space=None)
    b = SingleAgentEpisode(
        "b", observations=[(0, 1, 2)] * 3, actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match="'obs' rows do not join"):
        episodes_to_batch([a, b])


def test_a_rollout_joins_envs_with_and_without_a_declared_space() -> None:
    from episodes.converter import episodes_to_rollout

    space = gym.spaces.Dict(
        {
            "a": gym.spaces.Box(-1, 1, (2,), np.float32),
            "b": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))),
        }
    )
    obs = [{"a": np.float32([k / 10, 0]), "b": [k % 2, k % 3]} for k in range(4)]
    seen: list[str] = []

    def obs_fn(o: dict) -> np.ndarray:
        seen.append(type(o["b"]).__name__)
        return np.concatenate([o["a"], np.stack(o["b"], -1).astype(np.float32)], -1)

    def chunk(declared: gym.Space | None) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            observations=obs,
            actions=[0, 1, 0],
            rewards=[1.0] * 3,
            observation_space=declared,
            len_lookback_buffer=0,
            truncated=True,
            extra_model_outputs={"vf_preds": [0.0] * 3, "action_logp": [0.0] * 3},
        )

    rollout = episodes_to_rollout(
        [[chunk(space)], [chunk(None)]],
        gamma=0.9,
        value_fn=lambda o: np.zeros(len(o)),
        obs_fn=obs_fn,
    )
    assert tuple(rollout.storage.observations.shape) == (3, 2, 4)
    assert seen and set(seen) == {"tuple"}  # the columns and the bootstrap's last observations
