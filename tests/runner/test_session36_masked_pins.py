"""A masked reset observation is refused at allocation whatever leaf holds it, naming the
reset (only the first leaf was pinned: a later one was refused by the row write instead,
naming "a batch")."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner

N = 2


class LateMaskEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Dict observations whose key sorting last ("z") is masked at the first reset."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self) -> None:
        self.num_envs = N
        box = gym.spaces.Box(-1e3, 1e3, (2,), np.float64)
        self.single_observation_space = gym.spaces.Dict({"a": box, "z": box})
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, N)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, N)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        z = np.ma.masked_array(np.zeros((N, 2)), mask=[[False, True], [False, False]])
        return {"a": np.zeros((N, 2)), "z": z}, {}

    def step(self, actions: Any):
        obs = {"a": np.zeros((N, 2)), "z": np.zeros((N, 2))}
        no = np.zeros(N, bool)
        return obs, np.zeros(N), no, no, {}


def test_a_masked_later_leaf_is_refused_naming_the_reset():
    runner = EnvRunner(LateMaskEnv(), lambda obs: (np.zeros(N, np.int64), {}), seed=0)
    with pytest.raises(ValueError, match="reset observations.*masked"):
        runner.sample(2)
