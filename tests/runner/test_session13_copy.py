"""A shallow copy of a runner sample shares its chunks as a list's copy does."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner, RandomPolicy


def _sample(window: str = "transitions"):
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    runner = EnvRunner(
        env, RandomPolicy(env.action_space, seed=0), seed=0, window=window, len_lookback_buffer=2
    )
    return runner, runner.sample(12)


def test_a_shallow_copy_shares_every_built_chunk_changed_or_not() -> None:
    _, chunks = _sample()
    chunks[0].set_rewards(new_data=5.0, at_indices=0)
    unchanged = chunks[1]
    copied = copy.copy(chunks)
    assert copied[0] is chunks[0]
    assert copied[1] is unchanged
    assert copied == chunks


def test_chunks_built_after_the_copy_are_each_copys_own() -> None:
    _, chunks = _sample()
    copied = copy.copy(chunks)
    mine = copied[2]
    mine.set_rewards(new_data=7.0, at_indices=0)
    assert chunks[2] is not mine
    assert chunks[2].get_rewards(0) != 7.0


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_later_calls_leave_a_shallow_copy_as_it_was(window: str) -> None:
    runner, chunks = _sample(window)
    shallow, deep = copy.copy(chunks), copy.deepcopy(chunks)
    for _ in range(4):
        runner.sample(12)
    assert shallow == deep
    for a, b in zip(shallow, deep):
        np.testing.assert_array_equal(a.get_observations(), b.get_observations())
