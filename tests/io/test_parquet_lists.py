"""Parquet shards store fixed-size lists as marked lists: pyarrow before 26 reads them too.

pyarrow 19-25 failed to read a Parquet ``fixed_size_list`` column holding a null ("Expected all
lists to be of size=2 but index 8 had size=0"), and every shard has such nulls (the last row of
``actions``; a step without an extra model output): each Parquet dataset with a vector leaf was
unreadable there, though ``pyarrow>=14`` is declared.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.parquet_lists import LIST_SIZE_KEY, loosen_fixed_lists, restore_fixed_lists


def _episode() -> SingleAgentEpisode:
    ep = SingleAgentEpisode("e", observations=[np.zeros(3, np.float32)], len_lookback_buffer=0)
    for t in range(4):
        ep.add_env_step(
            np.full(3, t + 1, np.float32),
            np.array([t, -t], np.float32),
            float(t),
            extra_model_outputs={"vf": np.array([0.5 * t])},
        )
    return ep.to_numpy()


def _types(kind: pa.DataType) -> list[pa.DataType]:
    found = [kind]
    if pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            found += _types(kind.field(i).type)
    elif pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
        found += _types(kind.value_type)
    return found


def _write(path, episodes):
    with DatasetWriter(path, data_format="parquet", compression="zstd") as writer:
        writer.write_many(episodes)
    (data,) = sorted((path / "shards").glob("*.parquet"))
    return data


def test_a_parquet_shard_holds_no_fixed_size_list(tmp_path):
    data = _write(tmp_path / "ds", [_episode()])
    schema = pq.read_schema(data)
    kinds = [k for field in schema for k in _types(field.type)]
    assert not any(pa.types.is_fixed_size_list(k) for k in kinds)
    assert schema.field("observations").metadata == {LIST_SIZE_KEY: b"3"}
    assert schema.field("actions").metadata == {LIST_SIZE_KEY: b"2"}
    vf = schema.field("extra_model_outputs").type.field("vf")
    assert vf.metadata == {LIST_SIZE_KEY: b"1"}


def test_other_readers_see_the_values_and_the_nulls(tmp_path):
    ep = _episode()
    table = pq.read_table(_write(tmp_path / "ds", [ep]))
    actions = table.column("actions").to_pylist()
    assert actions[:4] == ep.get_actions().tolist() and actions[4] is None
    assert table.column("observations").to_pylist() == ep.get_observations().tolist()


def test_parquet_round_trips_as_arrow_does(tmp_path):
    ep = _episode()
    _write(tmp_path / "pq", [ep])
    with DatasetWriter(tmp_path / "arrow") as writer:
        writer.write(ep)
    (from_parquet,) = read_episodes(tmp_path / "pq")
    (from_arrow,) = read_episodes(tmp_path / "arrow")
    for got in (from_parquet, from_arrow):
        np.testing.assert_array_equal(got.get_observations(), ep.get_observations())
        np.testing.assert_array_equal(got.get_actions(), ep.get_actions())
        np.testing.assert_array_equal(
            got.get_extra_model_outputs("vf"), ep.get_extra_model_outputs("vf")
        )


NESTED = {
    "flat": pa.array([[1, 2], None, [3, 4]], pa.list_(pa.int16(), 2)),
    "in a struct": pa.array(
        [{"x": [1.0], "y": 2}, None, {"x": None, "y": 3}],
        pa.struct([("x", pa.list_(pa.float64(), 1)), ("y", pa.int64())]),
    ),
    "in a list": pa.array([[[1, 2]], None, []], pa.list_(pa.list_(pa.uint8(), 2))),
    "of bools": pa.array([[True, False, True], None, None], pa.list_(pa.bool_(), 3)),
    "no list": pa.array(["a", None, "c"], pa.large_string()),
}


@pytest.mark.parametrize("case", NESTED)
def test_loosen_then_restore_is_the_identity(case):
    table = pa.table({"c": NESTED[case]})
    loose = loosen_fixed_lists(table)
    assert not any(pa.types.is_fixed_size_list(k) for k in _types(loose.schema.field("c").type))
    back = restore_fixed_lists(loose)
    assert back.schema.equals(table.schema) and back.equals(table)


def test_unmarked_fixed_size_lists_are_read_as_they_are():
    # Shards written before the marks: kept as they are (pyarrow >= 26 reads them).
    table = pa.table({"c": NESTED["flat"]})
    assert restore_fixed_lists(table) is table


BAD_SIZES = {
    "not a number": (b"two", ValueError),
    "negative": (b"-2", ValueError),
    "beyond int32": (str(2**31).encode(), ValueError),
    "the wrong size": (b"3", pa.ArrowInvalid),
}


@pytest.mark.parametrize("case", BAD_SIZES)
def test_a_bad_mark_is_an_error(case):
    size, error = BAD_SIZES[case]
    field = pa.field("c", pa.list_(pa.int16()), metadata={LIST_SIZE_KEY: size})
    table = pa.table([pa.array([[1, 2], None], pa.list_(pa.int16()))], pa.schema([field]))
    with pytest.raises(error):
        restore_fixed_lists(table)
