"""Format v2 building blocks: sealed manifest lines, leaf storage, metadata."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.io import CorruptDatasetError, DatasetMetadata, UnstorableValueError
from episodes.io.arrow_leaves import leaf_from_arrow, leaf_info, leaf_to_arrow
from episodes.io.shards import seal_line, unseal_line

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=6), JSON, min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(obj=OBJECTS)
def test_sealed_lines_round_trip(obj):
    obj.pop("crc32", None)
    if not obj:
        return
    line = seal_line(obj)
    assert line.endswith(b"}\n") and line.count(b"\n") == 1
    assert unseal_line(line[:-1], "x") == obj


@settings(max_examples=60, deadline=None)
@given(obj=OBJECTS, data=st.data())
def test_any_flipped_bit_in_a_line_is_caught(obj, data):
    obj.pop("crc32", None)
    if not obj:
        return
    line = bytearray(seal_line(obj)[:-1])
    at = data.draw(st.integers(0, len(line) - 1))
    line[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CorruptDatasetError):
        unseal_line(bytes(line), "x")


LEAF_CASES = [
    pytest.param(np.array([True, False, True]), id="bool"),
    pytest.param(np.arange(4, dtype=np.int8), id="int8"),
    pytest.param(np.arange(4, dtype=np.uint64) * (2**62), id="uint64"),
    pytest.param(np.linspace(0, 1, 6, dtype=np.float16).reshape(3, 2), id="float16"),
    pytest.param(np.arange(24, dtype=np.float32).reshape(2, 3, 4), id="float32-3d"),
    pytest.param(np.array([1 + 2j, 3 - 1j], dtype=np.complex64), id="complex"),
    pytest.param(np.array(["a", "bcd", ""]), id="unicode"),
    pytest.param(np.array([b"x", b"yz"]), id="bytes"),
    pytest.param(np.arange(3, dtype=">i4"), id="big-endian"),
    pytest.param(np.array(["2020-01-01", "1999-12-31"], dtype="M8[D]"), id="datetime"),
    pytest.param(np.arange(3, dtype="m8[s]"), id="timedelta"),
    pytest.param(np.zeros((3, 0), np.float32), id="empty-items"),
    pytest.param(np.zeros((0, 2), np.int64), id="no-items"),
    pytest.param(np.array([[True, False]] * 3), id="bool-2d"),
]


@pytest.mark.parametrize("array", LEAF_CASES)
@pytest.mark.parametrize("pad", [0, 2])
def test_leaves_round_trip_exactly(array, pad):
    info = leaf_info(array, ["col", "leaf"])
    column = leaf_to_arrow(array, len(array) + pad, info)
    assert len(column) == len(array) + pad
    if info["storage"] != "empty":  # a null column: items of zero bytes need no storage
        assert column.null_count == pad
    back = leaf_from_arrow(column, info, 0, len(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    if len(array) > 1:
        np.testing.assert_array_equal(leaf_from_arrow(column, info, 1, len(array) - 1), array[1:])
    if pad and info["storage"] != "empty":
        with pytest.raises(CorruptDatasetError, match="null"):
            leaf_from_arrow(column, info, 0, len(array) + pad)
        whole = leaf_from_arrow(column, info, 0, len(array) + pad, nulls_ok=True)
        np.testing.assert_array_equal(whole[: len(array)], array)


def test_leaf_type_mismatch_is_corruption():
    ints = np.arange(3, dtype=np.int64)
    column = leaf_to_arrow(ints, 3, leaf_info(ints, ["x"]))
    wrong = leaf_info(ints.astype(np.float64), ["x"])
    with pytest.raises(CorruptDatasetError, match="Arrow type"):
        leaf_from_arrow(column, wrong, 0, 3)


@pytest.mark.parametrize(
    "fields",
    [
        {"seeds": [1, True]},
        {"seeds": "1"},
        {"env_id": 3},
        {"env_spec": []},
        {"user": []},
        {"policy_version": 1.5},
    ],
)
def test_metadata_types_are_checked(fields):
    with pytest.raises(CorruptDatasetError):
        DatasetMetadata.from_json(fields, "x")
    with pytest.raises(UnstorableValueError):
        DatasetMetadata(**fields).to_json()


def test_metadata_ignores_unknown_keys_and_round_trips():
    meta = DatasetMetadata(env_id="E-v0", seeds=[3], user={"a": [1, {"b": None}]})
    data = {**meta.to_json(), "added_later": 1}
    assert DatasetMetadata.from_json(data, "x") == meta
    with pytest.raises(UnstorableValueError):
        DatasetMetadata(user={"x": float("nan")}).to_json()
