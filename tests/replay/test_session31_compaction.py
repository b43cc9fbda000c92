"""A full replay buffer compacts only when that frees a share of its store (a cost hunt).

``StepStore.reserve`` compacted whenever its dead rows held the new chunk, however few rows
that freed: with a capacity just below the store's size (a power of two minus a few, or
1,000,000 against 1,024,000 rows for 1000-step episodes) every few adds moved every live
row, so an add cost O(capacity). Compaction must cost O(1) moved rows per added step, and
move the live rows without a temporary copy of a whole column.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.store import StepStore

CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _episode(i: int, length: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        f"e{i}",
        observations=[np.array([i, t], np.float32) for t in range(length + 1)],
        actions=[0] * length,
        rewards=[1.0] * length,
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    ("capacity", "length"),
    [(1020, 1), (2044, 1), (1000, 10)],
    ids=["1024-4, one-step", "2048-4, one-step", "1000 of 1024, ten-step"],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_a_full_buffer_moves_a_bounded_number_of_rows_per_added_step(
    cls, capacity, length, monkeypatch
):
    moved = [0]
    compact = StepStore.compact

    def counting(store: StepStore) -> np.ndarray:
        moved[0] += store.num_live  # a compaction moves every live row
        return compact(store)

    monkeypatch.setattr(StepStore, "compact", counting)
    buffer = cls(capacity, seed=0)
    per_add = max(1, 64 // length)
    count = 0
    while buffer.get_num_timesteps() + per_add * length <= capacity:  # fill it, as a runner
        buffer.add([_episode(count + k, length) for k in range(per_add)])
        count += per_add
    moved[0] = 0
    added = 0
    store = buffer._store
    while added < 6 * capacity:  # then one episode per add, each evicting the oldest
        buffer.add(_episode(count, length))
        count += 1
        added += length
        dead = store.end - store.num_live
        assert dead <= max(store.num_live, 64)  # what uniform rejection sampling relies on
    assert buffer.get_num_timesteps() <= capacity
    assert moved[0] <= 10 * added, f"{moved[0]} rows moved for {added} added steps"
    batch = buffer.sample(32)
    assert batch["obs"].shape == (32, 2)


def test_a_compaction_moves_rows_in_place_without_a_copy_of_the_column():
    store = StepStore()
    rows_count, width = 2048, 2048  # a 16 MiB observation column
    store.reserve(rows_count)
    obs = np.arange(rows_count, dtype=np.float32)[:, None] * np.ones(width, np.float32)
    rows = {"obs": obs, "actions": np.arange(rows_count), "rewards": np.ones(rows_count)}
    store.append(rows, {}, [{}] * rows_count, ep_row=0, t0=0, prev_slot=-1)
    dead = np.r_[0:64, 700:710, 1999:2005]
    store.kill(dead)
    kept = np.setdiff1d(np.arange(rows_count), dead)
    column_bytes = store.obs.data.nbytes
    tracemalloc.start()
    try:
        store.compact()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < column_bytes // 2, f"{peak} bytes for a {column_bytes}-byte column"
    live = len(kept)
    np.testing.assert_array_equal(store.obs.data[:live, 0], kept.astype(np.float32))
    np.testing.assert_array_equal(store.obs.data[:live, -1], kept.astype(np.float32))
    np.testing.assert_array_equal(store.actions.data[:live], kept)
    np.testing.assert_array_equal(store.t[:live], kept)
    assert store.end == live and store.num_live == live
