"""Round 25: behaviour the contract states and an earlier build got wrong or said unclearly."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode


@pytest.mark.parametrize(
    ("space", "item"),
    [
        pytest.param(gym.spaces.Dict({}), {}, id="empty-dict"),
        pytest.param(gym.spaces.Tuple(()), (), id="empty-tuple"),
    ],
)
def test_leafless_observations_have_no_numpy_mode(space: gym.Space, item: object) -> None:
    ep = SingleAgentEpisode(observation_space=space, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(item)
    ep.add_env_step(item, 1, 1.0)
    with pytest.raises(ValueError, match="no numpy mode"):
        ep.to_numpy()
    # All or nothing: the episode stays a list-mode one that still reads and grows.
    assert not ep.is_numpy
    assert ep.get_observations() == [item, item]
    ep.add_env_step(item, 0, 1.0)
    assert len(ep) == 2


@pytest.mark.parametrize(
    ("first", "later", "numpy_first", "stepped_in"),
    [
        pytest.param(0, 0.5, "float64", None, id="int-then-float"),
        pytest.param(np.float32(1.0), 0.1, "float64", "float32", id="float32-then-float"),
        pytest.param(0.0, 1, "float64", "float64", id="float-then-int"),
    ],
)
def test_an_episode_numpied_before_its_steps_keeps_its_first_rewards_dtype(
    first: object, later: object, numpy_first: str, stepped_in: str | None
) -> None:
    """Contract 7.1: later steps must fit the dtypes the first ones set."""

    def episode() -> SingleAgentEpisode:
        ep = SingleAgentEpisode()
        ep.add_env_reset(0.0)
        return ep

    afterwards = episode()
    for reward in (first, later):
        afterwards.add_env_step(0.0, 0, reward)
    assert afterwards.to_numpy().get_rewards().dtype == numpy_first
    before = episode().to_numpy()
    before.add_env_step(0.0, 0, first)
    if stepped_in is None:
        with pytest.raises(ValueError, match="rewards"):
            before.add_env_step(0.0, 0, later)
        assert len(before) == 1
    else:
        before.add_env_step(0.0, 0, later)
        assert before.get_rewards().dtype == stepped_in
    concatenated = episode().to_numpy()
    successor = SingleAgentEpisode(
        concatenated.id_,
        observations=[0.0, 0.0, 0.0],
        actions=[0, 0],
        rewards=[first, later],
        len_lookback_buffer=0,
    )
    concatenated.concat_episode(successor)
    assert concatenated.get_rewards().dtype == numpy_first
