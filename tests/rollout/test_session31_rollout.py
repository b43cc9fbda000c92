"""write_block names a field given as a list or tuple of tensors (only nested fields nest)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from episodes.rollout import RolloutStorage  # noqa: E402


@pytest.mark.parametrize(
    ("block", "kind"),
    [
        pytest.param([torch.zeros(4)], "list", id="list-of-a-row"),  # was an OverflowError
        pytest.param([[0.0] * 4], "list", id="nested-list"),  # was "got float"
        pytest.param([torch.zeros(1, 4)], "list", id="list-of-a-block"),
        pytest.param((torch.zeros(1, 4),), "tuple", id="tuple-of-a-block"),
    ],
)
def test_write_block_refuses_a_flat_field_given_as_a_container(block, kind):
    storage = RolloutStorage("rl", 4, 3, (2,), (1,))
    before = storage.rewards.clone()
    with pytest.raises(TypeError, match=f"rewards: blocks must be torch tensors, got {kind}"):
        storage.write_block(0, rewards=block)
    assert storage.step == 0 and torch.equal(storage.rewards, before)


def test_write_block_still_takes_nested_fields():
    storage = RolloutStorage("rl", 2, 3, (2,), (1,))
    params = (torch.ones(3, 2, 1), torch.full((3, 2, 1), 2.0))
    storage.write_block(0, rewards=torch.ones(3, 2, 1), distribution_params=params)
    assert storage.step == 3
    assert torch.equal(storage.distribution_params[1], params[1])
