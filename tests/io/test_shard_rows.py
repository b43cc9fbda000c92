"""What another tool sees in a v2 shard's rows: a nested column is null where a flat one is."""

from __future__ import annotations

import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes


def _table(path: pathlib.Path, data_format: str) -> pa.Table:
    shard = next((path / "shards").glob(f"*.{data_format}"))
    if data_format == "arrow":
        return pyarrow.ipc.open_file(shard).read_all()
    return pq.read_table(shard)


@pytest.mark.parametrize("data_format", ["arrow", "parquet"])
@pytest.mark.parametrize(
    "actions",
    [[{"a": 1, "b": 0.5}, {"a": 0, "b": 1.5}], [(1, 0.5), (0, 1.5)], [1, 0]],
    ids=["dict", "tuple", "flat"],
)
def test_nested_columns_are_null_in_the_last_row_as_flat_ones(tmp_path, data_format, actions):
    episode = SingleAgentEpisode(
        "e",
        observations=[0.0, 1.0, 2.0],
        actions=actions,
        rewards=[1.0, 1.0],
        extra_model_outputs={"logp": [-0.1, -0.2], "h": [(1.0, 2.0), (3.0, 4.0)]},
        len_lookback_buffer=0,
    ).to_numpy()
    with DatasetWriter(tmp_path / "ds", data_format=data_format) as writer:
        writer.write(episode)
    table = _table(tmp_path / "ds", data_format)
    for name in ("actions", "rewards", "extra_model_outputs"):
        assert pc.is_null(table.column(name)).to_pylist() == [False, False, True], name
        assert pc.count(table.column(name)).as_py() == len(episode)
    assert next(iter(read_episodes(tmp_path / "ds"))) == episode
