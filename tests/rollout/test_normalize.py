"""Advantage normalisation: over all cells, or over the valid ones only."""

from __future__ import annotations

import pytest
import torch

from episodes.rollout import normalize_into, normalize_over

# (case, shape, valid mask factory or None)
CASES = [
    ("all cells", (5, 3), None),
    ("one column", (7, 1), None),
    ("half the cells valid", (4, 4), lambda shape: torch.arange(16).reshape(shape) % 2 == 0),
    ("one env masked out", (6, 3), lambda shape: torch.tensor([True, False, True]).expand(shape)),
]


@pytest.mark.parametrize(("shape", "make_valid"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_normalize_into_matches_torch_mean_and_std(shape, make_valid):
    advantages = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))
    valid = None if make_valid is None else make_valid(shape)
    cells = advantages if valid is None else advantages[valid]
    want = (advantages - cells.mean()) / (cells.std() + 1e-8)
    if valid is not None:
        want = want.masked_fill(~valid, 0.0)  # a cell without a transition has advantage 0
    out = torch.empty(shape)
    got = normalize_into(out, advantages.clone(), valid)
    assert got is out
    assert torch.allclose(out, want, atol=1e-6)
    if valid is not None:
        assert torch.allclose(out, normalize_over(advantages.clone(), valid))


def test_normalize_into_takes_a_non_contiguous_tensor():
    # .view(-1) of a recurrent batch's [T, n, 1] slice raised "view size is not compatible".
    base = torch.randn(6, 8, 1)
    advantages = base[:, 2:5].transpose(0, 1)  # neither contiguous nor viewable as flat
    want = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    got = normalize_into(torch.empty(3, 6, 1), advantages.clone().transpose(0, 1).transpose(0, 1))
    assert not advantages.is_contiguous() and torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True], ids=["all cells", "valid cells"])
def test_float16_advantages_normalise_without_overflow(masked):
    # Sums of 98304 float16 cells overflowed: all zeros (no mask) or all NaN (masked).
    torch.manual_seed(0)
    advantages = torch.randn(24, 4096).to(torch.float16)
    want = advantages.float()
    want = (want - want.mean()) / (want.std() + 1e-8)
    out = torch.empty_like(advantages)
    valid = torch.ones(24, 4096, dtype=torch.bool) if masked else None
    got = normalize_into(out, advantages.clone(), valid)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.float(), want, atol=2e-2)


def test_a_group_without_valid_cells_stays_finite():
    # 0 / 0 made every cell NaN, and a loss weighted by the mask NaN too (0 * NaN).
    values = torch.randn(4, 3)
    out = normalize_over(values, torch.zeros(4, 3, dtype=torch.bool))
    assert torch.isfinite(out).all()
