"""Handles kept across a change of what they came from: ids, chunk tables, manifest rows."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy


def _episode(id_: str, n: int = 5, terminated: bool = True) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_=id_,
        observations=[np.full(2, i, np.float32) for i in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=terminated,
        truncated=not terminated,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_ids_sampled_before_a_rollback_never_name_a_later_add(kind: type) -> None:
    buf = kind(100, seed=0)
    buf.add(_episode("a"))
    state = buf.get_state()
    buf.add(_episode("b"))
    stale = np.flatnonzero(np.isin(np.arange(10), buf.get_episode_indices("b")))
    buf.set_state(state)
    buf.add(_episode("c"))
    with pytest.raises(KeyError, match="not stored"):
        buf.get_transitions(stale)
    assert set(buf.get_episode_indices("c").tolist()).isdisjoint(stale.tolist())
    if kind is PrioritizedEpisodeReplayBuffer:
        buf.update_priorities([50.0] * len(stale), stale)  # evicted-alike items: skipped
        assert buf.get_priorities(buf.get_episode_indices("c")).tolist() == [1.0] * 5
        assert buf.get_priorities(buf.get_episode_indices("a")).tolist() == [1.0] * 5


def test_a_fresh_buffer_takes_the_states_ids_as_they_are() -> None:
    original = PrioritizedEpisodeReplayBuffer(100, seed=0)
    original.add([_episode("a"), _episode("b")])
    batch = original.sample(8)
    restored = PrioritizedEpisodeReplayBuffer(100)
    restored.set_state(original.get_state())
    assert restored.get_state()["next_uid"] == original.get_state()["next_uid"]
    restored.update_priorities([3.0] * 8, batch["indices"])  # the resume pattern still works
    assert restored.get_priorities(batch["indices"]).tolist() == [3.0] * 8


def test_env_indices_is_a_copy_of_the_chunk_table() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
    before = [chunk.get_observations().copy() for chunk in chunks]
    indices = chunks.env_indices
    indices[:] = indices[::-1]
    indices += 7
    assert chunks.env_indices.tolist() == sorted(chunks.env_indices.tolist())
    for chunk, observations in zip(chunks, before, strict=True):
        np.testing.assert_array_equal(chunk.get_observations(), observations)


def test_dataset_summaries_cannot_be_edited_in_place(tmp_path) -> None:
    with DatasetWriter(tmp_path / "d") as writer:
        for i in range(4):
            writer.write(_episode(f"e{i}", terminated=bool(i % 2)))
    ds = Dataset(tmp_path / "d")
    assert isinstance(ds.summaries, tuple) and isinstance(ds.shards, tuple)
    with pytest.raises(TypeError):
        ds.summaries[:] = ds.summaries[1:]  # type: ignore[index]
    assert [ds.episode(i).id_ for i in range(len(ds))] == [f"e{i}" for i in range(4)]
    assert [row.id_ for row in ds.summaries] == ["e0", "e1", "e2", "e3"]
