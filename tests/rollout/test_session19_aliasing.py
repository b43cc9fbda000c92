"""``add_transition`` reads every source as it was before the call (hunt round 19).

A source that shares the storage's memory without being a torch view of it (a row's
``.detach()``, ``torch.from_numpy`` of a row's numpy array) used to skip the alias check of
the one-step write and be read after an earlier field of the same call overwrote it.
"""

from __future__ import annotations

import numpy as np
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


def _fields_overlap(storage: RolloutStorage) -> list[tuple[str, str]]:
    spans = {
        name: (t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
        for name, t in storage.tensors.items()
        if t.numel()
    }
    names = sorted(spans)
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
    ]


def _block() -> np.ndarray:
    return np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2)


TWO_WRAPPERS = {
    "numpy row and a row of the whole array, one call": lambda a, st: st.write_block(
        0, share=True, rewards=torch.from_numpy(a[3]), values=torch.from_numpy(a)[3]
    ),
    "numpy, across two calls": lambda a, st: (
        st.write_block(
            0, share=True, rewards=torch.from_numpy(a[1]), values=torch.from_numpy(a[3])
        ),
        st.write_block(0, share=True, actions_log_prob=torch.from_numpy(a)[3]),
    ),
    "a tensor and its dlpack twin": lambda a, st: st.write_block(
        0,
        share=True,
        rewards=torch.from_numpy(a)[3],
        values=torch.from_dlpack(torch.from_numpy(a)[3]),
    ),
}


@pytest.mark.parametrize("name", list(TWO_WRAPPERS))
def test_no_two_fields_take_the_same_bytes_through_different_wrappers(name):
    block = _block()
    storage = RolloutStorage("rl", 2, 3, (2,), (1,))
    TWO_WRAPPERS[name](block, storage)
    assert _fields_overlap(storage) == []
    assert storage.rewards.flatten().tolist() != [] and storage.values.squeeze(-1).tolist() == (
        block[3].tolist()
    )
