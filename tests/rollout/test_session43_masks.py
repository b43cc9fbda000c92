"""``unpad_trajectories`` takes the bool masks ``split_and_pad_trajectories`` returns, only.

Integer masks were used as row indices (silently wrong at T=1: ``[[1, 2]]`` came back
``[[2, 2]]``), float ones failed in torch's words.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from episodes.rollout import split_and_pad_trajectories, unpad_trajectories  # noqa: E402

DTYPES = [torch.int64, torch.int32, torch.uint8, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
def test_masks_that_are_not_bool_are_refused(dtype: torch.dtype) -> None:
    x = torch.tensor([[1.0, 2.0]])
    padded, masks = split_and_pad_trajectories(x, torch.zeros(1, 2))
    with pytest.raises(TypeError, match=f"masks must be bool.*got {dtype}"):
        unpad_trajectories(padded, masks.to(dtype))


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_bool_masks_give_the_data_back(steps: int) -> None:
    x = torch.arange(steps * 3, dtype=torch.float32).view(steps, 3)
    dones = torch.zeros(steps, 3)
    dones[0, 1] = 1.0
    padded, masks = split_and_pad_trajectories(x, dones)
    assert torch.equal(unpad_trajectories(padded, masks), x)
