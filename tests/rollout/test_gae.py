from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import bootstrap_time_outs, compute_gae
from episodes.rollout import gae as gae_module


def reference_gae(rewards, values, dones, last_values, gamma, lam):
    """Plain textbook loop in float64."""
    r, v, d = rewards.double(), values.double(), dones.double()
    lv = last_values.double().reshape(r.shape[1:])
    adv = torch.zeros_like(r)
    running = torch.zeros_like(lv)
    for t in reversed(range(r.shape[0])):
        nxt = lv if t == r.shape[0] - 1 else v[t + 1]
        delta = r[t] + gamma * nxt * (1 - d[t]) - v[t]
        running = delta + gamma * lam * (1 - d[t]) * running
        adv[t] = running
    return adv


def make(t, n, done_fn, device, seed=0, trailing=True):
    g = torch.Generator().manual_seed(seed)
    shape = (t, n, 1) if trailing else (t, n)
    r = torch.randn(shape, generator=g)
    v = torch.randn(shape, generator=g)
    d = done_fn(t, n).reshape(shape)
    lv = torch.randn(n, 1, generator=g)
    return r.to(device), v.to(device), d.to(device), lv.to(device)


DONE_PATTERNS = {
    "none": lambda t, n: torch.zeros(t, n, dtype=torch.bool),
    "all": lambda t, n: torch.ones(t, n, dtype=torch.bool),
    "first": lambda t, n: torch.arange(t).unsqueeze(1).expand(t, n) == 0,
    "last": lambda t, n: torch.arange(t).unsqueeze(1).expand(t, n) == t - 1,
    "alternate": lambda t, n: (torch.arange(t).unsqueeze(1) + torch.arange(n)) % 2 == 0,
    "random": lambda t, n: torch.rand(t, n, generator=torch.Generator().manual_seed(1)) < 0.2,
}
SIZES = {"T1": (1, 3), "T2": (2, 5), "T24": (24, 16), "T300_scan": (300, 4), "T70": (70, 2)}
GAMMA_LAM = {
    "std": (0.99, 0.95),
    "g0": (0.0, 0.95),
    "l0": (0.99, 0.0),
    "g1l1": (1.0, 1.0),
    "g0l0": (0.0, 0.0),
    "g1l0": (1.0, 0.0),
}


# compute_gae picks one of two scans from the shape: a log-depth scan over all envs at once
# (long T, few envs) or a loop over T (many envs: rsl_rl's T=24, N=4096). The threshold is
# forced both ways so that every case below runs through both.
SCANS = {"log_scan": 10**12, "loop_scan": 0}


@pytest.fixture(params=SCANS.values(), ids=SCANS.keys())
def scan(request, monkeypatch):
    monkeypatch.setattr(gae_module, "_ELEMENTS_PER_DISPATCH", request.param)
    return request.param


@pytest.mark.parametrize("pattern", DONE_PATTERNS.values(), ids=DONE_PATTERNS.keys())
@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("gl", GAMMA_LAM.values(), ids=GAMMA_LAM.keys())
def test_matches_reference_loop(device, pattern, size, gl, scan):
    t, n = size
    gamma, lam = gl
    r, v, d, lv = make(t, n, pattern, device)
    got = compute_gae(r, v, d, lv, gamma, lam)
    want = reference_gae(r.cpu(), v.cpu(), d.cpu(), lv.cpu(), gamma, lam)
    assert got.shape == r.shape and got.dtype == r.dtype and got.device == r.device
    scale = max(1.0, float(want.abs().max()))
    torch.testing.assert_close(got.cpu().double(), want, atol=1e-6 * scale, rtol=1e-6)


@pytest.mark.parametrize("pos", range(6), ids=lambda p: f"done_at_{p}")
def test_done_at_every_position(device, pos, scan):
    r, v, d, lv = make(6, 3, lambda t, n: torch.arange(t).unsqueeze(1).expand(t, n) == pos, device)
    got = compute_gae(r, v, d, lv, 0.9, 0.8)
    torch.testing.assert_close(
        got.cpu().double(), reference_gae(r, v, d, lv, 0.9, 0.8).cpu(), atol=1e-6, rtol=1e-6
    )


def test_two_dim_inputs_and_dtypes(device):
    r, v, d, lv = make(5, 4, DONE_PATTERNS["random"], device, trailing=False)
    got = compute_gae(r, v, d.float(), lv.squeeze(1), 0.99, 0.95)
    assert got.shape == (5, 4)
    want = reference_gae(r.cpu(), v.cpu(), d.cpu(), lv.cpu(), 0.99, 0.95)
    torch.testing.assert_close(got.cpu().double(), want, atol=1e-6, rtol=1e-6)
    got64 = compute_gae(r.double(), v.double(), d.to(torch.uint8), lv.double(), 0.99, 0.95)
    assert got64.dtype == torch.float64
    torch.testing.assert_close(got64.cpu(), want, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("size", [(24, 4096), (300, 4)], ids=["T24_N4096", "T300_N4"])
def test_unforced_choice_matches_reference(device, size):
    """At rsl_rl's shape and at a long, narrow one, with the threshold as shipped."""
    t, n = size
    r, v, d, lv = make(t, n, DONE_PATTERNS["random"], device)
    want = reference_gae(r.cpu(), v.cpu(), d.cpu(), lv.cpu(), 0.99, 0.95)
    got = compute_gae(r, v, d, lv, 0.99, 0.95)
    torch.testing.assert_close(got.cpu().double(), want, atol=1e-5, rtol=1e-5)


def test_scans_agree_bit_for_bit_where_no_episode_continues(monkeypatch):
    """With every step done, both scans reduce to advantages = delta: no rounding differs."""
    r, v, d, lv = make(24, 64, DONE_PATTERNS["all"], "cpu")
    outs = []
    for threshold in SCANS.values():
        monkeypatch.setattr(gae_module, "_ELEMENTS_PER_DISPATCH", threshold)
        outs.append(compute_gae(r, v, d, lv, 0.99, 0.95))
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0], r - v)


def test_out_and_inputs_untouched(device, scan):
    r, v, d, lv = make(8, 3, DONE_PATTERNS["random"], device)
    r0, v0 = r.clone(), v.clone()
    out = torch.empty(8, 3, 4, device=device)[..., 1:2]  # strided destination
    res = compute_gae(r, v, d, lv, 0.99, 0.95, out=out)
    assert res is out
    torch.testing.assert_close(out, compute_gae(r, v, d, lv, 0.99, 0.95))
    assert torch.equal(r, r0) and torch.equal(v, v0)


def test_bad_shapes():
    r = torch.zeros(3, 2, 1)
    with pytest.raises(ValueError, match="values"):
        compute_gae(r, torch.zeros(4, 2), torch.zeros(3, 2), torch.zeros(2), 0.9, 0.9)
    with pytest.raises(TypeError):
        compute_gae(r.long(), r, r, torch.zeros(2), 0.9, 0.9)
    with pytest.raises(ValueError, match=r"\[T, N\]"):
        compute_gae(torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(()), 0.9, 0.9)
    with pytest.raises(ValueError, match="out has shape"):
        compute_gae(r, r, r, torch.zeros(2, 1), 0.9, 0.9, out=torch.zeros(3, 2))


@pytest.mark.parametrize(
    "field, shape",
    [
        ("values", (2, 3)),  # [N, T] for [T, N]: the same count, envs and steps mixed
        ("values", (6,)),
        ("dones", (2, 3, 1)),
        ("last_values", (1, 2)),
    ],
)
def test_same_count_in_another_shape_is_refused(field, shape):
    args = {
        "rewards": torch.zeros(3, 2),
        "values": torch.zeros(3, 2),
        "dones": torch.zeros(3, 2),
        "last_values": torch.zeros(2),
    }
    args[field] = torch.zeros(shape)
    with pytest.raises(ValueError, match=field):
        compute_gae(**args, gamma=0.9, lam=0.9)
    with pytest.raises(ValueError, match="values"):
        bootstrap_time_outs(torch.zeros(3, 2), torch.zeros(2, 3), torch.zeros(3, 2), 0.9)


@pytest.mark.parametrize("values_shape", [(3, 2), (3, 2, 1), (3, 2, 1, 1)])
def test_a_trailing_unit_dimension_may_differ(values_shape):
    r = torch.ones(3, 2, 1)
    got = compute_gae(r, torch.zeros(values_shape), torch.zeros(3, 2), torch.zeros(2), 1.0, 1.0)
    assert got[:, 0, 0].tolist() == [3.0, 2.0, 1.0]


def test_zero_steps_give_an_empty_result():
    r = torch.zeros(0, 4, 1)
    out = compute_gae(r, r, r.bool(), torch.zeros(4, 1), 0.99, 0.95)
    assert out.shape == (0, 4, 1)


@settings(max_examples=40, deadline=None)
@given(
    t=st.integers(1, 150),
    n=st.integers(1, 6),
    p=st.floats(0, 1),
    gamma=st.floats(0, 1),
    lam=st.floats(0, 1),
    seed=st.integers(0, 2**16),
    loop=st.booleans(),
)
def test_property_matches_reference(t, n, p, gamma, lam, seed, loop):
    g = torch.Generator().manual_seed(seed)
    r, v = torch.randn(t, n, 1, generator=g), torch.randn(t, n, 1, generator=g)
    d = torch.rand(t, n, 1, generator=g) < p
    lv = torch.randn(n, 1, generator=g)
    want = reference_gae(r, v, d, lv, gamma, lam)
    scale = max(1.0, float(want.abs().max()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gae_module, "_ELEMENTS_PER_DISPATCH", 0 if loop else 10**12)
        got = compute_gae(r, v, d, lv, gamma, lam)
    torch.testing.assert_close(got.double(), want, atol=2e-6 * scale, rtol=1e-5)


def test_bootstrap_time_outs(device):
    r = torch.tensor([1.0, 2.0, 3.0], device=device)
    v = torch.tensor([[10.0], [20.0], [30.0]], device=device)
    to = torch.tensor([True, False, True], device=device)
    out = bootstrap_time_outs(r, v, to, 0.5)
    assert torch.equal(out, torch.tensor([6.0, 2.0, 18.0], device=device))
    assert torch.equal(r, torch.tensor([1.0, 2.0, 3.0], device=device))  # not in place
    assert bootstrap_time_outs(r.unsqueeze(1), v, to.float(), 0.5).shape == (3, 1)


def test_bootstrap_of_integer_rewards_is_floating():
    """Integer rewards cast the bootstrapped values to integers: 1 + 0.99 * 0.7 came out 1."""
    out = bootstrap_time_outs(
        torch.tensor([1, 1]), torch.tensor([0.7, 0.7]), torch.tensor([True, False]), 0.99
    )
    assert out.dtype == torch.float32
    assert out.tolist() == pytest.approx([1 + 0.99 * 0.7, 1.0])


def test_bootstrap_keeps_float_rewards_dtype():
    out = bootstrap_time_outs(
        torch.ones(2), torch.ones(2, dtype=torch.float64), torch.tensor([True, False]), 0.5
    )
    assert out.dtype == torch.float32 and out.tolist() == [1.5, 1.0]
