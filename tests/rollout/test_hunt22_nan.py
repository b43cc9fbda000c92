"""Cells without a transition get value, advantage and return 0 in ``compute_returns``.

A cell outside ``storage.valid`` (a next-step reset step with ``window="vector_steps"``) kept
the value the converter stored there, NaN for a diverged state, and its return was
``0 + NaN``: a recurrent batch handed both out, and a value loss weighted with
``batch.valid`` was NaN. ``compute_returns`` now sets such cells' values (and so returns) to
0, without a host sync; a shared values tensor is copied, not written.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA, LAM = 0.9, 0.95
NAN, INF = math.nan, math.inf


# ------------------------------------------------------------------ values of empty cells
class Diverging(gym.Env):
    """Truncated after 2 steps; its final observation is NaN (a diverged simulator state)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.k = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.k += 1
        obs = np.full(1, NAN if self.k == 2 else 0.0, np.float32)
        return obs, 1.0, False, self.k == 2, {}


def diverged_rollout():
    env = gym.vector.SyncVectorEnv([Diverging] * 2)  # next-step autoreset

    def policy(obs):  # V(obs): NaN on the NaN final observation
        obs = np.asarray(obs, np.float32)
        return np.zeros(len(obs), np.int64), {
            "vf_preds": obs[:, 0],
            "action_logp": np.zeros(len(obs), np.float32),
        }

    runner = EnvRunner(env, policy, seed=0, window="vector_steps")
    value_fn = lambda o: torch.zeros(len(o), dtype=torch.float64)  # noqa: E731
    return episodes_to_rollout(runner.sample(4), gamma=GAMMA, value_fn=value_fn)


def test_empty_cells_get_value_and_return_zero():
    ro = diverged_rollout()
    st = ro.storage
    empty = ~st.valid
    assert empty.any() and torch.isnan(st.values[empty]).all()  # what the converter stored
    st.compute_returns(ro.last_values, GAMMA, LAM)
    for name in ("values", "returns", "advantages"):
        assert (getattr(st, name)[empty] == 0).all(), name
    assert torch.isfinite(st.returns).all() and torch.isfinite(st.values).all()


def test_a_valid_weighted_recurrent_value_loss_is_finite():
    ro = diverged_rollout()
    st = ro.storage
    st.compute_returns(ro.last_values, GAMMA, LAM)
    (batch,) = st.recurrent_mini_batch_generator(1, 1)
    w = batch.valid.float()
    loss = ((batch.returns - batch.values) ** 2).squeeze(-1).mul(w).sum() / w.sum()
    assert math.isfinite(loss.item())
    (flat,) = st.mini_batch_generator(1, 1)
    assert loss.item() == pytest.approx(((flat.returns - flat.values) ** 2).mean().item())


def test_a_shared_values_tensor_is_copied_not_written():
    st = RolloutStorage("rl", 2, 3, (1,), (1,))
    values = torch.tensor([[0.5, 0.5], [NAN, 0.5], [0.5, INF]]).view(3, 2, 1)
    st.write_block(0, share=True, values=values, rewards=torch.ones(3, 2))
    st.dones[0, 0] = st.dones[1, 0] = st.dones[2, 1] = True
    valid = torch.ones(3, 2, dtype=torch.bool)
    valid[1, 0] = valid[2, 1] = False
    st.valid = valid
    st.compute_returns(torch.zeros(2, 1), GAMMA, LAM, normalize_advantage=False)
    assert math.isnan(values[1, 0, 0]) and math.isinf(values[2, 1, 0])  # the caller's
    assert "values" not in st.shared and st.values.data_ptr() != values.data_ptr()
    assert st.values[~valid].eq(0).all() and st.returns[~valid].eq(0).all()
    assert torch.isfinite(st.returns).all()
