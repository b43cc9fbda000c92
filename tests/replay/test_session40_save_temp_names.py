"""A replay buffer's save writes its shards under names no data glob (`*.arrow`) matches."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io.shard_stream import ShardStream
from episodes.replay import EpisodeReplayBuffer


def test_a_shard_being_saved_is_matched_by_no_data_glob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []
    listings: list[list[str]] = []
    real_init = ShardStream.__init__

    def spy(self: ShardStream, path: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, path, *args, **kwargs)
        opened.append(Path(path))
        listings.append(sorted(p.name for p in Path(path).parent.iterdir()))

    monkeypatch.setattr(ShardStream, "__init__", spy)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=np.zeros((4, 2), np.float32),
            actions=np.zeros(3, np.int64),
            rewards=np.ones(3),
            len_lookback_buffer=0,
        )
    )
    buf.save(tmp_path / "saved")
    assert opened, "the save wrote no shard"
    for path, names in zip(opened, listings):
        assert path.name.startswith(".tmp-") and path.name.endswith(".part")
        assert path.name in names
        assert not fnmatch.filter(names, "*.arrow"), names  # the file being written is no match
    assert EpisodeReplayBuffer.load(tmp_path / "saved").get_episode_ids() == ["a"]
