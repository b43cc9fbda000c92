"""A vector env's rewards or flags of the wrong shape: the refusal says how to fix a [N, 1]."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner, RandomPolicy


class Reshaped(gym.vector.VectorWrapper):
    """CartPole whose rewards or termination flags come out in another shape."""

    def __init__(self, env: gym.vector.VectorEnv, field: str, shape: tuple[int, ...]):
        super().__init__(env)
        self.field, self.shape = field, shape

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        if self.field == "rewards":
            rewards = np.resize(rewards, self.shape)
        else:
            terminated = np.resize(terminated, self.shape)
        return obs, rewards, terminated, truncated, infos


CASES = {
    # (field, shape the env gives, words of the refusal)
    "rewards with a trailing axis of one": (
        "rewards",
        (3, 1),
        r"the env's rewards: got shape \(3, 1\), expected \(3,\) \(one per sub-env\); "
        r"squeeze its last axis$",
    ),
    "terminated with a trailing axis of one": (
        "terminated",
        (3, 1),
        r"the env's terminated: got shape \(3, 1\), expected \(3,\) \(one per sub-env\); "
        r"squeeze its last axis$",
    ),
    "rewards with a trailing axis of two: no squeeze to suggest": (
        "rewards",
        (3, 2),
        r"the env's rewards: got shape \(3, 2\), expected \(3,\) \(one per sub-env\)$",
    ),
    "rewards of one sub-env too many": (
        "rewards",
        (4,),
        r"the env's rewards: got shape \(4,\), expected \(3,\) \(one per sub-env\)$",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_misshapen_reward_or_flag_is_refused_with_a_fix_where_there_is_one(case: str) -> None:
    field, shape, words = CASES[case]
    env = Reshaped(gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync"), field, shape)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with pytest.raises(ValueError, match=words):
        runner.sample(4)
