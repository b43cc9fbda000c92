"""An n-step range draws each item's horizon from ``[lo, hi)`` and takes exactly that many steps.

A mutation test found nothing pinning the per-item horizon when the drawn horizons differ
(``k < n`` read as ``k <= n`` took one step more than drawn, its returns consistent with
themselves).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

STEPS = 40


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("lo, hi", [(1, 3), (2, 5), (1, 2)])
def test_each_item_takes_its_drawn_horizon(cls, lo, hi):
    buf = cls(1000, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[float(t) for t in range(STEPS + 1)],
            actions=[0] * STEPS,
            rewards=[2.0**t for t in range(STEPS)],  # every window has its own sum
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    batch = buf.sample(2000, n_step=(lo, hi), gamma=0.5)
    t = batch["obs"].astype(np.int64)
    m = batch["n_step"]
    far = t + hi <= STEPS  # windows the episode's end cannot cut short
    assert set(m[far].tolist()) == set(range(lo, hi))  # every horizon drawn, none beyond
    assert np.all(m[~far] == np.minimum(m[~far], STEPS - t[~far]))
    assert np.array_equal(batch["next_obs"], (t + m).astype(batch["next_obs"].dtype))
    expected = [sum(0.5**k * 2.0 ** (s + k) for k in range(n)) for s, n in zip(t, m)]
    assert np.allclose(batch["rewards"], expected, rtol=1e-6)
    assert np.allclose(batch["discounts"], 0.5**m)
    assert np.array_equal(batch["terminateds"], t + m == STEPS)
