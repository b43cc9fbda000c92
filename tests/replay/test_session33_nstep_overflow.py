"""n-step sums past the rewards' range, or of opposite infinities, warn of nothing.

Under ``-W error`` (pytest's ``filterwarnings = error``) numpy's RuntimeWarning was the
exception a ``sample`` raised: ``[inf, -inf]`` rewards with ``n_step > 1`` gave "invalid value
encountered in add".
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

pytestmark = pytest.mark.filterwarnings("error")

CASES = {
    "opposite infinities": ([math.inf, -math.inf, 1.0], math.nan),
    "a sum past float32 (the stored rewards' type)": ([3e38, 3e38, 3e38], math.inf),
    "negative past float32": ([-3e38, -3e38, 0.0], -math.inf),
    "infinity and a finite reward": ([math.inf, 1.0, 1.0], math.inf),
    "finite": ([1.0, 2.0, 3.0], 6.0),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("name", list(CASES))
def test_n_step_sums_of_extreme_rewards(cls, name):
    rewards, expected = CASES[name]
    buf = cls(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 0, 0],
            rewards=rewards,
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    batch = buf.get_transitions([0], n_step=3, gamma=1.0)
    got = float(np.asarray(batch["rewards"])[0])
    assert (math.isnan(got) and math.isnan(expected)) or got == expected
