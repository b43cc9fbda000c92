"""Behaviour a mutation test found unpinned: each case fails for the mutant named beside it."""

from __future__ import annotations

import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.replay import PrioritizedEpisodeReplayBuffer
from episodes.rollout import RolloutStorage


def _one_step(id_: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        terminated=True,
        len_lookback_buffer=0,
    )


def test_priorities_of_evicted_items_do_not_raise_the_max_priority():
    # Mutant: the largest priority taken before the evicted items are dropped.
    buf = PrioritizedEpisodeReplayBuffer(2, seed=0)
    for id_ in "abc":  # "a" (item 0) is evicted by "c"
        buf.add(_one_step(id_))
    buf.update_priorities([100.0, 2.0], [0, 1])
    assert buf.max_priority == 2.0


def test_a_two_item_mini_batch_is_normalized_per_mini_batch():
    # Mutant: mini-batches of two items only centred (the guard for one item took two).
    storage = RolloutStorage(
        "rl", num_envs=1, num_transitions_per_env=2, observations=(1,), actions_shape=(1,)
    )
    storage.advantages[:, 0, 0] = torch.tensor([1.0, 3.0])
    batch = next(storage.mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True))
    expected = torch.tensor([-1.0, 1.0]) / torch.tensor([1.0, 3.0]).std()
    # Sorted: the batch's order is the generator's random permutation.
    got = torch.sort(batch.advantages.flatten()).values
    assert torch.allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("bounds", [(3, 1), (3, -3), (-1, 0), (4, 2)])
def test_a_slice_stopping_before_its_start_is_an_empty_chunk_at_its_start(bounds):
    # Mutant: the stop not raised to the start (a chunk with no observation at all).
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3, 4],
        actions=[1, 2, 3, 4],
        rewards=[1.0, 2.0, 3.0, 4.0],
        len_lookback_buffer=0,
    )
    start = bounds[0] % 4 if bounds[0] < 0 else bounds[0]
    part = ep[bounds[0] : bounds[1]]
    assert len(part) == 0
    assert part.t_started == part.t == start
    assert part.get_observations() == [start]
