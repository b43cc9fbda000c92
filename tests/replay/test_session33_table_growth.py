"""The replay table's age order stays as large as the episodes stored, not those ever added.

Each ``add`` reserved room for its new episodes by doubling the age-order array whenever its
live window reached the end, however empty the array was: 400k episodes added to a buffer
holding 10 left it 262,144 entries long (about 0.7 entries per episode ever added).
"""

from __future__ import annotations

import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(i: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=[float(i)] * 11,
        actions=[0] * 10,
        rewards=[1.0] * 10,
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("per_add", [1, 2, 7])
def test_age_order_stays_bounded_under_steady_eviction(cls, per_add):
    buf = cls(100, seed=0)  # 10 episodes of 10 steps stored at a time
    added = 0
    for _ in range(4000 // per_add):
        buf.add([_episode(added + k) for k in range(per_add)])
        added += per_add
    assert buf.get_num_episodes() == 10
    assert len(buf._table._by_age) <= 64  # it was 2,048 to 4,096 after 4,000 episodes
    ids = buf.get_episode_ids()
    assert ids == [f"e{i}" for i in range(added - 10, added)]  # oldest first, none lost
    drawn = buf.sample(64, n_step=1)["obs"]
    assert set(drawn.tolist()) <= {float(i) for i in range(added - 10, added)}
