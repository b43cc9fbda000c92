"""The env's rewards and flags given as masked arrays with masked entries are refused, as its
observations are: ``np.asarray`` dropped the mask and recorded the placeholders."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner

N = 2


class MaskedStepEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, field: str | None, tensors: bool = False) -> None:
        self.num_envs, self.field, self.tensors = N, field, tensors
        self.single_observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, N)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, N)

    def _obs(self) -> Any:
        # Torch observations (a GPU simulator's form) make the runner record on the device.
        return torch.zeros(N, 2, dtype=torch.float64) if self.tensors else np.zeros((N, 2))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self._obs(), {}

    def step(self, actions: Any):
        values = {
            "rewards": np.ones(N),
            "terminated": np.zeros(N, bool),
            "truncated": np.zeros(N, bool),
        }
        if self.field is not None:
            hidden = np.zeros(N, bool)
            hidden[1] = True
            values[self.field] = np.ma.masked_array(values[self.field], mask=hidden)
        return self._obs(), values["rewards"], values["terminated"], values["truncated"], {}


def _runner(field, tensors=False):
    def policy(obs):
        return (torch.zeros(N, dtype=torch.int64) if tensors else np.zeros(N, np.int64)), {}

    return EnvRunner(MaskedStepEnv(field, tensors), policy, seed=0)


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy path", "device path"])
@pytest.mark.parametrize("field", ["rewards", "terminated", "truncated"])
def test_masked_rewards_and_flags_are_refused(field, tensors):
    with pytest.raises(ValueError, match=f"the env's {field}.*masked"):
        _runner(field, tensors).sample(2)


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy path", "device path"])
def test_nothing_masked_records_as_plain_arrays(tensors):
    chunks = _runner(None, tensors).sample(2)
    assert [c.get_rewards().tolist() for c in chunks] == [[1.0, 1.0]] * N
