"""Rollout bugs a hunt found, pinned: one table or focused test per bug.

- A cell outside ``RolloutStorage.valid`` (a next-step reset step, per-chunk padding) may hold
  anything: a NaN or inf value (a diverged state's), or a finite 1e20. It used to reach the
  valid cells through GAE (``0 * NaN``) and through the normalisation over valid cells
  (``x * weight``, a 1e20 squared overflowing float32). Masked cells are now selected away.
- ``compute_returns`` / ``compute_gae`` took any ``gamma`` and ``lam`` (1.5, NaN), while the
  converter refuses such a ``gamma``.
"""

from __future__ import annotations

import math

import pytest
import torch

from episodes.rollout import RolloutStorage, compute_gae, normalize_into, normalize_over

GAMMA, LAM = 0.9, 0.95

# What a cell holding no transition may hold: the masked value and the masked reward.
POISON = {
    "nan_value": (math.nan, 0.0),
    "inf_value": (math.inf, 0.0),
    "minus_inf_value": (-math.inf, 0.0),
    "huge_finite_value": (1e20, 0.0),
    "nan_reward": (0.5, math.nan),
    "inf_value_and_reward": (math.inf, -math.inf),
}


def storage_with_empty_cells(
    device: torch.device, value: float, reward: float, *, done_at_empty: bool = True
):
    """3 envs x 6 steps; env 0's step 2 and env 1's last step hold no transition.

    As the converter lays them out: the step before an empty cell ends its episode, and the
    empty cell is done (``done_at_empty``) with reward 0, unless the case poisons it.
    """
    g = torch.Generator().manual_seed(0)
    st = RolloutStorage("rl", 3, 6, (2,), (1,), device=device)
    st.rewards.copy_(torch.rand(6, 3, 1, generator=g))
    st.values.copy_(torch.rand(6, 3, 1, generator=g))
    st.dones[1, 0] = st.dones[4, 1] = True
    valid = torch.ones(6, 3, dtype=torch.bool, device=device)
    valid[2, 0] = valid[5, 1] = False
    st.dones[~valid] = done_at_empty
    st.values[~valid] = value
    st.rewards[~valid] = reward
    st.valid = valid
    return st


def clean_twin(st: RolloutStorage) -> RolloutStorage:
    """The same storage with 0 reward and 0 value in its empty cells (nothing to leak)."""
    twin = RolloutStorage("rl", st.num_envs, st.num_transitions_per_env, (2,), (1,), st.device)
    for name in ("rewards", "values", "dones"):
        getattr(twin, name).copy_(getattr(st, name))
    empty = ~st.valid
    twin.values[empty] = 0.0
    twin.rewards[empty] = 0.0
    twin.valid = st.valid.clone()
    return twin


@pytest.mark.parametrize("poison", POISON.values(), ids=POISON.keys())
@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalised"])
def test_an_empty_cell_reaches_no_valid_advantage(device, poison, normalize):
    st = storage_with_empty_cells(device, *poison)
    twin = clean_twin(st)
    last = torch.rand(3, 1, generator=torch.Generator().manual_seed(1)).to(device)
    st.compute_returns(last, GAMMA, LAM, normalize_advantage=normalize)
    twin.compute_returns(last, GAMMA, LAM, normalize_advantage=normalize)
    valid = st.valid
    assert bool(torch.isfinite(st.advantages[valid]).all())
    torch.testing.assert_close(st.advantages[valid], twin.advantages[valid])
    torch.testing.assert_close(st.returns[valid], twin.returns[valid])
    if not normalize:
        assert st.advantages[~valid].abs().sum().item() == 0.0  # an empty cell's GAE is 0
    batch = next(st.mini_batch_generator(1, num_epochs=1))
    assert bool(torch.isfinite(batch.advantages).all())
    rec = next(st.recurrent_mini_batch_generator(1, num_epochs=1))
    assert bool(torch.isfinite(rec.advantages[rec.valid]).all())


@pytest.mark.parametrize("poison", POISON.values(), ids=POISON.keys())
def test_an_empty_cell_that_is_not_done_feeds_nothing_either(device, poison):
    """A hand-set mask without dones: the empty cell still ends its episode, read as 0."""
    st = storage_with_empty_cells(device, *poison, done_at_empty=False)
    twin = clean_twin(st)
    twin.dones[~twin.valid] = True
    last = torch.zeros(3, 1, device=device)
    st.compute_returns(last, GAMMA, LAM, normalize_advantage=False)
    twin.compute_returns(last, GAMMA, LAM, normalize_advantage=False)
    torch.testing.assert_close(st.advantages, twin.advantages)


def test_compute_gae_with_valid_matches_the_reference_on_valid_cells(device):
    """Where no empty cell holds anything, ``valid`` changes nothing on the valid cells."""
    st = storage_with_empty_cells(device, 0.0, 0.0)
    last = torch.rand(3, 1).to(device)
    with_mask = compute_gae(st.rewards, st.values, st.dones, last, GAMMA, LAM, valid=st.valid)
    without = compute_gae(st.rewards, st.values, st.dones, last, GAMMA, LAM)
    torch.testing.assert_close(with_mask[st.valid], without[st.valid])
    # A [T, N] mask serves [T, N, 1] data; another shape is refused.
    with pytest.raises(ValueError, match="valid has shape"):
        compute_gae(st.rewards, st.values, st.dones, last, GAMMA, LAM, valid=st.valid.T)


def test_compute_gae_leaves_its_inputs_untouched_with_a_mask(device):
    st = storage_with_empty_cells(device, math.nan, math.inf)
    before = {k: getattr(st, k).clone() for k in ("rewards", "values", "dones")}
    last = torch.zeros(3, device=device)
    compute_gae(st.rewards, st.values, st.dones, last, GAMMA, LAM, valid=st.valid)
    for name, tensor in before.items():
        torch.testing.assert_close(getattr(st, name), tensor, rtol=0, atol=0, equal_nan=True)


NORMALISE_POISON = {"nan": math.nan, "inf": math.inf, "huge": 1e20, "huge_negative": -3e19}


@pytest.mark.parametrize("poison", NORMALISE_POISON.values(), ids=NORMALISE_POISON.keys())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_normalisation_never_reads_an_empty_cell(device, poison, dtype):
    if dtype == torch.float16 and abs(poison) > 65504:
        poison = math.copysign(math.inf, poison)  # float16's largest finite is 65504
    values = torch.tensor([[1.0, 0.0], [3.0, 0.0], [2.0, 5.0]], dtype=dtype, device=device)
    valid = torch.tensor([[True, False], [True, False], [True, True]], device=device)
    kept = values[valid].double()
    want = ((kept - kept.mean()) / (kept.std() + 1e-8)).to(dtype)
    values[~valid] = poison
    for got in (
        normalize_over(values.clone(), valid),
        normalize_into(torch.empty_like(values), values.clone(), valid),
    ):
        torch.testing.assert_close(got[valid], want, atol=2e-3, rtol=2e-3)


BAD_DISCOUNTS = {
    "above_one": 1.5,
    "negative": -0.1,
    "nan": math.nan,
    "inf": math.inf,
    "bool": True,
    "string": "0.9",
}


@pytest.mark.parametrize("bad", BAD_DISCOUNTS.values(), ids=BAD_DISCOUNTS.keys())
@pytest.mark.parametrize("which", ["gamma", "lam"])
def test_compute_returns_refuses_a_gamma_or_lam_outside_0_1(bad, which):
    st = RolloutStorage("rl", 2, 3, (1,), (1,))
    st.rewards.fill_(1.0)
    st.compute_returns(torch.zeros(2), GAMMA, LAM, normalize_advantage=False)
    before = {k: t.clone() for k, t in st.tensors.items()}
    args = {"gamma": GAMMA, "lam": LAM, which: bad}
    with pytest.raises(ValueError, match=f"{which} must be a float in \\[0, 1\\]"):
        st.compute_returns(torch.zeros(2), args["gamma"], args["lam"])
    with pytest.raises(ValueError, match=f"{which} must be a float in \\[0, 1\\]"):
        compute_gae(st.rewards, st.values, st.dones, torch.zeros(2), args["gamma"], args["lam"])
    for name, tensor in st.tensors.items():
        assert torch.equal(tensor, before[name]), f"{name} written by a refused call"


@pytest.mark.parametrize("gamma, lam", [(0, 1), (1, 0), (0.0, 0.0), (1.0, 1.0)])
def test_the_ends_of_0_1_are_taken(gamma, lam):
    st = RolloutStorage("rl", 1, 2, (1,), (1,))
    st.rewards.fill_(1.0)
    st.compute_returns(torch.zeros(1), gamma, lam, normalize_advantage=False)
    assert torch.isfinite(st.returns).all()
