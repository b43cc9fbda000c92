"""Saving and reloading buffers through episodes.io, and buffers built from datasets."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter
from episodes.replay import EpisodeReplayBuffer, EvictedEpisodeError, PrioritizedEpisodeReplayBuffer

from ._episodes import chunk, episode, make_episode_data


def _filled(cls, **kwargs):
    buf = cls(40, seed=4, **kwargs)
    datas = [make_episode_data(i, 12) for i in range(5)]
    for a in (0, 6):
        buf.add(
            [
                chunk(f"e{i}", d, a, a + 6, truncated=a == 6 and i % 2 == 0)
                for i, d in enumerate(datas)
            ]
        )
    buf.sample(10)
    return buf


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_save_load_round_trip(cls, tmp_path):
    buf = _filled(cls)
    if cls is PrioritizedEpisodeReplayBuffer:
        batch = buf.sample(16)
        buf.update_priorities(np.linspace(0.5, 4.0, 16), batch["indices"])
    buf.save(tmp_path / "buf")
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert type(back) is cls
    assert back.get_episode_ids() == buf.get_episode_ids()
    assert back.get_counters() == buf.get_counters()
    assert back.get_evicted_ids() == buf.get_evicted_ids() == ["e0", "e1"]
    for a, b in zip(buf.get_episodes(), back.get_episodes()):
        assert a == b
    old = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    new = np.concatenate([back.get_episode_indices(i) for i in back.get_episode_ids()])
    x, y = buf.get_transitions(old, n_step=3), back.get_transitions(new, n_step=3)
    for key in ("obs", "next_obs", "rewards", "terminateds", "truncateds", "n_step"):
        np.testing.assert_array_equal(x[key], y[key])
    if cls is PrioritizedEpisodeReplayBuffer:
        np.testing.assert_allclose(back.get_priorities(new), buf.get_priorities(old), rtol=1e-9)
        assert back.max_priority == buf.max_priority
    with pytest.raises(EvictedEpisodeError):  # the evicted ids survive the restart
        back.add(_continuation())
    with pytest.raises(FileExistsError):
        buf.save(tmp_path / "buf")


def _continuation():
    data = make_episode_data(0, 14)
    return chunk("e0", data, 12, 14)


def test_load_refuses_other_directories(tmp_path):
    with pytest.raises(ValueError, match="no saved replay buffer"):
        EpisodeReplayBuffer.load(tmp_path)


def test_buffer_from_dataset(tmp_path):
    data = make_episode_data(0, 10)
    with EpisodeWriter(tmp_path / "ds") as writer:
        writer.write_many(
            [chunk("a", data, 0, 4), episode("b", 1, 5), chunk("a", data, 4, 10, terminated=True)]
        )
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds", seed=0)
    assert buf.capacity == 15 and buf.get_num_timesteps() == 15
    assert buf.get_episode_ids() == ["a", "b"]
    got = buf.get_transitions(buf.locate("a", [3]), n_step=2, gamma=1.0)
    assert got["next_obs"][:, 1].tolist() == [5.0]  # across the stored chunk border
    per = EpisodeReplayBuffer.from_dataset(tmp_path / "ds", capacity=8, prioritized=True, alpha=0.5)
    # a (4 steps) gives way to b; a's later chunk is skipped.
    assert isinstance(per, PrioritizedEpisodeReplayBuffer) and per.get_episode_ids() == ["b"]


@pytest.mark.parametrize(
    ("cls", "prioritized", "want"),
    [
        (EpisodeReplayBuffer, None, EpisodeReplayBuffer),
        (PrioritizedEpisodeReplayBuffer, None, PrioritizedEpisodeReplayBuffer),
        (EpisodeReplayBuffer, True, PrioritizedEpisodeReplayBuffer),
        (PrioritizedEpisodeReplayBuffer, False, EpisodeReplayBuffer),
    ],
    ids=["uniform", "prioritized by its class", "asked", "asked not to be"],
)
def test_from_dataset_builds_the_class_it_is_called_on(tmp_path, cls, prioritized, want):
    # A staticmethod: PrioritizedEpisodeReplayBuffer.from_dataset(path) gave a uniform buffer.
    with EpisodeWriter(tmp_path / "d") as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=[0.0, 1.0, 2.0],
                actions=[0, 1],
                rewards=[1.0, 1.0],
                len_lookback_buffer=0,
            )
        )
    buffer = cls.from_dataset(tmp_path / "d", prioritized=prioritized)
    assert type(buffer) is want and buffer.get_num_timesteps() == 2


def test_tuple_evicted_ids_survive_a_restart(tmp_path):
    # The evicted ids went into replay.json as plain JSON: (1, 2) came back a list, unhashable.
    buf = EpisodeReplayBuffer(4, seed=0)
    buf.add(episode((1, 2), 0, 3))
    buf.add(episode((3, 4), 10, 3))
    assert buf.get_evicted_ids() == [(1, 2)]
    buf.save(tmp_path / "buf")
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert back.get_evicted_ids() == [(1, 2)] and back.get_episode_ids() == [(3, 4)]


def _damage(path, name, change):
    import json

    meta = json.loads((path / "replay.json").read_text())
    if name == "replay.json":
        meta = change(meta)
        (path / "replay.json").write_text(json.dumps(meta))
    else:
        change(path)


def _flip_a_stored_byte(path):
    import os

    files = [os.path.join(r, f) for r, _, fs in os.walk(path / "episodes") for f in fs]
    # A save's episodes are a v2 dataset (shards); saves of earlier versions hold chunks.
    stored = [
        f for f in sorted(files) if f.endswith(".arrow") or os.path.basename(f).startswith("obs")
    ]
    target = stored[0]
    data = bytearray(open(target, "rb").read())
    data[-8] ^= 0xFF
    open(target, "wb").write(bytes(data))


@pytest.mark.parametrize(
    "name, change, message",
    [
        ("replay.json", lambda m: [m], "version"),
        ("replay.json", lambda m: {k: v for k, v in m.items() if k != "alpha"}, "alpha"),
        ("replay.json", lambda m: {**m, "kind": "foo"}, "unknown kind"),
        ("replay.json", lambda m: {**m, "capacity": 3}, "capacity"),
        ("replay.json", lambda m: {**m, "counters": {}}, "counters"),
        ("priorities", lambda p: np.save(p / "priorities.npy", np.ones(3)), "priorities"),
        ("priorities", lambda p: (p / "priorities.npy").unlink(), "priorities"),
        ("episodes", _flip_a_stored_byte, "crc|CRC|checksum"),
    ],
    ids=["not an object", "no alpha", "unknown kind", "capacity below the steps",
         "counters missing", "too few priorities", "priorities missing", "a flipped byte"],
)  # fmt: skip
def test_a_damaged_save_is_refused_with_a_value_error(tmp_path, name, change, message):
    # Each loaded silently (unknown kind as uniform, short priorities padded with 1s, a flipped
    # byte as other data) or raised AttributeError, KeyError, FileNotFoundError.
    from episodes.io import DatasetError

    buf = _filled(PrioritizedEpisodeReplayBuffer)
    buf.save(tmp_path / "buf")
    _damage(tmp_path / "buf", name, change)
    with pytest.raises((ValueError, DatasetError), match=message):
        EpisodeReplayBuffer.load(tmp_path / "buf")


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_saves_hold_a_v2_dataset_and_saves_of_chunks_still_load(cls, tmp_path):
    # A save's episodes were a chunk dataset, fsynced one directory per episode (5-11 s for
    # 500 episodes on a disk); they are one v2 dataset now. Saves written before still load.
    import shutil

    from episodes.io import dataset_info

    buf = _filled(cls)
    buf.save(tmp_path / "buf")
    assert dataset_info(tmp_path / "buf" / "episodes").version == 2
    shutil.rmtree(tmp_path / "buf" / "episodes")
    with EpisodeWriter(tmp_path / "buf" / "episodes") as writer:  # the layout saves had
        writer.write_many(buf.get_episodes())
    assert dataset_info(tmp_path / "buf" / "episodes").version == 1
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert type(back) is cls and back.get_counters() == buf.get_counters()
    assert [e.get_observations().tolist() for e in back.get_episodes()] == [
        e.get_observations().tolist() for e in buf.get_episodes()
    ]
    if cls is PrioritizedEpisodeReplayBuffer:
        ids = buf.get_episode_ids()
        assert all(
            np.array_equal(back.get_priorities(back.get_episode_indices(i)),
                           buf.get_priorities(buf.get_episode_indices(i)))
            for i in ids
        )  # fmt: skip
