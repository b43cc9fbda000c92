"""A torch policy's actions reach a numpy env as the host arrays the runner recorded.

The runner recorded a torch policy's outputs detached on the host, but handed the policy's own
tensor to ``env.step``. On a numpy env that failed: a tensor that requires grad cannot be read
by numpy (gymnasium's ``np.clip`` in Pendulum), an async env refuses to pickle a non-leaf
tensor, and CartPole's ``Discrete.contains`` refuses a ``torch.long`` tensor; each left the
runner dead. Float tensors that passed turned the env's rewards into tensors. A torch env still
gets the policy's tensors as they are, and numpy or list actions go to any env untouched.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner
from tests.runner._tensor_env import TensorVectorEnv


class SpySyncEnv(gym.vector.SyncVectorEnv):
    """A numpy vector env that keeps what it was handed at each step."""

    def __init__(self, env_id: str, n: int = 2):
        super().__init__([lambda: gym.make(env_id)] * n)
        self.given: list[Any] = []

    def step(self, actions):
        self.given.append(actions)
        return super().step(actions)


class SpyTensorEnv(TensorVectorEnv):
    """A torch env (tensors in and out) that keeps what it was handed at each step."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self.given: list[Any] = []

    def step(self, actions):
        self.given.append(actions)
        return super().step(actions)


torch.manual_seed(0)
ACTOR = torch.nn.Linear(3, 1)


def pendulum_actor(obs):  # as training code calls it: no torch.no_grad(), so it needs grad
    action = torch.tanh(ACTOR(torch.as_tensor(obs, dtype=torch.float32))) * 2.0
    return action, {"action_logp": action.sum(-1)}


def cartpole_long(obs):
    return torch.as_tensor(obs[:, 2] > 0).long(), {}


def cartpole_with_values(obs):  # int actions beside a float extra output needing grad
    return torch.as_tensor(obs[:, 2] > 0).long(), {"vf": ACTOR(torch.as_tensor(obs[:, :3]))[:, 0]}


def pendulum_float64(obs):
    return torch.full((len(obs), 1), 0.5, dtype=torch.float64), {}


def cartpole_numpy(obs):
    return (obs[:, 2] > 0).astype(np.int64), {}


def cartpole_list(obs):
    return [int(x > 0) for x in obs[:, 2]], {}


TORCH_ON_NUMPY = [
    ("float tensor needing grad, Pendulum", "Pendulum-v1", pendulum_actor, np.float32),
    ("long tensor, CartPole", "CartPole-v1", cartpole_long, np.int64),
    ("long tensor beside a value needing grad", "CartPole-v1", cartpole_with_values, np.int64),
    ("float64 tensor, Pendulum", "Pendulum-v1", pendulum_float64, np.float64),
]


@pytest.mark.parametrize(
    "name, env_id, policy, dtype", TORCH_ON_NUMPY, ids=[c[0] for c in TORCH_ON_NUMPY]
)
def test_a_numpy_env_is_handed_the_recorded_host_arrays(name, env_id, policy, dtype):
    env = SpySyncEnv(env_id)
    runner = EnvRunner(env, policy, seed=0, window="vector_steps", len_lookback_buffer=0)
    chunks = list(runner.sample(5))
    chunks += runner.sample(3)  # the runner stays usable: the call before did not fail
    assert len(env.given) == 8
    for actions in env.given:
        assert type(actions) is np.ndarray and actions.dtype == dtype, name
    handed = np.stack(env.given)  # [steps, envs, ...], vector steps: one row a step
    for env_index in range(2):
        recorded = [
            np.asarray(c.get_actions(slice(None)))
            for c in chunks
            if c.custom_data["env_index"] == env_index
        ]
        np.testing.assert_array_equal(np.concatenate(recorded), handed[:, env_index], err_msg=name)
    for chunk in chunks:  # the env's own float rewards, not tensors built from the actions
        assert np.asarray(chunk.get_rewards(slice(None))).dtype.kind == "f"


UNTOUCHED = [
    ("numpy actions", cartpole_numpy),
    ("a list of ints", cartpole_list),
]


@pytest.mark.parametrize("name, policy", UNTOUCHED, ids=[c[0] for c in UNTOUCHED])
def test_numpy_and_list_actions_go_to_the_env_as_the_policy_gave_them(name, policy):
    env = SpySyncEnv("CartPole-v1")
    given: list[Any] = []

    def spy_policy(obs):
        actions, extras = policy(obs)
        given.append(actions)
        return actions, extras

    EnvRunner(env, spy_policy, seed=0, window="vector_steps").sample(4)
    assert len(env.given) == 4
    assert all(a is b for a, b in zip(env.given, given)), name


def test_a_torch_env_is_handed_the_policys_tensors():
    env = SpyTensorEnv(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2))
    given: list[Any] = []

    def policy(obs):
        actions = (obs[:, 2] > 0).long()
        given.append(actions)
        return actions, {}

    EnvRunner(env, policy, seed=0, window="vector_steps").sample(4)
    assert len(env.given) == 4
    assert all(a is b for a, b in zip(env.given, given))


def test_nested_torch_actions_reach_a_numpy_env_as_nested_arrays():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (2,))))

    class TupleActionEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,))
        action_space = space

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(3, np.float32), {}

        def step(self, action):
            assert space.contains(action), action  # numpy leaves, or the space refuses them
            reward = float(action[0]) + float(np.sum(action[1]))
            return np.zeros(3, np.float32), reward, False, False, {}

    env = SpySyncEnv.__new__(SpySyncEnv)
    gym.vector.SyncVectorEnv.__init__(env, [TupleActionEnv] * 2)
    env.given = []

    def policy(obs):
        n = len(obs)
        return (torch.ones(n, dtype=torch.long), torch.full((n, 2), 0.25, requires_grad=True)), {}

    chunks = EnvRunner(env, policy, seed=0, window="vector_steps").sample(3)
    for discrete, box in env.given:
        assert type(discrete) is np.ndarray and type(box) is np.ndarray
    assert all(np.asarray(c.get_rewards(slice(None))).tolist() == [1.5] * len(c) for c in chunks)
