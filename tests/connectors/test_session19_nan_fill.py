"""A NaN fill is one key of the fillers kept across calls, whichever NaN object it is.

NaN is not equal to itself: keyed by value, a connector built per call with
``fill=float("nan")`` added its space's filler again on every call, for the space's life.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import episodes.connectors.base as connector_base
from episodes import SingleAgentEpisode
from episodes.connectors import FrameStack, PrevActionsPrevRewards

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Discrete(3)


def _kept() -> int:
    entries = connector_base._KEPT_FILLERS._entries.values()
    return sum(len(fillers) for _, fillers in entries)


NANS = {
    "float": lambda: float("nan"),
    "np.float32": lambda: np.float32("nan"),
    "np.float64": lambda: np.float64("nan"),
}


@pytest.mark.parametrize("name", list(NANS))
def test_fresh_nan_fills_do_not_grow_the_kept_fillers(name):
    episode = SingleAgentEpisode(
        observations=[OBS.sample() for _ in range(6)],
        actions=[0] * 5,
        rewards=[0.0] * 5,
        observation_space=OBS,
        action_space=ACT,
        len_lookback_buffer=2,
    )
    counts = []
    for _ in range(20):
        batch = FrameStack(4, fill=NANS[name]())([episode], {})
        PrevActionsPrevRewards(2, 2, fill=NANS[name]())([episode], {})
        counts.append(_kept())
    assert counts[-1] == counts[1]
    assert batch  # the connector ran
