"""Round 25: behaviour the contract states and an earlier build got wrong or said unclearly."""

from __future__ import annotations

import gymnasium as gym
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
