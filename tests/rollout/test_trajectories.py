from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import split_and_pad_trajectories, trajectory_layout, unpad_trajectories


def naive_split(x: torch.Tensor, dones: torch.Tensor):
    """Per-trajectory Python loop: env-major, last step of each env ends a trajectory."""
    t_len, n = dones.shape[:2]
    d = dones.reshape(t_len, n).clone().bool()
    d[-1] = True
    trajs = []
    for env in range(n):
        start = 0
        for t in range(t_len):
            if d[t, env]:
                trajs.append(x[start : t + 1, env])
                start = t + 1
    padded = torch.zeros(t_len, len(trajs), *x.shape[2:], dtype=x.dtype)
    masks = torch.zeros(t_len, len(trajs), dtype=torch.bool)
    for j, tr in enumerate(trajs):
        padded[: len(tr), j] = tr
        masks[: len(tr), j] = True
    return padded, masks


CASES = {
    "no_dones": torch.zeros(4, 3, dtype=torch.bool),
    "all_dones": torch.ones(4, 3, dtype=torch.bool),
    "last_row_done": torch.tensor([[0, 0], [0, 0], [1, 1]], dtype=torch.bool),
    "first_row_done": torch.tensor([[1, 1], [0, 0], [0, 0]], dtype=torch.bool),
    "mixed": torch.tensor([[0, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 0]], dtype=torch.bool),
    "single_step": torch.tensor([[0, 1]], dtype=torch.bool),
    "single_env": torch.tensor([[0], [1], [0], [1], [0]], dtype=torch.bool),
}


@pytest.mark.parametrize("dones", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("feat", [(), (3,), (2, 2)], ids=["scalar", "vec", "mat"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8], ids=str)
def test_split_matches_naive_and_roundtrips(device, dones, feat, dtype):
    t, n = dones.shape
    x = torch.arange(t * n * max(1, torch.Size(feat).numel())).reshape(t, n, *feat).to(dtype)
    padded, masks = split_and_pad_trajectories(x.to(device), dones.unsqueeze(-1).to(device))
    want_p, want_m = naive_split(x, dones)
    assert padded.device.type == device.type and padded.dtype == dtype
    assert torch.equal(padded.cpu(), want_p) and torch.equal(masks.cpu(), want_m)
    assert torch.equal(unpad_trajectories(padded, masks).cpu(), x)


def test_dict_and_nested(device):
    dones = CASES["mixed"].to(device)
    obs = {
        "a": torch.randn(4, 3, 2, device=device),
        "b": {"c": torch.randint(0, 9, (4, 3), device=device)},
    }
    padded, masks = split_and_pad_trajectories(obs, dones)
    pa, ma = split_and_pad_trajectories(obs["a"], dones)
    assert torch.equal(padded["a"], pa) and torch.equal(masks, ma)
    assert padded["b"]["c"].dtype == torch.int64
    back = unpad_trajectories(padded, masks)
    assert torch.equal(back["a"], obs["a"]) and torch.equal(back["b"]["c"], obs["b"]["c"])


def test_layout_fields():
    lay = trajectory_layout(CASES["mixed"])
    # env0: [0,1] [2,3]; env1: [0] [1,2] [3]; env2: [0..2] [3]
    assert lay.num_traj == 7
    assert lay.start_time.tolist() == [0, 2, 0, 1, 3, 0, 3]
    assert lay.start_env.tolist() == [0, 0, 1, 1, 1, 2, 2]
    assert lay.traj_offsets.tolist() == [0, 2, 5, 7]
    assert lay.masks.sum(0).tolist() == [2, 2, 1, 2, 1, 3, 1]


def test_bad_inputs():
    with pytest.raises(ValueError):
        trajectory_layout(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError):
        split_and_pad_trajectories(torch.zeros(5, 3), torch.zeros(4, 3))


@settings(max_examples=50, deadline=None)
@given(t=st.integers(1, 12), n=st.integers(1, 6), p=st.floats(0, 1), seed=st.integers(0, 999))
def test_property_roundtrip(t, n, p, seed):
    g = torch.Generator().manual_seed(seed)
    dones = torch.rand(t, n, generator=g) < p
    x = torch.randn(t, n, 2, generator=g)
    padded, masks = split_and_pad_trajectories(x, dones)
    want_p, want_m = naive_split(x, dones)
    assert torch.equal(padded, want_p) and torch.equal(masks, want_m)
    assert torch.equal(unpad_trajectories(padded, masks), x)
    assert int(masks.sum()) == t * n
