"""Importance weights of priorities spanning many decades, under ``np.seterr(all="raise")``.

A weight ``(p / p_min)^-beta`` below float32's range is 0 by numpy's default; where the user
made underflow an error, sampling raised numpy's bare ``FloatingPointError`` instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import PrioritizedEpisodeReplayBuffer

PRIORITIES = {
    "decades-apart": [1e-12, 1e30, 1.0, 5.0],
    "ratio-overflows": [1e-300, 1e10, 1e-300, 1.0],
    "ordinary": [1.0, 2.0, 3.0, 4.0],
}


def _buffer(priorities: list[float], beta_seed: int) -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=1.0, seed=beta_seed)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0, 4.0],
            actions=[0, 1, 0, 1],
            rewards=[1.0, 1.0, 1.0, 1.0],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    buf.update_priorities(np.array(priorities), np.arange(4))
    return buf


@pytest.mark.parametrize("priorities", PRIORITIES.values(), ids=PRIORITIES.keys())
@pytest.mark.parametrize("beta", [0.4, 1.0, 3.0])
def test_weights_under_raise_are_numpys_default_ones(priorities, beta):
    want = _buffer(priorities, 7).sample(64, beta=beta)
    with np.errstate(all="raise"):
        got = _buffer(priorities, 7).sample(64, beta=beta)
    assert np.array_equal(got["indices"], want["indices"])
    assert got["weights"].dtype == np.float32
    assert np.array_equal(got["weights"], want["weights"])
    assert got["weights"].max() <= 1.0  # over the smallest priority stored, not drawn
