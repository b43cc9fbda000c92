"""Rewards that are not one number a step, added to RLlib 2.60's replay buffer and to ours.

RLlib stores them and fails later, in ``sample``, with numpy's words; ours refuses the ``add``
with a ``ValueError`` naming the chunk, buffer unchanged (deviation "vector-rewards").
"""

from __future__ import annotations

import numpy as np
import pytest
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer as RBuffer

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer

REWARDS = {
    "one-item-arrays": [np.array([1.0]), np.array([2.0]), np.array([3.0])],
    "vectors": [np.array([1.0, 0.5])] * 3,
}


# "vector-rewards"
@pytest.mark.parametrize("rewards", REWARDS.values(), ids=REWARDS.keys())
def test_rllib_stores_them_and_fails_in_sample_we_refuse_the_add(rewards):
    fields = dict(observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0], len_lookback_buffer=0)
    theirs = RBuffer(capacity=100)
    theirs.add([RSAE(rewards=list(rewards), **fields)])
    assert theirs.get_num_timesteps() == 3
    with pytest.raises(ValueError):
        theirs.sample(num_items=4, n_step=1)

    ours = EpisodeReplayBuffer(100)
    with pytest.raises(ValueError, match=r"chunk 0 \(episode 'x'\): rewards must be scalars"):
        ours.add(SingleAgentEpisode("x", rewards=list(rewards), **fields))
    assert (ours.get_num_timesteps(), ours.get_num_episodes()) == (0, 0)
