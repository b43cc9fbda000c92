"""The small dataset the quarantine and relist tests share: four shards of one piece each."""

from __future__ import annotations

from pathlib import Path

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter

QUARANTINE = Path("unlisted") / "shards"
IDS = ["a", "b", "c", "d"]


def one_episode(id_: str) -> SingleAgentEpisode:
    """A two-step piece named ``id_``."""
    return SingleAgentEpisode(
        id_, observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[0.5, 1.0], len_lookback_buffer=0
    )


def four_shards(path: Path) -> bytes:
    """Four one-piece shards (``IDS``); returns the whole manifest."""
    with DatasetWriter(path, shard_bytes=1, sync=False) as w:
        for id_ in IDS:
            w.write(one_episode(id_))
    return (path / "manifest.jsonl").read_bytes()
