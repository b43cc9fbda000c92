"""Flag arguments of the rollout storage: checked before anything is written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from episodes.rollout import RolloutStorage


def _filled() -> RolloutStorage:
    storage = RolloutStorage("rl", 2, 3, (4,), (1,))
    storage.rewards.fill_(1.0)
    storage.values.fill_(0.5)
    return storage


NOT_FLAGS = {
    "array": np.array([True, False]),
    "tensor": torch.tensor([1.0, 0.0]),
    "string": "no",
    "int": 1,
    "none": None,
}


@pytest.mark.parametrize("case", list(NOT_FLAGS))
def test_compute_returns_refuses_a_non_flag_before_writing(case: str) -> None:
    storage = _filled()
    before = {name: tensor.clone() for name, tensor in storage.tensors.items()}
    with pytest.raises(TypeError, match="^normalize_advantage must be a bool"):
        storage.compute_returns(torch.zeros(2), 0.9, 0.9, normalize_advantage=NOT_FLAGS[case])
    assert all(torch.equal(tensor, before[name]) for name, tensor in storage.tensors.items())


@pytest.mark.parametrize("given", [np.True_, np.False_, True, False])
def test_numpy_bools_are_flags(given: Any) -> None:
    storage, plain = _filled(), _filled()
    storage.compute_returns(torch.zeros(2), 0.9, 0.9, normalize_advantage=given)
    plain.compute_returns(torch.zeros(2), 0.9, 0.9, normalize_advantage=bool(given))
    assert torch.equal(storage.advantages, plain.advantages)


@pytest.mark.parametrize("case", ["string", "int", "array"])
def test_per_mini_batch_normalisation_is_a_flag(case: str) -> None:
    bad = NOT_FLAGS[case]
    with pytest.raises(TypeError, match="^normalize_advantage_per_mini_batch must be a bool"):
        RolloutStorage("rl", 2, 3, (4,), (1,), normalize_advantage_per_mini_batch=bad)
    storage = _filled()
    for make in (storage.mini_batch_generator, storage.recurrent_mini_batch_generator):
        with pytest.raises(TypeError, match="^normalize_advantage_per_mini_batch must be a"):
            make(1, num_epochs=1, normalize_advantage_per_mini_batch=bad)
