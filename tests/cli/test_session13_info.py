"""`episodes info --json` of a v1 dataset: fields only v2 has are null."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter


def test_v1_info_json_has_null_shards(tmp_path: Path) -> None:
    with EpisodeWriter(tmp_path / "v1") as writer:
        writer.write(
            SingleAgentEpisode(
                "a", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
            )
        )
    out = subprocess.run(
        [sys.executable, "-m", "episodes", "info", str(tmp_path / "v1"), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["version"] == 1
    assert data["shards"] is None and data["created"] is None
