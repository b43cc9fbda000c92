"""The fillers kept per space across calls are bounded: a fill that changes per call (a running
mean of the observations, say) added one entry per distinct value, for the space's whole life.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import episodes.connectors.base as connector_base
from episodes import SingleAgentEpisode
from episodes.connectors import FrameStack

OBS = gym.spaces.Box(-10, 10, (4, 4), np.float32)


def test_distinct_fills_keep_a_bounded_number_of_fillers_per_space():
    episode = SingleAgentEpisode(
        observations=[OBS.sample() for _ in range(9)],
        actions=[0] * 8,
        rewards=[0.0] * 8,
        observation_space=OBS,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    episode.to_numpy()
    outputs = []
    for i in range(300):
        fill = float(np.float32(i / 7))
        stacked = FrameStack(4, fill=fill)([episode], {})
        outputs.append((fill, stacked))
    kept = connector_base._KEPT_FILLERS.get(OBS)
    assert kept is not None and len(kept) <= 64  # 300 before
    for fill, stacked in outputs[::37]:  # fills past the bound are still used as given
        assert (stacked["obs"][0, :3] == np.float32(fill)).all()
