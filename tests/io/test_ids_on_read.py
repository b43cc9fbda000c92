"""Ids on the read side: compared by value and type (``id_key``) everywhere, NaN included."""

from __future__ import annotations

import math

import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    filter_dataset,
    read_episodes,
)
from episodes.replay import EpisodeReplayBuffer


def _episode(id_, steps, t_started=0, terminated=False):
    return SingleAgentEpisode(
        id_,
        observations=[float(t_started + k) for k in range(steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        t_started=t_started,
        terminated=terminated,
        len_lookback_buffer=0,
    )


def test_filter_keeps_tuple_and_list_ids_apart(tmp_path):
    # Keyed by json.dumps, a list id and a tuple id were one id: both passed the filter.
    with DatasetWriter(tmp_path / "src") as writer:
        writer.write_many([_episode(["a", 1], 1), _episode(("a", 1), 3)])
    filter_dataset(tmp_path / "src", tmp_path / "out", min_length=2)
    assert [(e.id_, len(e)) for e in read_episodes(tmp_path / "out")] == [(("a", 1), 3)]


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
@pytest.mark.parametrize("id_", [float("nan"), ("a", float("nan"))], ids=["nan", "tuple-nan"])
def test_nan_ids_read_back(tmp_path, writer, id_):
    # v1 compared the chunk's id with the manifest's by ==: NaN != NaN, a "corrupt" chunk.
    with writer(tmp_path / "d") as w:
        w.write(_episode(id_, 1))
    (back,) = read_episodes(tmp_path / "d")
    first = back.id_ if isinstance(back.id_, float) else back.id_[1]
    assert math.isnan(first)
    assert len(dataset_info(tmp_path / "d").episodes) == 1


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_a_buffer_from_a_dataset_with_pieces_out_of_time_order(tmp_path, writer):
    # Added in manifest order, the later piece came first: "already done" or "starts at t=0".
    whole = _episode("a", 4, terminated=True)
    other = _episode("b", 2)
    with writer(tmp_path / "d") as w:
        w.write_many([whole[2:4], other, whole[0:2]])
    buffer = EpisodeReplayBuffer.from_dataset(tmp_path / "d")
    assert buffer.get_num_timesteps() == 6 and sorted(buffer.get_episode_ids()) == ["a", "b"]
    (stored,) = [e for e in buffer.get_episodes() if e.id_ == "a"]
    assert list(stored.get_observations()) == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_summaries_take_the_flags_of_the_piece_the_episode_ends_with(tmp_path, writer):
    # A stepless terminated piece at t=3 written before [0, 3): a tie on t went by manifest
    # order, so the summary said not done while load_episode's episode is terminated.
    from episodes.io import load_episode

    end = SingleAgentEpisode(
        "e", observations=[3.0], t_started=3, terminated=True, len_lookback_buffer=0
    )
    with writer(tmp_path / "d") as w:
        w.write_many([end, _episode("e", 3)])
    (summary,) = dataset_info(tmp_path / "d").episodes
    joined = load_episode(tmp_path / "d", "e")
    assert (summary.terminated, summary.length) == (joined.is_terminated, len(joined)) == (True, 3)


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_a_dict_id_stored_in_two_key_orders_is_one_episode(tmp_path, writer):
    # Grouped by json.dumps of the stored form, whose pairs keep the key order: two summaries.
    with writer(tmp_path / "d") as w:
        w.write_many([_episode({1: "a", 2: "b"}, 2), _episode({2: "b", 1: "a"}, 2, t_started=2)])
    (summary,) = dataset_info(tmp_path / "d").episodes
    assert (summary.num_chunks, summary.length) == (2, 4)


@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_a_single_string_for_ids_is_refused(tmp_path, writer):
    # Iterated, "e1" asked for the ids "e" and "1": nothing matched, silently.
    with writer(tmp_path / "d") as w:
        w.write(_episode("e1", 1))
    with pytest.raises(TypeError, match=r"pass \['e1'\]"):
        read_episodes(tmp_path / "d", ids="e1")
    assert [e.id_ for e in read_episodes(tmp_path / "d", ids=["e1"])] == ["e1"]
