"""Regressions of hunt 20's return changes, found against the session's start.

get_return now sums float16/float32 rewards in float64 and refuses vector, complex and
non-number rewards. A manifest keeps no made-up return for rewards get_return refuses (null,
not 0.0), and the validator still accepts the returns earlier writers stored (summed in the
rewards' own dtype, vector components added up): those datasets are not damaged.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import episodes.io.shard_writer as shard_writer
import episodes.io.writer as v1_writer
from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, filter_dataset, read_episodes
from episodes.io.format import piece_return
from episodes.io.validation import validate_dataset


def _episode(rewards: list[Any], id_: str = "e") -> SingleAgentEpisode:
    n = len(rewards)
    return SingleAgentEpisode(
        id_, observations=list(range(n + 1)), actions=[0] * n, rewards=rewards,
        len_lookback_buffer=0,
    )  # fmt: skip


def _earlier_sum(episode: Any) -> float:
    # What writers before 2026-12-03 stored: numpy's sum in the rewards' own dtype, vector
    # components added up, 0.0 for rewards with no float sum.
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return float(np.real(np.asarray(episode.get_rewards()).sum()))
    except (TypeError, ValueError):
        return 0.0


def _write(path: Path, episodes: list[SingleAgentEpisode], version: int) -> None:
    if version == 2:
        with DatasetWriter(path) as writer:
            writer.write_many(episodes)
    else:
        with EpisodeWriter(path) as writer:
            for episode in episodes:
                writer.write(episode)


FLOAT32_ONES = [np.float32(0.1)] * 7  # a float32 sum rounds differently from a float64 one
EARLIER = {
    "float32 rewards": FLOAT32_ONES,
    "float16 rewards past float16 max": [np.float16(60000.0)] * 2,
    "vector rewards": [np.array([1.0, 10.0])] * 2,
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", EARLIER)
def test_a_dataset_an_earlier_writer_summed_still_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, version: int
) -> None:
    episode = _episode(EARLIER[case])
    assert _earlier_sum(episode) != piece_return(episode) or case == "vector rewards"
    monkeypatch.setattr(shard_writer, "piece_return", _earlier_sum)
    monkeypatch.setattr(v1_writer, "piece_return", _earlier_sum)
    _write(tmp_path / "ds", [episode], version)
    monkeypatch.undo()
    report = validate_dataset(tmp_path / "ds")
    assert report.ok, report.problems


def test_an_edited_v1_return_is_still_a_problem(tmp_path: Path) -> None:
    # v1 lines carry no checksum: the validator's sum is what catches the edit.
    _write(tmp_path / "ds", [_episode(FLOAT32_ONES)], 1)
    manifest = next(p for p in (tmp_path / "ds").rglob("manifest*") if p.is_file())
    lines = manifest.read_text().splitlines()
    record = json.loads(lines[0])
    record["return"] = 5.0
    manifest.write_text(json.dumps(record) + "\n" + "".join(line + "\n" for line in lines[1:]))
    assert any(
        "is not the sum of its rewards" in p for p in validate_dataset(tmp_path / "ds").problems
    )


@pytest.mark.parametrize(
    "rewards",
    [
        pytest.param([np.array([1.0, 10.0])] * 2, id="vector"),
        pytest.param([np.complex128(1 + 2j), np.complex128(3.0)], id="complex"),
    ],
)
def test_rewards_with_no_return_store_none_and_pass_no_return_bound(
    tmp_path: Path, rewards: list[Any]
) -> None:
    assert np.isnan(piece_return(_episode(rewards)))
    _write(tmp_path / "ds", [_episode(rewards, "odd"), _episode([1.0, 1.0], "plain")], 2)
    assert validate_dataset(tmp_path / "ds").ok
    filter_dataset(tmp_path / "ds", tmp_path / "kept", min_return=-1e9)
    assert [ep.id_ for ep in read_episodes(tmp_path / "kept")] == ["plain"]
