"""Replay refuses columns of spaces without a fixed layout, even when their items would stack
(equal-length ``Sequence(stack=True)`` items were stored, and a later, longer valid one refused
by the buffer and by the episodes it returned)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces as gs

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BOX = gs.Box(0, 1, (2,), np.float32)
CASES = [
    ("stacked Sequence observations", gs.Sequence(BOX, stack=True), None, "observations"),
    ("unstacked Sequence observations", gs.Sequence(BOX), None, "observations"),
    ("Sequence actions", gs.Discrete(3), gs.Sequence(BOX, stack=True), "actions"),
]


def item_of(space: gs.Space):
    items = np.full((3, 2), 0.5, np.float32)  # three equal-length parts: they would stack
    if isinstance(space, gs.Sequence):
        return items if space.stack else tuple(items)
    return 1


def episode_of(obs_space, action_space) -> SingleAgentEpisode:
    action_space = action_space or gs.Discrete(2)
    episode = SingleAgentEpisode("e", observation_space=obs_space, action_space=action_space)
    episode.add_env_reset(item_of(obs_space))
    for _ in range(3):
        episode.add_env_step(item_of(obs_space), item_of(action_space), 1.0)
    return episode


@pytest.mark.parametrize("buffer", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("name, obs_space, action_space, column", CASES, ids=[c[0] for c in CASES])
def test_columns_without_a_fixed_layout_are_refused(buffer, name, obs_space, action_space, column):
    buf = buffer(100, seed=0)
    with pytest.raises(TypeError, match=f"{column}: .*Sequence space have no fixed layout"):
        buf.add(episode_of(obs_space, action_space))
    assert buf.get_num_timesteps() == 0 and buf.get_num_episodes() == 0
