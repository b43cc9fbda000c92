"""Copy-on-write maps of large leaves hold a file descriptor only before Python 3.13.

From 3.13 ``mmap`` can map without keeping a duplicate descriptor (``trackfd=False``), as the
docs say the maps are made there; before, each live map holds one.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.leaf_maps import live_maps


def test_descriptors_held_by_read_episodes_large_leaves(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        for i in range(6):
            episode = SingleAgentEpisode(
                f"e{i}",
                observations=list(np.full((300, 1024), i, np.float32)),  # 1.2 MB: mapped
                actions=[0] * 299,
                rewards=[0.0] * 299,
                len_lookback_buffer=0,
            )
            episode.to_numpy()
            w.write(episode)
    maps, fds = live_maps(), len(os.listdir("/proc/self/fd"))
    episodes = list(read_episodes(tmp_path / "d"))
    held = len(os.listdir("/proc/self/fd")) - fds
    assert live_maps() - maps == 6
    assert held == (0 if sys.version_info >= (3, 13) else 6)
    for i, episode in enumerate(episodes):  # the maps read the file's bytes, and are private
        episode.set_observations(new_data=np.full(1024, -1, np.float32), at_indices=0)
        assert episode.get_observations(1)[0] == i and episode.get_observations(0)[0] == -1
