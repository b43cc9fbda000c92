"""Chunks of a torch env take the device-block path; a truncated step's bonus is
``gamma * V(final observation)`` there as on the general path.

A mutation test found the device path's ``gamma`` unpinned: its bonus without the discount
passed every test (they compared paths at gamma 1, or saw no truncation).
"""

from __future__ import annotations

import copy

import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner


def _policy(obs: torch.Tensor):
    zeros = torch.zeros(len(obs))
    return (obs[:, 2] > 0).long(), {"vf_preds": zeros, "action_logp": zeros}


def _value(obs) -> torch.Tensor:  # noqa: ANN001 - a tensor on the device path, else numpy
    return 10.0 + torch.as_tensor(obs)[:, 0].double()  # distinct per observation


@pytest.mark.parametrize("gamma", [0.5, 0.9])
def test_truncated_bonus_is_discounted_on_the_device_path(gamma):
    env = TorchCartPole(4, device="cpu", max_episode_steps=5)  # truncates every 5 steps
    chunks = EnvRunner(env, _policy, seed=0).sample(12)
    truncated = [ep for ep in chunks if ep.is_truncated]
    assert truncated  # the case under test happens
    fast = episodes_to_rollout(chunks, gamma=gamma, value_fn=_value)
    general = episodes_to_rollout(
        [copy.deepcopy(ep) for ep in chunks], gamma=gamma, value_fn=_value
    )
    assert torch.equal(fast.storage.rewards, general.storage.rewards)
    ep = truncated[0]
    bonus = gamma * float(_value(torch.as_tensor(ep.get_observations(-1))[None])[0])
    assert any(
        abs(float(r) - (float(ep.get_rewards(-1)) + bonus)) < 1e-5
        for r in fast.storage.rewards.flatten()
    )
