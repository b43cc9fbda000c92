"""New steps enter a prioritized buffer at the largest priority seen, raised to ``alpha``.

A mutation test found the exponent unpinned: new steps entered at the priority itself (``alpha``
taken as 1), which draws them far more often than the steps they joined.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import PrioritizedEpisodeReplayBuffer


def _episode(id_: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0] * 5 if id_ == "a" else [1.0] * 5,
        actions=[0] * 4,
        rewards=[1.0] * 4,
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("alpha", [0.5, 0.7, 1.0])
def test_new_steps_share_of_draws_follows_priority_to_the_alpha(alpha):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(_episode("a"))
    buf.sample(4, n_step=1)
    buf.update_priorities(np.array([9.0, 1.0, 1.0, 1.0]))  # the largest priority is now 9
    buf.add(_episode("b"))  # its 4 steps enter at 9 ** alpha each
    leaf = 9.0**alpha
    expected = 4 * leaf / (leaf + 3.0 + 4 * leaf)
    drawn = buf.sample(20_000, n_step=1)["obs"]
    share = float(np.mean(drawn == 1.0))
    assert abs(share - expected) < 0.02, (share, expected)
