"""The env runner's chunks (interleaved sub-envs, continuations across calls) in a buffer."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

from .reference import RefBuffer, check_transition_batch


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_runner_chunks_match_reference(mode):
    env = gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    buf, ref = EpisodeReplayBuffer(400, seed=0), RefBuffer(400)
    for _ in range(6):
        chunks = runner.sample(40)
        buf.add(chunks)
        ref.add(list(chunks))
        assert buf.get_episode_ids() == list(ref.episodes)
        assert buf.get_num_timesteps() == ref.num_timesteps
    uids = np.array(sorted(u for ep in ref.episodes.values() for u in ep.uids))
    batch = buf.get_transitions(uids, n_step=4, gamma=0.9)
    batch["indices"] = uids
    check_transition_batch(ref, batch, 4, 4, 0.9)
    assert batch["terminateds"].any()  # random CartPole episodes end within 40 steps
    env.close()
