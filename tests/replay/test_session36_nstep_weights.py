"""The replay buffer's n-step sums equal the datasets' to the last bit.

The buffer weighted its terms by Python's ``gamma**k`` and the datasets (``TransitionDataset``,
``read_transitions``, the Ray rows) by numpy's powers; the two differ in the last bit for
many discount factors, so one episode gave two n-step returns.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.io.nstep import discount_weights, discounted_sum
from episodes.replay.nstep import n_step_returns
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable


def _stored(rewards):
    store, table = StepStore(), EpisodeTable()
    count = len(rewards)
    row = table.open("a", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
    store.reserve(count)
    rows = {"obs": np.zeros((count, 1)), "actions": np.zeros(count), "rewards": rewards}
    store.append(rows, {}, [{}] * count, ep_row=row, t0=0, prev_slot=-1)
    return store, table


@settings(max_examples=60, deadline=None)
@given(
    gamma=st.floats(0.05, 1.0),
    n_step=st.integers(2, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_replay_sums_equal_the_datasets(gamma, n_step, seed):
    # float32 values: the store keeps rewards as float32
    rewards = np.random.default_rng(seed).normal(size=50).astype(np.float32).astype(np.float64)
    store, table = _stored(rewards)
    slots = np.arange(50)
    got = n_step_returns(store, table, slots, np.full(50, n_step), gamma).rewards
    weights = discount_weights(gamma, n_step)
    want = [float(discounted_sum(rewards[k : k + n_step], weights)) for k in range(50)]
    assert got.tolist() == want


@pytest.mark.parametrize("gamma", [0.9, 0.99, 0.997, 0.3, 0.01])
@pytest.mark.parametrize("n_step", [64, 65, 300, 2**63])  # past the first 64 weights made
def test_named_discounts_equal_the_datasets(gamma, n_step):
    rewards = np.linspace(-3.0, 7.0, 300).astype(np.float32).astype(np.float64)
    store, table = _stored(rewards)
    got = n_step_returns(store, table, np.arange(300), np.full(300, n_step), gamma).rewards
    weights = discount_weights(gamma, min(n_step, 300))
    want = [float(discounted_sum(rewards[k : k + n_step], weights)) for k in range(300)]
    assert got.tolist() == want


def test_monte_carlo_weights_grow_by_doubling(monkeypatch):
    # Weights made one more at a time would cost quadratic time in the episode's length.
    from episodes.replay import nstep

    calls = []
    real = nstep.discount_weights
    monkeypatch.setattr(nstep, "discount_weights", lambda g, c: calls.append(c) or real(g, c))
    rewards = np.ones(5000)
    store, table = _stored(rewards)
    n_step_returns(store, table, np.array([0]), np.array([2**62]), 0.9999)
    assert len(calls) <= 10 and calls == sorted(calls)
