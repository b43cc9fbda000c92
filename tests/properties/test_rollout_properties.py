"""Rollout storage properties on drawn rollouts: generator coverage and GAE."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes.testing.strategies import rollouts

torch = pytest.importorskip("torch")
rollout = pytest.importorskip("episodes.rollout")


def _storage(r):
    t, n, obs = r["observations"].shape
    act = r["actions"].shape[-1]
    storage = rollout.RolloutStorage("rl", n, t, (obs,), (act,))
    storage.write_block(
        0,
        observations=r["observations"],
        actions=r["actions"],
        rewards=r["rewards"],
        dones=r["dones"],
        values=r["values"],
        actions_log_prob=r["actions_log_prob"],
        distribution_params=r["distribution_params"],
    )
    return storage


def reference_gae(rewards, values, dones, last_values, gamma, lam):
    t_steps = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    next_adv = torch.zeros_like(rewards[0])
    for t in reversed(range(t_steps)):
        next_values = last_values if t == t_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t].float()
        delta = rewards[t] + not_done * gamma * next_values - values[t]
        next_adv = delta + not_done * gamma * lam * next_adv
        adv[t] = next_adv
    return adv


gammas = st.sampled_from([0.0, 0.5, 0.99, 1.0])


@given(rollouts(T=(1, 12), N=(1, 5)), gammas, gammas)
def test_gae_matches_the_reference_loop(r, gamma, lam):
    got = rollout.compute_gae(r["rewards"], r["values"], r["dones"], r["last_values"], gamma, lam)
    want = reference_gae(r["rewards"], r["values"], r["dones"], r["last_values"], gamma, lam)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


@given(rollouts(), st.data())
def test_mini_batches_cover_each_sample_exactly_once_per_epoch(r, data):
    storage = _storage(r)
    storage.compute_returns(r["last_values"], 0.99, 0.95)
    total = storage.num_envs * storage.num_transitions_per_env
    num_mb = data.draw(st.integers(1, total), label="num_mini_batches")
    epochs = data.draw(st.integers(1, 2), label="num_epochs")
    # Tag every sample by its flat index through the (unique) old log-prob field.
    tags = torch.arange(total, dtype=torch.float32).reshape(storage.num_transitions_per_env, -1)
    storage.actions_log_prob.copy_(tags.unsqueeze(-1))
    seen = [b.old_actions_log_prob.flatten() for b in storage.mini_batch_generator(num_mb, epochs)]
    assert len(seen) == num_mb * epochs
    for e in range(epochs):
        epoch = torch.cat(seen[e * num_mb : (e + 1) * num_mb]).sort().values
        assert torch.equal(epoch, torch.arange(total, dtype=torch.float32))


@given(rollouts(), st.data())
def test_recurrent_batches_cover_each_step_once(r, data):
    storage = _storage(r)
    storage.compute_returns(r["last_values"], 0.99, 0.95)
    num_mb = data.draw(st.integers(1, storage.num_envs), label="num_mini_batches")
    t, n = storage.num_transitions_per_env, storage.num_envs
    tags = torch.arange(t * n, dtype=torch.float32).reshape(t, n, 1)
    storage.observations.copy_(tags.expand_as(storage.observations))
    seen = []
    for batch in storage.recurrent_mini_batch_generator(num_mb, num_epochs=1):
        obs = batch.observations[..., 0]
        seen.append(obs[batch.masks])
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(t * n, dtype=torch.float32))
