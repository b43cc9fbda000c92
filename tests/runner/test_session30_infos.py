"""Infos the runner records, found by an infos hunt.

* A key of any type has its mask at ``f"_{key}"`` (gymnasium's rule): a sub-env that did not
  report a non-string key gets nothing for it, not the batch's filler.
* Same-step mode: ``final_obs``/``final_info`` without their masks never reach the infos of
  the sub-envs that go on (the torch recorder already left them out).
* The torch recorder rebuilds namedtuples in infos and keeps sparse tensors as given, as the
  numpy recorder keeps both.
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv

from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.infos import env_info, mask_key
from episodes.structs import data_equal

Contact = collections.namedtuple("Contact", "force body")


class _ReportsIntKey(gym.Env):  # type: ignore[type-arg]
    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, reports: bool):
        self.reports = reports

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), ({1: 5, "s": 5} if self.reports else {})

    def step(self, action):
        info = {1: 7, "s": 7} if self.reports else {}
        return np.zeros(1, np.float32), 0.0, False, False, info


def test_a_non_string_key_is_masked_as_gymnasium_masks_it():
    vec = SyncVectorEnv([lambda: _ReportsIntKey(True), lambda: _ReportsIntKey(False)])
    _, batched = vec.reset(seed=0)
    assert mask_key(1) in batched
    assert env_info(batched, 1) == {}
    chunks = EnvRunner(vec, RandomPolicy(vec.action_space, seed=0), seed=0).sample(2)
    assert [dict(info) for info in chunks[1].get_infos()] == [{}, {}, {}]
    assert [info[1] for info in chunks[0].get_infos()] == [5, 7, 7]


class _VectorEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    def __init__(self, mode: str, tensors: bool):
        self.num_envs, self.tensors = 2, tensors
        self.metadata = {"autoreset_mode": mode}
        self.single_observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.t = 0

    def as_batch(self, value: Any) -> Any:
        return torch.as_tensor(value) if self.tensors else np.asarray(value)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self.as_batch(np.zeros((2, 1), np.float32)), {}


class _UnmaskedFinals(_VectorEnv):
    """Same-step; sub-env 0 ends every second step, final_obs sent batched with no mask."""

    def step(self, action):
        self.t += 1
        done = np.array([self.t % 2 == 0, False])
        obs = np.full((2, 1), self.t, np.float32)
        infos = {"final_obs": self.as_batch(obs + 100)}
        next_obs = np.where(done[:, None], 0, obs).astype(np.float32)
        flags = self.as_batch(np.zeros(2, bool))
        return (
            self.as_batch(next_obs),
            self.as_batch(np.ones(2, np.float32)),
            self.as_batch(done),
            flags,
            infos,
        )


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "torch"])
def test_unmasked_final_keys_never_reach_the_sub_envs_that_go_on(tensors):
    env = _UnmaskedFinals("SameStep", tensors)
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
    assert all(info == {} for chunk in chunks for info in chunk.get_infos())
    first = chunks[0]
    assert first.is_terminated and first.get_observations(-1).tolist() == [102.0]


class _OddInfos(_VectorEnv):
    def step(self, action):
        infos = {
            "contact": [Contact(self.as_batch(np.float32(i + 0.5)), i) for i in range(2)],
            "sparse": torch.eye(2).to_sparse(),
        }
        flags = self.as_batch(np.zeros(2, bool))
        return (
            self.as_batch(np.ones((2, 1), np.float32)),
            self.as_batch(np.ones(2, np.float32)),
            flags,
            flags,
            infos,
        )


def test_the_torch_recorder_keeps_namedtuples_and_sparse_tensors_as_the_host_does():
    got = {}
    for tensors in (False, True):
        env = _OddInfos("NextStep", tensors)
        runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        got[tensors] = runner.sample(1)[1].get_infos()[1]
        runner.sample(1)  # the runner goes on
    host, device = got[False], got[True]
    assert type(device["contact"]) is Contact and device["contact"].body == 1
    assert data_equal(np.asarray(device["contact"].force), np.asarray(host["contact"].force))
    assert device["sparse"].layout is torch.sparse_coo
    assert torch.equal(device["sparse"].to_dense(), host["sparse"].to_dense())
