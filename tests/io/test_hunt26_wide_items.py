"""v2 refuses, at ``write``, items wider than Arrow's readers take (they were written, then
every episode of their shard failed to read: a Text(2**26) observation is 2**28 bytes)."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
from gymnasium import spaces as gs

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetWriter,
    EpisodeWriter,
    UnstorableValueError,
    read_episodes,
    shard_codec,
)


def stored(id_: str, space: gs.Space, item) -> SingleAgentEpisode:
    episode = SingleAgentEpisode(id_, observation_space=space, action_space=gs.Discrete(2))
    episode.add_env_reset(item)
    episode.add_env_step(item, 0, 1.0, terminated=True)
    episode.to_numpy()
    return episode


WIDE = [
    ("text", gs.Text(30), "ab" * 15),  # <U30: 120 bytes an item
    ("complex", None, None),  # complex128 x 8: 128 bytes
]


@pytest.mark.parametrize("name, space, item", WIDE, ids=[w[0] for w in WIDE])
@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
def test_items_wider_than_arrow_reads_are_refused_at_write(
    tmp_path, monkeypatch, name, space, item, data_format
):
    monkeypatch.setattr(shard_codec, "_ARROW_MAX_BYTE_WIDTH", 100)
    if item is None:
        item = np.full(8, 0.5 + 0.5j)
    ok = stored("ok", gs.Discrete(3), 1)
    wide = stored("wide", space, item)
    with DatasetWriter(tmp_path / "v2", data_format=data_format) as writer:
        writer.write(ok)
        with pytest.raises(UnstorableValueError, match="observations: items of 1[0-9]{2} bytes"):
            writer.write(wide)
        writer.write(stored("after", gs.Discrete(3), 2))
    assert [e.id_ for e in read_episodes(tmp_path / "v2")] == ["ok", "after"]
    with EpisodeWriter(tmp_path / "v1") as writer:  # v1 stores it, as the message says
        writer.write(wide)
    assert [e.id_ for e in read_episodes(tmp_path / "v1")] == ["wide"]


@pytest.mark.parametrize("extra, reads", [(0, True), (1, False)])
def test_the_limit_is_the_widest_item_arrow_reads(extra, reads):
    width = shard_codec._ARROW_MAX_BYTE_WIDTH + extra
    table = pa.table({"x": pa.array([], pa.binary(width))})  # the type alone decides
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as file:
        file.write_table(table)
    try:
        pa.ipc.open_file(pa.BufferReader(sink.getvalue())).read_all()
    except pa.ArrowInvalid:
        assert not reads
    else:
        assert reads
