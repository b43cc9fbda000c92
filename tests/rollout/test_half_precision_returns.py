"""Half-precision storages: GAE and advantage normalisation are worked in float32.

A delta formed in float16 or bfloat16 rounds ``r - V`` before ``gamma * V'`` joins it, and a
mean rounded to float16 centres nothing: both lost most of float32's precision (and a centred
float16 advantage could overflow) where rsl_rl's float32 dones promote its deltas.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.rollout import bootstrap_time_outs, compute_gae, normalize_into
from episodes.rollout.generators import normalize_over


def _reference_gae(r, v, d, last, gamma, lam):  # float64, step by step
    adv, out = np.zeros(r.shape[1]), np.zeros_like(r)
    for t in reversed(range(len(r))):
        nxt = last if t == len(r) - 1 else v[t + 1]
        keep = 1.0 - d[t]
        adv = r[t] + gamma * keep * nxt - v[t] + gamma * lam * keep * adv
        out[t] = adv
    return out


# dtype: (the largest error from the float64 advantages allowed; float32's rounding of values
# of about 20, times the few steps it compounds over, with room)
BOUNDS = {torch.float16: 0.03, torch.bfloat16: 0.25}


@pytest.mark.parametrize("steps", [64, 1000], ids=["loop", "log-scan"])
@pytest.mark.parametrize("dtype", list(BOUNDS), ids=str)
def test_gae_keeps_float32_precision_on_half_storages(dtype, steps) -> None:
    g = torch.Generator().manual_seed(0)
    # Many envs over few steps take the loop: ceil(log2 T) * N > 512 * T.
    num_envs = 4 if steps == 1000 else 6000
    r = (torch.randn(steps, num_envs, generator=g) * 2).to(dtype)
    v = (torch.randn(steps, num_envs, generator=g) * 10 + 20).to(dtype)
    d = torch.rand(steps, num_envs, generator=g) < 0.01
    last = (torch.randn(num_envs, generator=g) + 20).to(dtype)
    want = _reference_gae(
        r.double().numpy(),
        v.double().numpy(),
        d.double().numpy(),
        last.double().numpy(),
        0.99,
        0.95,
    )
    got = compute_gae(r, v, d, last, 0.99, 0.95)
    assert got.dtype == dtype
    assert np.abs(got.double().numpy() - want).max() < BOUNDS[dtype]


def test_a_float16_delta_within_range_stays_finite() -> None:
    r = torch.tensor([[60000.0], [0.0]], dtype=torch.float16)
    v = torch.tensor([[-30000.0], [-30000.0]], dtype=torch.float16)
    last = torch.tensor([-30000.0], dtype=torch.float16)
    adv = compute_gae(r, v, torch.zeros(2, 1, dtype=torch.bool), last, 1.0, 0.0)
    assert adv[0, 0].item() == 60000.0


CASES = {
    # name: (float16 advantages, what float64 normalisation of those stored values gives)
    "a mean float16 rounds": ([1000.0, 1000.5, 1000.5, 1000.0, 1000.5, 1000.5], None),
    "centring past 65504": ([60000.0, -60000.0, -60000.0, -60000.0], None),
}


def _float64_normalised(values: torch.Tensor) -> np.ndarray:
    x = values.double().numpy()
    return (x - x.mean()) / (x.std(ddof=1) + 1e-8)


@pytest.mark.parametrize("with_valid", [False, True], ids=["all cells", "valid mask"])
@pytest.mark.parametrize("case", list(CASES))
def test_normalisation_of_half_advantages(case: str, with_valid: bool) -> None:
    stored = torch.tensor(CASES[case][0], dtype=torch.float16)
    want = _float64_normalised(stored)
    if with_valid:
        got = normalize_over(stored.clone(), torch.ones(len(stored), dtype=torch.bool))
    else:
        got = normalize_into(torch.empty_like(stored), stored.clone())
    assert got.dtype == torch.float16
    np.testing.assert_allclose(got.double().numpy(), want, atol=2e-3)


@pytest.mark.parametrize("gamma", [float("nan"), 2.0, -1.0, "0.5", True])
def test_bootstrap_time_outs_checks_gamma(gamma) -> None:
    with pytest.raises(ValueError, match="gamma must be a float in"):
        bootstrap_time_outs(torch.zeros(2), torch.ones(2), torch.tensor([True, False]), gamma)
