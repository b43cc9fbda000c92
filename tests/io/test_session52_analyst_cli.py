"""Session 52: ``episodes info --json`` lists each episode's id and flags beside its return and
length, so an analyst can make a per-episode table of a dataset without Python's API."""

from __future__ import annotations

import json
import math

import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import DatasetWriter, EpisodeWriter, dataset_info


def episode(id_, rewards, **flags):
    return SingleAgentEpisode(
        id_,
        observations=list(range(len(rewards) + 1)),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
        **flags,
    )


# (id as written, id as --json lists it: the manifest's JSON form)
IDS = [
    pytest.param("ep-1", "ep-1", id="str"),
    pytest.param(7, 7, id="int"),
    pytest.param(("env", 3), {"__ep_tuple__": ["env", 3]}, id="tuple"),
    pytest.param(float("nan"), {"__ep_float__": "nan"}, id="nan"),
]


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter])
@pytest.mark.parametrize(("id_", "listed"), IDS)
def test_info_json_lists_ids_and_flags_per_episode(tmp_path, capsys, writer, id_, listed):
    with writer(tmp_path / "d") as w:
        w.write(episode(id_, [1.0, 2.0], truncated=True))
        w.write(episode("done", [0.5], terminated=True))
        w.write(episode("running", [0.25, 0.25, 0.25]))
    assert main(["info", str(tmp_path / "d"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert data["ids"] == [listed, "done", "running"]
    assert data["terminated"] == [False, True, False]
    assert data["truncated"] == [True, False, False]
    assert data["returns"] == [3.0, 0.5, 0.75] and data["lengths"] == [2, 1, 3]
    table = list(zip(data["ids"], data["returns"], data["lengths"], data["terminated"]))
    summaries = dataset_info(tmp_path / "d").episodes
    assert len(table) == len(summaries) == data["episodes"]
    for (_, ret, length, terminated), summary in zip(table, summaries):
        assert (ret, length, terminated) == (summary.ret, summary.length, summary.terminated)
    first = summaries[0].id_
    assert math.isnan(first) if id_ != id_ else first == id_


def test_info_json_of_an_empty_dataset_lists_no_episodes(tmp_path, capsys):
    with DatasetWriter(tmp_path / "d"):
        pass
    assert main(["info", str(tmp_path / "d"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ids"] == data["terminated"] == data["truncated"] == data["returns"] == []
