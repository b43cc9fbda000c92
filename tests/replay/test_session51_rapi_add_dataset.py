"""``buffer.add_dataset(path)``: a dataset on disk added to a buffer that holds data already.

It stores what ``add`` of the dataset's pieces (in ``from_dataset``'s order) stores: ids
continue stored episodes, the capacity evicts the oldest, counters count every step read; and
a refused dataset (a piece that does not fit, an episode an earlier add evicted) leaves the
buffer as it was, its last sample included.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, NotADatasetError
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)

from ._episodes import chunk, episode, make_episode_data


def _write(path, pieces):
    with DatasetWriter(path) as writer:
        for piece in pieces:
            writer.write(piece)
    return path


def _same_contents(a, b):
    sa, sb = a.get_state(), b.get_state()
    assert sa["episodes"]["ids"] == sb["episodes"]["ids"]
    for key in ("obs", "actions", "rewards", "t", "uid"):
        assert np.array_equal(sa["steps"][key], sb["steps"][key]), key
    for key in ("num_timesteps", "num_added", "num_episodes_evicted", "evicted", "capacity"):
        assert sa[key] == sb[key], key
    assert sa.get("prioritized", {}).keys() == sb.get("prioritized", {}).keys()
    if "prioritized" in sa:
        assert np.array_equal(sa["prioritized"]["priorities"], sb["prioritized"]["priorities"])


ONLINE = [episode("on0", 10, 5), episode("on1", 11, 4, end="ongoing")]
OFFLINE = [episode(f"off{i}", i, 3 + i) for i in range(4)]


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("capacity", [1_000, 14], ids=["roomy", "evicting"])
def test_add_dataset_stores_what_adding_its_pieces_stores(tmp_path, kind, capacity):
    path = _write(tmp_path / "d", OFFLINE)
    buf, expected = kind(capacity, seed=0), kind(capacity, seed=0)
    buf.add(ONLINE)
    expected.add(ONLINE)
    assert buf.add_dataset(path) == sum(len(e) for e in OFFLINE)
    for piece in OFFLINE:
        expected.add(piece)
    _same_contents(buf, expected)
    if capacity == 14:
        assert buf.get_num_episodes_evicted() > 0


def test_a_piece_continues_its_stored_episode(tmp_path):
    data = make_episode_data(3, 8)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(chunk("run", data, 0, 5))
    path = _write(tmp_path / "d", [chunk("run", data, 5, 8, terminated=True)])
    buf.add_dataset(path)
    (ep,) = buf.get_episodes()
    assert (ep.t_started, len(ep), ep.is_terminated) == (0, 8, True)
    assert np.array_equal(ep.get_observations(-1), data["obs"][8])


def test_two_datasets_into_one_buffer(tmp_path):
    first = _write(tmp_path / "a", OFFLINE[:2])
    second = _write(tmp_path / "b", OFFLINE[2:])
    buf = EpisodeReplayBuffer.from_dataset(first, capacity=100, seed=0)
    buf.add_dataset(second)
    assert buf.get_episode_ids() == [e.id_ for e in OFFLINE]
    assert buf.get_num_timesteps() == buf.get_added_timesteps() == sum(map(len, OFFLINE))


def test_an_empty_buffer_takes_the_dtypes_the_pieces_join_in(tmp_path):
    pieces = [
        SingleAgentEpisode(
            id_,
            observations=np.zeros((3, 2), dtype),
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        ).to_numpy()
        for id_, dtype in (("u", np.uint8), ("i", np.int8))
    ]
    path = _write(tmp_path / "d", pieces)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add_dataset(path)
    loaded = EpisodeReplayBuffer.from_dataset(path, seed=0)
    assert buf.get_state()["steps"]["obs"].dtype == loaded.get_state()["steps"]["obs"].dtype
    assert buf.get_state()["steps"]["obs"].dtype == np.int16
    assert buf._joined is None  # later adds: the first chunk's dtypes again


# --------------------------------------------------------------------------------- refusals
def _bad_shape(tmp_path):
    pieces = [*OFFLINE] * 0 + [episode(f"ok{i}", i, 5) for i in range(6)]
    bad = SingleAgentEpisode(
        "bad",
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[0, 1],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
    )
    return _write(tmp_path / "d", [*pieces, bad]), ValueError, "dataset .*episode 'bad'"


def _done_id(tmp_path):
    pieces = [episode(f"ok{i}", i, 5) for i in range(6)] + [episode("on0", 1, 3)]
    return _write(tmp_path / "d", pieces), ValueError, "already done"


def _evicted_id(tmp_path):
    return _write(tmp_path / "d", [episode("gone", 1, 3)]), EvictedEpisodeError, "'gone'"


REFUSALS = [
    pytest.param(_bad_shape, id="shape-after-added-batches"),
    pytest.param(_done_id, id="done-id-after-added-batches"),
    pytest.param(_evicted_id, id="evicted-before"),
]


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("make", REFUSALS)
def test_a_refused_dataset_leaves_the_buffer_as_it_was(tmp_path, kind, make):
    buf, twin = kind(20, seed=0), kind(20, seed=0)
    for b in (buf, twin):
        b.add(episode("gone", 9, 12))
        b.add(ONLINE)  # 21 > 20: "gone" evicted, still running
    assert buf.get_evicted_ids() == ["gone"]
    batch = buf.sample(4)
    twin.sample(4)
    path, error, words = make(tmp_path)
    with pytest.raises(error, match=words):
        buf.add_dataset(path)
    _same_contents(buf, twin)
    assert buf.get_evicted_ids() == ["gone"]
    # the same draws follow, and the last sample is still there for update_priorities
    assert np.array_equal(buf.sample(6)["indices"], twin.sample(6)["indices"])
    if kind is PrioritizedEpisodeReplayBuffer:
        buf.update_priorities(np.full(4, 3.0), batch)  # the batch's source survived
        assert buf.get_priorities(batch["indices"]).tolist() == [3.0] * 4


def test_a_saved_buffer_is_no_dataset(tmp_path):
    saved = EpisodeReplayBuffer(10, seed=0)
    saved.add(OFFLINE[0])
    saved.save(tmp_path / "save")
    buf = EpisodeReplayBuffer(10, seed=0)
    with pytest.raises(NotADatasetError, match="saved replay buffer"):
        buf.add_dataset(tmp_path / "save")
    buf.add_dataset(tmp_path / "save" / "episodes")
    assert buf.get_episode_ids() == [OFFLINE[0].id_]
