"""``add_transition`` reads every source as it was before the call (hunt round 19).

A source that shares the storage's memory without being a torch view of it (a row's
``.detach()``, ``torch.from_numpy`` of a row's numpy array) used to skip the alias check of
the one-step write and be read after an earlier field of the same call overwrote it.
"""

from __future__ import annotations

import pytest
import torch

from episodes.rollout import RolloutStorage, Transition


def _storage() -> RolloutStorage:
    storage = RolloutStorage("rl", 2, 3, (1,), (1,))
    storage.rewards.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]).unsqueeze(-1))
    storage.values.copy_(torch.tensor([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]).unsqueeze(-1))
    storage.step = 1
    return storage


SOURCES = {
    "row views": lambda t: t[1],
    "detached rows": lambda t: t[1].detach(),
    "from_numpy of a row": lambda t: torch.from_numpy(t[1].numpy()),
    "from_numpy of the whole field, then a row": lambda t: torch.from_numpy(t.numpy())[1],
    "fresh copies": lambda t: t[1].clone(),
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_swapping_two_fields_of_one_step(name):
    storage = _storage()
    make = SOURCES[name]
    new_rewards, new_values = make(storage.values), make(storage.rewards)
    storage.add_transition(Transition(rewards=new_rewards, values=new_values))
    assert storage.rewards[1].flatten().tolist() == [30.0, 40.0]
    assert storage.values[1].flatten().tolist() == [3.0, 4.0]
    assert storage.step == 2
