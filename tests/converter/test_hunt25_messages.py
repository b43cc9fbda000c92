"""Round 25: the refusal of a masked vector-steps window names what the caller did."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner


def _policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = len(obs)
    return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}


def _zeros(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs))


@pytest.mark.parametrize("numpy_episodes", [False, True], ids=["list-mode", "numpy'd"])
def test_a_read_list_mode_chunk_is_named_as_the_reason(numpy_episodes: bool) -> None:
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync", max_episode_steps=3)
    runner = EnvRunner(env, _policy, seed=0, window="vector_steps", numpy_episodes=numpy_episodes)
    runner.sample(5)  # the second call's window starts with reset steps
    chunks = runner.sample(5)
    chunks[0].get_rewards()  # a read, no write
    if numpy_episodes:  # a read of a numpy'd chunk keeps the fast path
        assert episodes_to_rollout(chunks, gamma=0.9, value_fn=_zeros).mask is not None
        return
    with pytest.raises(ValueError, match=r"List-mode chunks \(numpy_episodes=False\)"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=_zeros)


def test_a_refused_list_mode_sample_is_not_built_and_converts_with_value_fn() -> None:
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync", max_episode_steps=3)
    runner = EnvRunner(env, _policy, seed=0, window="vector_steps", numpy_episodes=False)
    runner.sample(5)
    chunks = runner.sample(5)
    with pytest.raises(ValueError, match="only the fast path") as refused:
        episodes_to_rollout(chunks, gamma=0.9)  # no value_fn, no stored values
    assert "List-mode" not in str(refused.value)  # nothing was read
    assert chunks.built() == []  # looking for stored values built no chunk
    assert episodes_to_rollout(chunks, gamma=0.9, value_fn=_zeros).mask is not None
