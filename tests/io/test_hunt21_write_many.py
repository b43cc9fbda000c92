"""DatasetWriter.write_many is one write per episode: a refusal keeps the episodes before it."""

from __future__ import annotations

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, UnstorableValueError, read_episodes


def _episode(id_: str) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_a_refused_episode_stops_write_many_after_the_earlier_ones(tmp_path, data_format) -> None:
    bad = _episode("bad")
    bad.custom_data["f"] = lambda: 1  # a function is no storable value
    path = str(tmp_path / "ds")
    with DatasetWriter(path, data_format=data_format) as writer:
        with pytest.raises(UnstorableValueError):
            writer.write_many([_episode("first"), bad, _episode("after")])
        writer.write(_episode("later"))
    assert [e.id_ for e in read_episodes(path)] == ["first", "later"]
