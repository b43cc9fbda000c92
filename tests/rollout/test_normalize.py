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
    out = torch.empty(shape)
    got = normalize_into(out, advantages.clone(), valid)
    assert got is out
    assert torch.allclose(out, want, atol=1e-6)
    if valid is not None:
        assert torch.allclose(out, normalize_over(advantages.clone(), valid))
