"""`episode_steps`: a batch's item indices named back as (episode id, env time)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._episodes import chunk, make_episode_data


def _filled(capacity: int, lengths: list[int], prioritized: bool = False) -> EpisodeReplayBuffer:
    kind = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = kind(capacity, seed=0)
    for index, length in enumerate(lengths):  # observations hold [episode index, t]
        data = make_episode_data(index, length)
        half = length // 2  # two chunks: the second continues the first by id
        buf.add(chunk(f"e{index}", data, 0, half))
        buf.add(chunk(f"e{index}", data, half, length, terminated=True))
    return buf


@given(
    lengths=st.lists(st.integers(2, 12), min_size=1, max_size=8),
    capacity=st.integers(12, 60),
    prioritized=st.booleans(),
)
def test_sampled_indices_name_the_step_their_row_holds(
    lengths: list[int], capacity: int, prioritized: bool
) -> None:
    buf = _filled(capacity, lengths, prioritized)
    batch = buf.sample(16, n_step=1)
    ids, t = buf.episode_steps(batch["indices"])
    assert ids.dtype == object and t.dtype == np.int64
    assert [f"e{int(row[0])}" for row in batch["obs"]] == ids.tolist()
    assert t.tolist() == [int(row[1]) for row in batch["obs"]]
    for id_, time, index in zip(ids, t, batch["indices"]):  # locate's inverse
        assert buf.locate(id_, int(time)).tolist() == [index]


CASES: dict[str, tuple[Any, Any]] = {
    "one_index": (3, (["e0"], [3])),
    "list_in_order_given": ([4, 0, 2], (["e0", "e0", "e0"], [4, 0, 2])),
    "numpy_array": (np.array([5, 1]), (["e1", "e0"], [0, 1])),
    "tensor": (torch.tensor([6]), (["e1"], [1])),
    "empty": ([], ([], [])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_index_forms(name: str) -> None:
    given_indices, (want_ids, want_t) = CASES[name]
    buf = _filled(100, [5, 4])
    ids, t = buf.episode_steps(given_indices)
    assert ids.tolist() == want_ids and t.tolist() == want_t


REFUSALS: dict[str, tuple[Any, type[Exception], str]] = {
    "evicted": ([0], KeyError, "not stored"),
    "never_issued": ([99], KeyError, "not stored"),
    "floats": ([1.5], ValueError, "integers"),
    "two_dimensional": ([[9, 10]], ValueError, "1-d"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusals_leave_the_buffer_as_it_was(name: str) -> None:
    given_indices, error, match = REFUSALS[name]
    buf = _filled(10, [5, 5, 5])  # the first episode (indices 0-4) is evicted
    before = pickle.dumps(buf.get_state())
    with pytest.raises(error, match=match):
        buf.episode_steps(given_indices)
    assert pickle.dumps(buf.get_state()) == before
    assert buf.get_num_timesteps() == 10 and buf.episode_steps([9])[0].tolist() == ["e1"]
