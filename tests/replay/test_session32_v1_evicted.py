"""A version-1 replay save (raw JSON evicted ids) gives its tuple ids back as tuples."""

import json

import gymnasium as gym
import numpy as np

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)


def _episode(id_):
    ep = SingleAgentEpisode(id_, observation_space=BOX, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(np.zeros(2, np.float32))
    for _ in range(3):
        ep.add_env_step(np.zeros(2, np.float32), 0, 1.0)
    return ep.to_numpy()


def test_version_one_evicted_tuple_ids_load_as_tuples(tmp_path):
    buf = EpisodeReplayBuffer(5, seed=0)
    for id_ in [("t", 1), ("t", (2, "x")), ("u", 1)]:
        buf.add(_episode(id_))
    assert buf.get_evicted_ids() == [("t", 1), ("t", (2, "x"))]
    buf.save(tmp_path / "save")
    path = tmp_path / "save" / "replay.json"
    meta = json.loads(path.read_text())
    for key in ("crc32", "priorities_crc32", "episodes"):  # what version 1 did not write
        meta.pop(key, None)
    meta["version"] = 1
    meta["evicted"] = [["t", 1], ["t", [2, "x"]]]  # as version 1 wrote them: raw JSON
    path.write_text(json.dumps(meta))
    loaded = EpisodeReplayBuffer.load(tmp_path / "save")
    assert loaded.get_evicted_ids() == [("t", 1), ("t", (2, "x"))]
    assert loaded.get_episode_ids() == [("u", 1)]
