"""A cell outside ``storage.valid`` has advantage 0 after a normalisation too (contract 9.3).

The normalisation shifted and scaled such a cell with the valid ones, so it came out as
``-mean / std`` (-2.63 in the hunt's repro): a loss not weighted by the mask trained on it.
Whole-batch (``compute_returns``), per mini-batch (the recurrent generator) and the public
helpers alike; a storage without ``valid`` is normalised as before (rsl_rl's formula).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.episode import SingleAgentEpisode
from episodes.rollout import RolloutStorage, normalize_into, normalize_over

# (rewards, valid) of a [T=3, N=2] storage: the hunt's repro and variations of it.
HOLES = {
    "one hole": ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[1, 1], [1, 0], [1, 1]]),
    "leading run": ([[9.0, 2.0], [8.0, 4.0], [5.0, 6.0]], [[0, 1], [0, 1], [1, 1]]),
    "trailing run": ([[1.0, -2.0], [3.0, 7.0], [5.0, 6.0]], [[1, 1], [1, 1], [0, 0]]),
    "one valid cell": ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[0, 0], [0, 1], [0, 0]]),
    "no valid cell": ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[0, 0], [0, 0], [0, 0]]),
}


def _storage(rewards, valid, device, dtype=torch.float32):
    st = RolloutStorage("rl", 2, 3, (1,), (1,), device, dtype=dtype)
    st.rewards.copy_(torch.tensor(rewards, device=device).view_as(st.rewards))
    st.values.copy_(torch.linspace(-1.0, 1.0, 6, device=device).view_as(st.values))
    st.valid = torch.tensor(valid, dtype=torch.bool, device=device)
    st.dones.view(3, 2)[~st.valid] = True  # as the converter marks them
    return st


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("case", HOLES.values(), ids=HOLES.keys())
def test_compute_returns_leaves_invalid_cells_at_zero(device, case, dtype):
    rewards, valid = case
    st = _storage(rewards, valid, device, dtype)
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9, normalize_advantage=False)
    raw = st.advantages.view(3, 2).double()
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9)  # normalised: the default
    adv, mask = st.advantages.view(3, 2), st.valid
    assert adv[~mask].cpu().tolist() == [0.0] * int((~mask).sum())
    kept = raw[mask]
    if len(kept) > 1:
        want = (kept - kept.mean()) / (kept.std() + 1e-8)
        torch.testing.assert_close(adv[mask].double(), want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("poison", [math.nan, math.inf, 1e20], ids=["nan", "inf", "huge"])
def test_the_helpers_zero_what_they_never_read(device, poison):
    values = torch.tensor([[1.0, poison], [3.0, poison], [2.0, 5.0]], device=device)
    valid = torch.tensor([[True, False], [True, False], [True, True]], device=device)
    for got in (
        normalize_over(values.clone(), valid),
        normalize_into(torch.empty_like(values), values.clone(), valid),
        normalize_over(values.clone().unsqueeze(-1), valid).squeeze(-1),  # a trailing 1
    ):
        assert got[~valid].cpu().tolist() == [0.0, 0.0]
        assert torch.isfinite(got).all()


@pytest.mark.parametrize("case", HOLES.values(), ids=HOLES.keys())
def test_recurrent_per_mini_batch_normalisation_zeroes_invalid_cells(device, case):
    st = _storage(*case, device)
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9, normalize_advantage=False)
    for num_mini_batches in (1, 2):
        batches = st.recurrent_mini_batch_generator(
            num_mini_batches, num_epochs=1, normalize_advantage_per_mini_batch=True
        )
        for batch in batches:
            assert batch.valid is not None
            out = batch.advantages.squeeze(-1)[~batch.valid]
            assert out.cpu().tolist() == [0.0] * len(out)


def test_flat_per_mini_batch_batches_hold_valid_cells_only(device):
    st = _storage(*HOLES["one hole"], device)
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9, normalize_advantage=False)
    batches = list(st.mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True))
    assert [len(b.advantages) for b in batches] == [5]


def test_a_storage_without_valid_normalises_as_rsl_rl(device):
    st = _storage(*HOLES["one hole"], device)
    st.valid = None
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9, normalize_advantage=False)
    raw = st.advantages.clone()
    st.compute_returns(torch.zeros(2, 1, device=device), 0.9, 0.9)
    torch.testing.assert_close(st.advantages, (raw - raw.mean()) / (raw.std() + 1e-8))
    assert torch.equal(st.advantages, normalize_into(torch.empty_like(raw), raw.clone()))
    (batch,) = st.recurrent_mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True)
    adv = st.advantages
    assert batch.valid is None
    assert torch.equal(batch.advantages, (adv - adv.mean()) / (adv.std() + 1e-8))


def test_per_chunk_padding_has_advantage_zero():
    def chunk(n: int, terminated: bool) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            observations=[np.full(2, float(i), np.float32) for i in range(n + 1)],
            actions=[0] * n,
            rewards=[1.0 + i for i in range(n)],
            extra_model_outputs={"vf_preds": [0.5] * n, "action_logp": [0.0] * n},
            terminated=terminated,
            len_lookback_buffer=0,
        )

    rollout = episodes_to_rollout(
        [chunk(5, False), chunk(2, True)],
        gamma=0.9,
        value_fn=lambda obs: np.ones(len(obs)),
        layout="per_chunk",
    )
    st = rollout.storage
    assert st.valid is not None and not st.valid.all()
    st.compute_returns(rollout.last_values, 0.9, 0.95)
    assert st.advantages.squeeze(-1)[~st.valid].tolist() == [0.0, 0.0, 0.0]
    (batch,) = st.recurrent_mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True)
    assert batch.advantages.squeeze(-1)[~st.valid].tolist() == [0.0, 0.0, 0.0]
