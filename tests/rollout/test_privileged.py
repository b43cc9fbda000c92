"""Privileged observations (an asymmetric critic's inputs) through storage and generators.

They are stored like observations and must travel with the same rows: the flat generator's
samples, the recurrent generator's padded trajectories, the distillation generator's steps.
"""

from __future__ import annotations

import pytest
import torch

from episodes.rollout import RolloutStorage, Transition, split_and_pad_trajectories
from tests.rollout._helpers import random_steps, stack_steps

T, N = 5, 4


def storage_with_privileged(device, training_type="rl", hidden=None, dict_obs=False):
    steps = random_steps(T, N, device, hidden=hidden, done_p=0.3, seed=1)
    g = torch.Generator().manual_seed(7)
    for step in steps:
        priv = torch.randn(N, 5, generator=g).to(device)
        step["privileged_observations"] = {"critic": priv} if dict_obs else priv
    spec = steps[0]["privileged_observations"]
    s = RolloutStorage(
        training_type,
        N,
        T,
        steps[0]["observations"],
        (2,),
        device=device,
        privileged_observations=spec,
        distribution_params=[(2,), (2,)] if training_type == "rl" else None,
        actor_hidden_state=steps[0]["hidden_states"][0] if hidden else None,
        critic_hidden_state=steps[0]["hidden_states"][1] if hidden else None,
    )
    for step in steps:
        s.add_transition(Transition(**step))
    if training_type == "rl":
        s.compute_returns(torch.zeros(N, 1, device=device), 0.99, 0.95)
    return s, steps


@pytest.mark.parametrize("dict_obs", [False, True], ids=["tensor", "dict"])
def test_stored_as_given(device, dict_obs):
    s, steps = storage_with_privileged(device, dict_obs=dict_obs)
    want = stack_steps(steps, "privileged_observations")
    got = s.privileged_observations
    if dict_obs:
        assert got.keys() == want.keys() and torch.equal(got["critic"], want["critic"])
    else:
        assert torch.equal(got, want)


def test_flat_batches_carry_the_rows_of_their_samples(device):
    s, _ = storage_with_privileged(device)
    s.values.copy_(torch.arange(T * N, dtype=torch.float32, device=device).view(T, N, 1))
    flat = s.privileged_observations.reshape(T * N, -1)
    seen = 0
    for batch in s.mini_batch_generator(3, 2):
        rows = batch.values.view(-1).long()
        assert torch.equal(batch.privileged_observations, flat[rows])
        assert torch.equal(batch.observations, s.observations.reshape(T * N, -1)[rows])
        seen += len(rows)
    assert seen == 2 * T * N


def test_recurrent_batches_pad_them_like_observations(device):
    s, _ = storage_with_privileged(device, hidden="gru")
    e0 = 0
    for batch in s.recurrent_mini_batch_generator(2, 1):
        e1 = e0 + N // 2
        padded, masks = split_and_pad_trajectories(
            s.privileged_observations[:, e0:e1], s.dones[:, e0:e1]
        )
        assert torch.equal(batch.masks, masks)
        assert torch.equal(batch.privileged_observations, padded)
        e0 = e1


def test_distillation_steps_carry_them(device):
    s, steps = storage_with_privileged(device, training_type="distillation")
    batches = list(s.generator())
    assert len(batches) == T
    for batch, step in zip(batches, steps, strict=True):
        assert torch.equal(batch.privileged_observations, step["privileged_observations"])


def test_a_storage_without_them_refuses_a_block_and_skips_a_transitions_copy():
    """write_block names the field it cannot take; add_transition, like rsl_rl's, stores
    only what the storage was built for."""
    steps = random_steps(2, N, "cpu")
    s = RolloutStorage("rl", N, 2, steps[0]["observations"], (2,), distribution_params=[(2,)] * 2)
    before = s.observations.clone()
    with pytest.raises(ValueError, match=r"unknown fields \['privileged_observations'\]"):
        s.write_block(0, observations=steps[0]["observations"][None], privileged_observations=1)
    assert s.step == 0 and torch.equal(s.observations, before)
    s.add_transition(Transition(**steps[0], privileged_observations=torch.ones(N, 5)))
    assert s.step == 1 and s.privileged_observations is None
