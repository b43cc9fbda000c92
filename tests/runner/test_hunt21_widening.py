"""Float block columns: -2**63 widens a narrow float column, inf fits any float column."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete

from episodes.runner import EnvRunner


class _Env(gym.vector.VectorEnv):
    def __init__(self, n: int = 2) -> None:
        self.num_envs = n
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.single_observation_space = Box(-np.inf, np.inf, (1,), np.float32)
        self.single_action_space = Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.k = 0

    def reset(self, **kwargs):
        return np.zeros((self.num_envs, 1), np.float32), {}

    def step(self, actions):
        self.k += 1
        obs = np.full((self.num_envs, 1), np.inf if self.k == 2 else 1.0)  # float64, inf once
        flags = np.zeros(self.num_envs, bool)
        return obs, np.zeros(self.num_envs), flags, flags, {}


def test_the_lowest_int64_widens_a_float16_extra_and_inf_keeps_float32_obs() -> None:
    outputs = iter(
        [np.array([1.5, 2.0], np.float16), np.array([-(2**63), 7]), np.array([1.5, 2.0])]
    )

    def policy(obs):
        return np.zeros(2, np.int64), {"x": next(outputs)}

    runner = EnvRunner(_Env(), policy)
    first, second = runner.sample(1), runner.sample(2)
    x = second[0].get_extra_model_outputs("x")
    assert x.dtype == np.float64 and x[0] == -(2**63)  # not -inf in float16
    assert first[0].get_extra_model_outputs("x").tolist() == [1.5]
    obs = second[0].get_observations()
    assert obs.dtype == np.float32 and np.isinf(obs[1, 0])  # inf stays inf, float32
