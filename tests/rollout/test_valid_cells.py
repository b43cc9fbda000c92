"""``RolloutStorage.valid``: cells without a transition are never trained on.

A runner recording vector steps leaves next-step reset steps in the window, and a per-chunk
layout pads columns; the converter marks those cells in ``storage.valid``. The flat generator
must hand out every valid cell exactly once per epoch and nothing else, the advantages must be
normalised over valid cells, and the recurrent and distillation batches carry the mask.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from episodes.rollout import RolloutStorage


def filled(num_envs: int, steps: int, valid: torch.Tensor | None, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    st_ = RolloutStorage("rl", num_envs, steps, (2,), (1,))
    # Cell (t, n) carries its own flat index t * N + n in the observations, to find it again.
    index = torch.arange(steps * num_envs, dtype=torch.float32).view(steps, num_envs)
    st_.observations[..., 0] = index
    st_.rewards.copy_(torch.rand(steps, num_envs, 1, generator=g))
    st_.values.copy_(torch.rand(steps, num_envs, 1, generator=g))
    st_.dones.copy_(torch.rand(steps, num_envs, 1, generator=g) < 0.2)
    if valid is not None:
        st_.dones[~valid] = (
            True  # as the converter does: such a cell ends nothing and feeds nothing
        )
        st_.rewards[~valid] = 0.0
    st_.valid = valid
    return st_


masks = st.integers(1, 5).flatmap(
    lambda n: st.integers(1, 6).flatmap(
        lambda t: st.lists(st.booleans(), min_size=t * n, max_size=t * n).map(
            lambda cells: (n, t, torch.tensor(cells).view(t, n))
        )
    )
)


@given(masks, st.integers(1, 4), st.integers(0, 3))
def test_flat_batches_hold_every_valid_cell_once_per_epoch_and_nothing_else(case, parts, seed):
    num_envs, steps, valid = case
    count = int(valid.sum())
    storage = filled(num_envs, steps, valid, seed)
    storage.compute_returns(torch.zeros(num_envs), 0.9, 0.95, normalize_advantage=False)
    if count < parts:
        with pytest.raises(ValueError, match="num_mini_batches must be between 1 and"):
            next(storage.mini_batch_generator(parts, num_epochs=1))
        return
    generator = torch.Generator().manual_seed(seed)
    batches = list(storage.mini_batch_generator(parts, num_epochs=2, generator=generator))
    assert len(batches) == 2 * parts
    for epoch in (batches[:parts], batches[parts:]):
        seen = torch.cat([b.observations[:, 0] for b in epoch]).long()
        assert sorted(seen.tolist()) == torch.nonzero(valid.view(-1)).view(-1).tolist()
        for batch in epoch:
            cells = batch.observations[:, 0].long()
            flat_adv = storage.advantages.view(-1)
            assert torch.equal(batch.advantages.view(-1), flat_adv[cells])


def test_advantages_are_normalised_over_valid_cells_only():
    valid = torch.tensor([[True, False], [True, True], [False, True]])
    storage = filled(2, 3, valid)
    raw = filled(2, 3, valid)
    raw.compute_returns(torch.zeros(2), 0.9, 0.95, normalize_advantage=False)
    storage.compute_returns(torch.zeros(2), 0.9, 0.95, normalize_advantage=True)
    kept = raw.advantages[valid]
    expected = (raw.advantages - kept.mean()) / (kept.std() + 1e-8)
    expected[~valid] = 0.0  # a cell without a transition has advantage 0 (contract 9.3)
    torch.testing.assert_close(storage.advantages, expected)
    assert abs(float(storage.advantages[valid].mean())) < 1e-6
    torch.testing.assert_close(storage.returns, raw.returns)


def test_recurrent_and_distillation_batches_carry_the_mask():
    valid = torch.tensor([[True, False, True], [False, True, True]])
    storage = filled(3, 2, valid)
    storage.compute_returns(torch.zeros(3), 0.9, 0.95)
    first, second = storage.recurrent_mini_batch_generator(2, num_epochs=1)
    assert torch.equal(first.valid, valid[:, :2]) and torch.equal(second.valid, valid[:, 2:])
    adv = storage.advantages[:, :2]
    keep = valid[:, :2].reshape(adv.shape)
    expected = ((adv - adv[keep].mean()) / (adv[keep].std() + 1e-8)).masked_fill(~keep, 0.0)
    per_batch = storage.recurrent_mini_batch_generator(
        2, num_epochs=1, normalize_advantage_per_mini_batch=True
    )
    torch.testing.assert_close(next(iter(per_batch)).advantages, expected)
    distill = RolloutStorage("distillation", 3, 2, (2,), (1,))
    distill.valid = valid
    assert [b.valid.tolist() for b in distill.generator()] == valid.tolist()


def test_clear_forgets_the_mask_and_none_means_every_cell():
    storage = filled(2, 2, torch.tensor([[True, False], [True, True]]))
    storage.clear()
    assert storage.valid is None
    storage = filled(2, 2, None)
    storage.compute_returns(torch.zeros(2), 0.9, 0.95)
    batches = list(storage.mini_batch_generator(2, num_epochs=1))
    assert sum(len(b.actions) for b in batches) == 4 and batches[0].valid is None
