"""Hand-made hostile values for the free-form value decoder (infos, ids, custom data).

A file's checksums prove only that it is what a writer wrote; the writer may be hostile. Each
malformed value below must raise CorruptDatasetError naming the problem, never another
exception and never build anything but plain data.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes.io.errors import CorruptDatasetError
from episodes.io.values import BlobReader, BlobWriter, decode_value, encode_value

WHERE = "infos[0]"


def blob_of(table, data=None):
    data = np.zeros(64, np.uint8) if data is None else data
    return BlobReader(data, table, "blob")


def nested_lists(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


GOOD_ENTRY = [0, "<i8", [2]]

HOSTILE = {
    "nested_too_deep": (nested_lists(80), None, "nested deeper"),
    "not_a_json_value": (1 + 2j, None, "unexpected JSON value"),
    "tag_with_a_second_key": ({"__ep_tuple__": [], "x": 1}, None, "exactly one key"),
    "unknown_tag": ({"__ep_object__": "os.system"}, None, "unknown or malformed tag"),
    "float_tag_not_a_special": ({"__ep_float__": "1e3"}, None, "unknown or malformed tag"),
    "tuple_tag_not_a_list": ({"__ep_tuple__": "ab"}, None, "unknown or malformed tag"),
    "dict_pair_of_one": ({"__ep_dict__": [[1]]}, None, "malformed dict pair"),
    "dict_key_unhashable": ({"__ep_dict__": [[[1, 2], 3]]}, None, "unusable dict key"),
    "array_where_none_allowed": ({"__ep_nd__": 0}, None, "not allowed here"),
    "blob_index_a_string": ({"__ep_nd__": "0"}, [GOOD_ENTRY], "must be an int"),
    "blob_index_a_bool": ({"__ep_nd__": True}, [GOOD_ENTRY], "must be an int"),
    "blob_index_out_of_range": ({"__ep_nd__": 1}, [GOOD_ENTRY], "out of range"),
    "blob_index_negative": ({"__ep_nd__": -1}, [GOOD_ENTRY], "out of range"),
    "entry_of_two": ({"__ep_nd__": 0}, [[0, "<i8"]], "malformed"),
    "entry_a_dict": ({"__ep_nd__": 0}, [{"offset": 0}], "malformed"),
    "object_dtype": ({"__ep_nd__": 0}, [[0, "|O8", [1]]], "bad dtype"),
    "void_dtype": ({"__ep_nd__": 0}, [[0, "|V8", [1]]], "bad dtype"),
    "pickled_dtype_string": ({"__ep_nd__": 0}, [[0, "O", [1]]], "bad dtype"),
    "dtype_numpy_cannot_read": ({"__ep_nd__": 0}, [[0, "<i7", [1]]], "blob entry 0"),
    "negative_dimension": ({"__ep_nd__": 0}, [[0, "<i8", [-1]]], "bad shape"),
    "bool_dimension": ({"__ep_nd__": 0}, [[0, "<i8", [True]]], "bad shape"),
    "shape_a_string": ({"__ep_nd__": 0}, [[0, "<i8", "2"]], "bad shape"),
    "negative_offset": ({"__ep_nd__": 0}, [[-8, "<i8", [1]]], "bad offset"),
    "float_offset": ({"__ep_nd__": 0}, [[1.5, "<i8", [1]]], "bad offset"),
    "past_the_end": ({"__ep_nd__": 0}, [[56, "<i8", [2]]], "past the blob's end"),
    "huge_shape": ({"__ep_nd__": 0}, [[0, "<i8", [2**40, 2**40]]], "past the blob's end"),
    "scalar_not_0d": ({"__ep_np__": 0}, [GOOD_ENTRY], "not 0-d"),
}


@pytest.mark.parametrize(("value", "table", "message"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_values_are_refused_as_corruption(value, table, message):
    blob = None if table is None else blob_of(table)
    with pytest.raises(CorruptDatasetError, match=message):
        decode_value(value, blob=blob, where=WHERE)


def test_a_string_beyond_unicode_is_corruption():
    data = np.frombuffer(np.array([0x110000], "<u4").tobytes(), np.uint8).copy()
    with pytest.raises(CorruptDatasetError, match="invalid code point"):
        decode_value({"__ep_nd__": 0}, blob=blob_of([[0, "<U1", [1]]], data), where=WHERE)


def test_blob_table_must_be_a_list():
    with pytest.raises(CorruptDatasetError, match="must be a list"):
        BlobReader(np.zeros(8, np.uint8), {"0": GOOD_ENTRY}, "blob")


def test_decoded_arrays_are_copies_of_the_blob():
    blob = BlobWriter()
    encoded = encode_value({"a": np.arange(3), "s": np.float32(2.5)}, blob=blob, where=WHERE)
    data, table = blob.finish()
    reader = BlobReader(data, table, "blob")
    out = decode_value(encoded, blob=reader, where=WHERE)
    out["a"][:] = 99
    # A fresh reader over the same bytes: a reader hands each stored array out once.
    again = decode_value(encoded, blob=BlobReader(data, table, "blob"), where=WHERE)
    assert again["a"].tolist() == [0, 1, 2] and again["s"] == np.float32(2.5)
    assert type(again["s"]) is np.float32
