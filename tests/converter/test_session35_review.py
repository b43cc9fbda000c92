"""Review of the int joins: tensors given to the connectors' join, and the side-by-side path.

``lossless_ints`` read any ``.dtype`` as numpy's (torch rows raised ``AttributeError`` in
``concat_rows``), and the side-by-side conversion of several runners refused uint64 actions
beside signed ones only after calling ``value_fn``, without naming the field.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes.connectors import concat_rows
from episodes.connectors.joining import join_leaves
from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner


def test_concat_rows_of_tensors_joins_as_numpy_does():
    joined = concat_rows([torch.zeros(1, 2), torch.ones(2, 2)])
    assert joined.shape == (3, 2)
    assert joined.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]


def test_a_tensor_beside_uint64_rows_joins_as_numpy_does():
    joined = join_leaves([np.array([1], np.uint64), torch.tensor([-2])])
    assert joined.tolist() == [1.0, -2.0]


class _Env(VectorEnv):
    def __init__(self, n: int):
        self.num_envs = n
        self.single_observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.single_action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def reset(self, *, seed=None, options=None):
        return np.zeros((self.num_envs, 2), np.float32), {}

    def step(self, actions):
        n = self.num_envs
        return np.zeros((n, 2), np.float32), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}


def _sample(dtype, value):
    def policy(obs):
        zeros = np.zeros(len(obs), np.float32)
        return np.full((len(obs), 1), value, dtype), {"vf_preds": zeros, "action_logp": zeros}

    return EnvRunner(_Env(2), policy, seed=0).sample(3)


class _SideBySide(list):
    def __init__(self, parts):
        super().__init__(chunk for part in parts for chunk in part)
        self._parts = parts

    def side_by_side(self):
        return self._parts


@pytest.mark.parametrize("side_by_side", [True, False])
def test_uint64_actions_beside_signed_ones_refused_before_value_fn(side_by_side):
    parts = [_sample(np.uint64, 2**63), _sample(np.int64, -1)]
    episodes = _SideBySide(parts) if side_by_side else [c for part in parts for c in part]
    calls = []

    def value_fn(obs):
        calls.append(len(obs))
        return np.zeros(len(obs))

    with pytest.raises(ValueError, match="actions.*uint64 values up to"):
        episodes_to_rollout(episodes, gamma=0.9, value_fn=value_fn)
    assert calls == []


def test_small_uint64_actions_beside_signed_ones_join_alike_on_both_paths():
    parts = [_sample(np.uint64, 5), _sample(np.int64, -1)]
    zeros = lambda obs: np.zeros(len(obs))  # noqa: E731
    side = episodes_to_rollout(_SideBySide(parts), gamma=0.9, value_fn=zeros).storage.actions
    general = episodes_to_rollout([c for p in parts for c in p], gamma=0.9, value_fn=zeros)
    assert side.dtype == general.storage.actions.dtype == torch.int64
    assert torch.equal(side, general.storage.actions)


SCALARS = {
    "small-uint64-scalar": ([np.uint64(5), np.int64(-1)], np.int64),
    "array-beside-scalar": ([np.array([5], np.uint64), np.int64(-1)], np.int64),
    "big-uint64-scalar": ([np.uint64(2**63), np.int64(-1)], None),
}


@pytest.mark.parametrize("leaves,dtype", SCALARS.values(), ids=SCALARS.keys())
def test_lossless_ints_takes_numpy_scalars_as_arrays(leaves, dtype):
    from episodes.connectors.joining import lossless_ints

    if dtype is None:
        with pytest.raises(ValueError, match="uint64 values up to"):
            lossless_ints(leaves)
        return
    assert [leaf.dtype for leaf in lossless_ints(leaves)] == [np.dtype(dtype)] * 2
