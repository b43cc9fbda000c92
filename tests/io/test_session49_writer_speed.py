"""Session 49: the cheaper per-episode write path stores what it always stored.

``DatasetWriter.write`` of a short episode was bound by fixed costs: numpy calls on a few
items, Arrow types and null paddings worked out again per column, a second schema per episode,
``nbytes`` walked per column. These tests pin what the columns hold and what reads back.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.arrow_leaves import leaf_info, leaf_to_arrow, numeric_array, text_array
from episodes.io.shard_codec import encode_rows
from episodes.testing.strategies import episodes

TEXT_CASES = {
    "one id on every row": ([b"ep-7"] * 3, 3, pa.string()),
    "an empty id": ([b""] * 4, 4, pa.string()),
    "empty infos": ([b"{}"] * 5, 5, pa.large_string()),
    "mixed infos": ([b"{}", b'{"a": 1}', b"{}"], 3, pa.large_string()),
    "a blob then nulls": ([b"\x00\x01\x02"], 4, pa.large_binary()),
    "no items, null rows": ([], 3, pa.large_binary()),
    "no rows": ([], 0, pa.string()),
    "texts then nulls": ([b"ab", b"c"], 11, pa.large_string()),
}


@pytest.mark.parametrize(("items", "rows", "kind"), TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_text_array_is_the_column_arrow_builds(items, rows, kind):
    column = text_array(items, rows, kind)
    as_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    values = [v.decode() if as_text else v for v in items] + [None] * (rows - len(items))
    column.validate(full=True)
    assert column.type == kind
    assert column.equals(pa.array(values, kind))
    assert column.null_count == rows - len(items)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(max_size=6), max_size=8),
    st.integers(0, 9),
    st.booleans(),
    st.sampled_from([pa.string(), pa.large_string(), pa.large_binary()]),
)
def test_text_array_any_items(items, extra, same, kind):
    if same and items:
        items = [items[0]] * len(items)
    if kind != pa.large_binary():
        items = [bytes(b % 128 for b in item) for item in items]  # UTF-8 text
    rows = len(items) + extra
    column = text_array(items, rows, kind)
    column.validate(full=True)
    want = [v if kind == pa.large_binary() else v.decode() for v in items]
    assert column.to_pylist() == want + [None] * extra


LEAF_CASES = {
    "float32 items padded by one": (np.arange(8, dtype=np.float32).reshape(2, 4), 3),
    "int64 scalars padded by two": (np.array([5, -1], np.int64), 4),
    "float64 scalars, no padding": (np.array([0.5, 1.5, 2.5]), 3),
    "uint8 images padded by one": (np.arange(12, dtype=np.uint8).reshape(1, 3, 4), 2),
    "raw (text) items padded": (np.array(["ab", "c"]), 3),
    "bools padded": (np.array([True, False]), 3),
}


@pytest.mark.parametrize(("array", "rows"), LEAF_CASES.values(), ids=LEAF_CASES.keys())
def test_leaf_columns_pad_with_nulls_each_their_own(array, rows):
    info = leaf_info(array, ["x"])
    first = leaf_to_arrow(array, rows, info)
    second = leaf_to_arrow(array, rows, info)  # paddings and types are reused, values not
    first.validate(full=True)
    assert first.null_count == rows - len(array)
    assert first.to_pylist()[len(array) :] == [None] * (rows - len(array))
    assert first.equals(second)
    if info["storage"] == "arrow":
        flat = [
            v.tolist() if isinstance(v, np.ndarray) else v for v in array.reshape(len(array), -1)
        ]
        got = first.to_pylist()[: len(array)]
        assert [g if isinstance(g, list) else [g] for g in got] == flat
    array[...] = array[::-1].copy()  # the column holds its own rows
    assert first.equals(second)


def test_numeric_array_types_follow_the_dtype():
    for dtype in (np.int8, np.uint16, np.int32, np.float16, np.float32, np.float64):
        column = numeric_array(np.arange(3, dtype=dtype))
        assert column.type == pa.from_numpy_dtype(np.dtype(dtype))
        assert column.to_pylist() == [0, 1, 2]


def test_encoded_bytes_count_every_column():
    ep = SingleAgentEpisode("a", observations=np.zeros((3, 4), np.float32), actions=[0, 1],
                            rewards=[1.0, 2.0], len_lookback_buffer=0)  # fmt: skip
    enc = encode_rows(ep)
    data = sum(c.nbytes for c in enc.columns.values())  # what replay's save budget models
    assert data >= 3 * 4 * 4 + 2 * 8 + 2 * 8  # observations, actions, rewards at least
    assert enc.nbytes - data == 8 << 10  # the index entry's allowance


def _settings():
    return settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@_settings()
@given(
    st.lists(episodes(max_len=4), min_size=1, max_size=6),
    st.sampled_from(["arrow", "parquet"]),
    st.sampled_from([1, 20_000, 64 << 20]),
    st.booleans(),
)
def test_written_episodes_read_back_equal(tmp_path_factory, eps, data_format, shard_bytes, many):
    path = tmp_path_factory.mktemp("w") / "d"
    with DatasetWriter(path, shard_bytes=shard_bytes, data_format=data_format, sync=False) as w:
        if many:
            w.write_many(eps)
        else:
            for ep in eps:
                w.write(ep)
    back = list(read_episodes(path))
    assert len(back) == len(eps)
    for got, ep in zip(back, eps, strict=True):
        assert got == ep


def test_changed_column_types_start_a_new_shard(tmp_path):
    def ep(id_, actions):
        return SingleAgentEpisode(id_, observations=[0, 1, 2], actions=actions,
                                  rewards=[1.0, 1.0], len_lookback_buffer=0)  # fmt: skip

    eps = [ep("a", [1, 2]), ep("b", [3, 4]), ep("c", [0.5, 1.5]), ep("d", [2.5, 0.0])]
    with DatasetWriter(tmp_path / "d", sync=False) as w:
        w.write_many(eps)
        w.flush()
        assert len(w.committed) == 2  # int actions, then float ones
    assert list(read_episodes(tmp_path / "d")) == eps


def test_a_refused_episode_keeps_its_message_and_those_before(tmp_path):
    good = SingleAgentEpisode("ok", observations=[0, 1], actions=[1], rewards=[1.0])
    bad = SingleAgentEpisode("bad", observations=[0, 1], actions=[1], rewards=[1.0],
                             infos=[{}, {"s": {1, 2}}])  # fmt: skip
    with DatasetWriter(tmp_path / "d", sync=False) as w:
        with pytest.raises(Exception, match=r"episode 1 of the call \(id 'bad'") as err:
            w.write_many([good, bad, good])
        assert type(err.value).__name__ == "UnstorableValueError"
    assert [e.id_ for e in read_episodes(tmp_path / "d")] == ["ok"]
