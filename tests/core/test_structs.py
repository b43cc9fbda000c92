"""data_equal (the leaf-wise equality episodes and buffers compare with) and map_batch."""

from collections import namedtuple

import numpy as np
import pytest

from episodes.structs import data_equal, map_batch, same_nesting

F32 = np.float32


def _objects(*items):
    array = np.empty(len(items), object)
    array[:] = list(items)
    return array


CASES = {
    "same_rows": (np.zeros(2, F32), np.zeros(2, F32), True),
    "dtype_differs": (np.zeros(2, F32), np.zeros(2), False),
    "nan_equals_nan": (np.array([np.nan], F32), np.array([np.nan], F32), True),
    "number_and_0d_array": (1.5, np.array(1.5), True),
    "dict_key_order_ignored": ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
    "tuple_vs_list": ((1, 2), [1, 2], False),
    "str_vs_bytes": ("a", b"a", False),
    # numpy holds 2**70 only as an object: comparing it with a row must say False, not raise.
    "huge_int_vs_row": (2**70, np.zeros(2, F32), False),
    "row_vs_huge_int": (np.zeros(2, F32), 2**70, False),
    "huge_ints_equal": (2**70, 2**70, True),
    "list_of_huge_int_and_row": ([2**70, np.zeros(2)], [2**70, np.zeros(2)], True),
    "object_arrays_holding_rows": (
        _objects(2**70, np.zeros(2)),
        _objects(2**70, np.zeros(2)),
        True,
    ),
    "object_arrays_rows_differ": (_objects(2**70, np.zeros(2)), _objects(2**70, np.ones(2)), False),
    # numpy scalars keep their dtype, as rows do (a list column and its numpy'd one agree).
    "numpy_scalar_dtypes_differ": (np.int32(1), np.int64(1), False),
    "numpy_scalar_vs_0d_array_other_dtype": (np.float32(1.5), np.array(1.5), False),
    "numpy_scalar_vs_0d_array_same_dtype": (np.float32(1.5), np.array(1.5, F32), True),
    "python_number_vs_numpy_scalar": (1, np.int64(1), True),
    "lists_of_numpy_scalars_of_other_dtypes": ([np.int32(1)], [np.int64(1)], False),
}


@pytest.mark.parametrize("a, b, expected", CASES.values(), ids=CASES.keys())
def test_data_equal_cases(a, b, expected):
    assert data_equal(a, b) is expected
    assert data_equal(b, a) is expected


Pair = namedtuple("Pair", "a b")

BATCHES = {
    "array": (np.zeros(3), np.zeros(3)),
    "list_is_one_leaf": ([1, 2, 3], np.array([1, 2, 3])),
    "dict_of_lists": (
        {"a": [1.0, 2.0], "b": np.ones(2)},
        {"a": np.array([1.0, 2.0]), "b": np.ones(2)},
    ),
    "tuple_in_dict": ({"d": ([0, 1], [2, 3])}, {"d": (np.array([0, 1]), np.array([2, 3]))}),
    "namedtuple_kept": (Pair([0, 1], [2, 3]), Pair(np.array([0, 1]), np.array([2, 3]))),
}


@pytest.mark.parametrize(("batch", "expected"), BATCHES.values(), ids=BATCHES.keys())
def test_map_batch_nests_dicts_and_tuples_only(batch, expected):
    out = map_batch(np.asarray, batch)
    assert type(out) is type(expected)
    assert data_equal(out, expected)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"a": 1, "b": (2, 3)}, {"b": [0, 0], "a": 5}, True),  # tuples and lists interchange
        ({"a": 1, "b": 2}, {"a": 1, "c": 2}, False),  # a renamed key
        ({"a": 1}, (1,), False),  # a tuple for a dict
        ((1, 2), (1, 2, 3), False),  # another length
        ({"a": (1, {"x": 0})}, {"a": (1, {"y": 0})}, False),  # deep
        (1.0, np.zeros(2), True),  # leaves are not compared
        (1.0, {"a": 1}, False),  # a nested item for a leaf
    ],
)
def test_same_nesting_cases(a, b, expected):
    assert same_nesting(a, b) is expected
