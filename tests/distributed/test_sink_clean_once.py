"""The Ray sink removes dead writers' leftovers once, before its write tasks.

Each write task's writer listed ``shards/`` when it opened alone: at 4,000 blocks 3.65 ms a
task, growing with the dataset, so a write of N blocks cost N times its shards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import EpisodeDatasink  # noqa: E402
from episodes.io import DatasetWriter, read_episodes, shard_writer  # noqa: E402


def _block(*ids: str) -> Any:
    episodes = [
        SingleAgentEpisode(
            i, observations=[0, 1], actions=[1], rewards=[1.0], len_lookback_buffer=0
        )
        for i in ids
    ]
    return pd.DataFrame({"episode": episodes})


@pytest.fixture()
def cleanings(monkeypatch) -> list[Path]:
    calls: list[Path] = []
    real = shard_writer.remove_leftovers

    def counting(path: Path, **kwargs: Any) -> None:
        calls.append(path)
        real(path, **kwargs)

    monkeypatch.setattr(shard_writer, "remove_leftovers", counting)
    return calls


def test_an_existing_dataset_is_cleaned_at_the_start_and_not_by_each_task(
    tmp_path: Path, cleanings: list[Path]
) -> None:
    with DatasetWriter(tmp_path, sync=False) as w:
        w.write(_block("old")["episode"][0])
    leftover = tmp_path / "shards" / ".tmp-dead.arrow"
    leftover.write_bytes(b"left by a writer that died")
    cleanings.clear()
    sink = EpisodeDatasink(tmp_path, sync=False, append=True)
    sink.on_write_start(None)
    assert not leftover.exists() and len(cleanings) == 1
    for task in range(5):
        assert sink.write([_block(f"t{task}")], ctx=None) == 1
    assert len(cleanings) == 1
    assert sorted(ep.id_ for ep in read_episodes(tmp_path)) == ["old", "t0", "t1", "t2", "t3", "t4"]


def test_a_new_dataset_is_not_made_at_the_start(tmp_path: Path, cleanings: list[Path]) -> None:
    sink = EpisodeDatasink(tmp_path / "new")
    sink.on_write_start(None)
    assert not (tmp_path / "new").exists() and cleanings == []
    sink.write([_block("a")], ctx=None)
    assert [ep.id_ for ep in read_episodes(tmp_path / "new")] == ["a"]


def test_a_sink_told_not_to_clean_leaves_leftovers(tmp_path: Path, cleanings: list[Path]) -> None:
    DatasetWriter(tmp_path, sync=False).close()
    leftover = tmp_path / "shards" / ".tmp-dead.arrow"
    leftover.write_bytes(b"x")
    cleanings.clear()
    sink = EpisodeDatasink(tmp_path, clean=False)
    sink.on_write_start(None)
    sink.write([_block("a")], ctx=None)
    assert leftover.exists() and cleanings == []


@pytest.mark.parametrize("clean", ["no", 0, None])
def test_a_clean_option_that_is_no_bool_is_refused_at_the_start(tmp_path: Path, clean) -> None:
    DatasetWriter(tmp_path, sync=False).close()
    with pytest.raises(TypeError, match="clean must be a bool"):
        EpisodeDatasink(tmp_path, clean=clean).on_write_start(None)
