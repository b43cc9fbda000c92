"""``save`` and ``load`` batch buffers of nested (Dict / Tuple) observations too.

Nested observations are stored as records (``episodes.replay.nested``); ``save`` wrote such a
buffer episode by episode and ``load`` read every piece as an episode (4000 episodes of 5
steps: 3.9 s / 6.1 s, against 0.36 / 0.55 s for flat ones). Now the batched save gathers the
records into the ``struct`` column the dataset writer writes for them, and the batched load
reads a shard's leaf columns back into records. These tests pin that both paths are taken
(episodes encoded / pieces decoded one by one are counted), that the files are the writer's
(index entries and every column's values, read back by ``episodes.io``), and that either
save loads into the state, counters, priorities and draws that reading and adding every
episode gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from episodes import SingleAgentEpisode
from episodes.io import read_episodes
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, saved_shards
from tests.replay.test_session36_save_speed import (
    check_loaded,
    index_entries,
    same,
    slow_load,
    slow_save,
)
from tests.replay.test_session41_save_custom import counted_load, counted_saves

KINDS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def dict_in_tuple(i: int, t: int) -> Any:
    return ({"pos": np.full(2, t + i, np.float32), "id": np.int64(t)}, np.float64(t / 2))


def image_and_vector(i: int, t: int) -> Any:
    image = np.full((3, 4, 4), (t * 7 + i) % 256, np.uint8)
    return {"image": image, "vec": np.arange(3, dtype=np.float32) + t}


def discrete_leaves(i: int, t: int) -> Any:
    return {"a": t % 3, "b": {"c": (t + i) % 5, "x": np.full(2, -t, np.float32)}}


DISCRETE = gym.spaces.Dict(
    {
        "a": gym.spaces.Discrete(3),
        "b": gym.spaces.Dict({"c": gym.spaces.Discrete(5), "x": gym.spaces.Box(-99, 9, (2,))}),
    }
)

# (name, observation of episode i at step t, observation space or None)
SPACES = [
    ("Dict in Tuple", dict_in_tuple, None),
    ("uint8 image and float vector", image_and_vector, None),
    ("Discrete leaves", discrete_leaves, DISCRETE),
]


def episodes_of(obs: Any, space: Any, count: int, numpy: bool, infos_at: int = -1) -> list[Any]:
    out = []
    for i in range(count):
        n = 2 + i % 4
        ep = SingleAgentEpisode(
            f"e{i}", observations=[obs(i, t) for t in range(n + 1)],
            actions=[t % 2 for t in range(n)], rewards=[0.25 * t + i for t in range(n)],
            infos=[{"k": t} if i == infos_at else {} for t in range(n + 1)],
            extra_model_outputs={"logp": [-0.5] * n}, observation_space=space,
            len_lookback_buffer=0, terminated=i % 3 == 0,
        )  # fmt: skip
        out.append(ep.to_numpy() if numpy else ep)
    return out


def tables(path: Path) -> pa.Table:
    """Every shard's data, in manifest order, as one table (record batches joined)."""
    dataset = path / "episodes"
    names = [line.split('"shard": "')[1].split('"')[0] for line in index_lines(dataset)]
    parts = [ipc.open_file(dataset / "shards" / f"{name}.arrow").read_all() for name in names]
    return pa.concat_tables(parts).combine_chunks()


def index_lines(dataset: Path) -> list[str]:
    return (dataset / "manifest.jsonl").read_text().splitlines()[1:]


def check_same_saves(fast: Path, slow: Path) -> None:
    assert same(index_entries(fast / "episodes"), index_entries(slow / "episodes"))
    assert tables(fast).equals(tables(slow))
    read = [list(read_episodes(p / "episodes", numpy=True, verify=True)) for p in (fast, slow)]
    assert len(read[0]) == len(read[1])
    for a, b in zip(*read, strict=True):
        assert same(a.get_state(), b.get_state())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("numpy", [True, False], ids=["numpy'd", "list mode"])
@pytest.mark.parametrize(("name", "obs", "space"), SPACES, ids=[c[0] for c in SPACES])
def test_nested_buffers_save_and_load_batched(kind, numpy, name, obs, space, tmp_path, monkeypatch):
    buf = kind(1000, seed=5)
    buf.add(episodes_of(obs, space, 14, numpy))
    buf.sample(4, n_step=2)  # counters and the generator moved
    # Batched: the shard's model and its episodes of a second length, compared; not all 14.
    assert counted_saves(monkeypatch, buf, tmp_path / "fast") <= 3
    slow_save(monkeypatch, buf, tmp_path / "slow")
    check_same_saves(tmp_path / "fast", tmp_path / "slow")
    for saved in ("fast", "slow"):  # a save written episode by episode loads batched too
        back, read = counted_load(monkeypatch, tmp_path / saved, kind)
        assert read == 1  # the model piece only
        check_loaded(back, slow_load(monkeypatch, tmp_path / saved, kind))
        assert back.get_episodes() == buf.get_episodes()
        assert same(back.get_state()["steps"]["obs"], buf.get_state()["steps"]["obs"])


@pytest.mark.parametrize("kind", KINDS)
def test_continuing_episodes_and_an_odd_one_round_trip(kind, tmp_path, monkeypatch):
    """Chunks of running episodes (times from their start), and one with infos, in between."""
    buf = kind(1000, seed=1)
    first = episodes_of(dict_in_tuple, None, 6, True, infos_at=2)
    for ep in first:
        ep.is_terminated = False
    buf.add(first[:3])  # the others' later chunks come alone: stored from t 5
    later = []
    for ep in first:
        cut = ep.cut()
        for t in range(3):
            cut.add_env_step(dict_in_tuple(7, t + 10), 1, 0.5, extra_model_outputs={"logp": -0.5})
        later.append(cut)
    buf.add(later)
    if kind is PrioritizedEpisodeReplayBuffer:
        buf.sample(7, n_step=1)
        buf.update_priorities(np.linspace(0.5, 3.0, 7))
    assert {e.t_started for e in buf.get_episodes()} > {0}
    assert counted_saves(monkeypatch, buf, tmp_path / "fast") <= 4  # and the one with infos
    slow_save(monkeypatch, buf, tmp_path / "slow")
    check_same_saves(tmp_path / "fast", tmp_path / "slow")
    back, read = counted_load(monkeypatch, tmp_path / "fast", kind)
    assert read == 2  # the model and the piece with infos
    check_loaded(back, slow_load(monkeypatch, tmp_path / "fast", kind))
    assert back.get_episodes() == buf.get_episodes()
    if kind is PrioritizedEpisodeReplayBuffer:  # each episode's steps' priorities as set
        for b in (back, buf):
            assert b.max_priority == 3.0
        assert same(priorities(back), priorities(buf))
        assert priorities(back).max() == 3.0 and np.count_nonzero(priorities(back) != 1.0) > 1


def priorities(buf: Any) -> np.ndarray:
    order = [buf.get_episode_indices(i) for i in buf.get_episode_ids()]
    return buf.get_priorities(np.concatenate(order))


def test_many_shards_round_trip(tmp_path, monkeypatch):
    buf = EpisodeReplayBuffer(5000, seed=2)
    buf.add(episodes_of(image_and_vector, None, 40, True))
    with monkeypatch.context() as m:
        m.setattr(saved_shards, "DEFAULT_SHARD_BYTES", 3000)
        buf.save(tmp_path / "fast")
    assert len(index_lines(tmp_path / "fast" / "episodes")) > 3
    slow_save(monkeypatch, buf, tmp_path / "slow")  # one shard: the same rows, cut elsewhere
    check_same_saves(tmp_path / "fast", tmp_path / "slow")
    back, _ = counted_load(monkeypatch, tmp_path / "slow", EpisodeReplayBuffer)
    check_loaded(back, slow_load(monkeypatch, tmp_path / "fast"))


def odd_names(i: int, t: int) -> Any:
    """Keys the record names quote ("'a'"), a Tuple of 11 (fields "10" before "2"), depth 4."""
    deep = {"'q'": {"": (np.float16(t), {"0": np.int8(-t)})}}
    return {"\"x'": np.full(2, t, np.int32), "tuple": tuple(np.uint16(t + k) for k in range(11)),
            "deep": deep}  # fmt: skip


def test_odd_names_and_deep_nesting_round_trip(tmp_path, monkeypatch):
    buf = EpisodeReplayBuffer(1000, seed=4)
    buf.add(episodes_of(odd_names, None, 9, True))
    assert counted_saves(monkeypatch, buf, tmp_path / "fast") <= 3
    slow_save(monkeypatch, buf, tmp_path / "slow")
    check_same_saves(tmp_path / "fast", tmp_path / "slow")
    back, read = counted_load(monkeypatch, tmp_path / "fast", EpisodeReplayBuffer)
    assert read == 1
    check_loaded(back, slow_load(monkeypatch, tmp_path / "slow"))
    assert back.get_episodes() == buf.get_episodes()
