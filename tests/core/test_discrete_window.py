"""window_one_hot: the one-hot window of a flat Discrete column, on both of its paths.

Up to eight Python ints are written item by item; longer windows, float-coded integers and
anything else go through one numpy scatter. Both must give the reference's rows and refuse
the same bad values.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes.buffer.discrete_window import window_one_hot


def reference(values, n, start, fill_left, fill_right):
    rows = [np.zeros(n, np.float32) for _ in range(fill_left)]
    for value in values:
        row = np.zeros(n, np.float32)
        row[int(value) - start] = 1.0
        rows.append(row)
    rows += [np.zeros(n, np.float32) for _ in range(fill_right)]
    return np.array(rows, np.float32).reshape(-1, n)


CASES = {
    "empty_with_padding": ([], 3, 0, 2, 1),
    "empty_without_padding": (np.array([], np.int64), 2, 0, 0, 0),
    "few_python_ints": ([2, 0, 1], 3, 0, 1, 1),
    "few_numpy_ints": (np.array([1, 1], np.int32), 2, 0, 0, 2),
    "list_of_numpy_ints": ([np.int64(0), np.int64(2)], 3, 0, 0, 0),
    "eight_ints": (list(range(8)), 8, 0, 0, 0),
    "nine_ints_scatter": (list(range(9)), 9, 0, 1, 0),
    "long_numpy_window": (np.arange(20) % 4, 4, 0, 3, 2),
    "unsigned": (np.array([0, 3, 1], np.uint8), 4, 0, 0, 0),
    "float_coded_ints": (np.array([1.0, 0.0, 2.0]), 3, 0, 0, 1),
    "list_with_a_float": ([1, 2.0], 3, 0, 0, 0),
    "space_start_small": ([5, 3], 3, 3, 1, 0),
    "space_start_long": (np.array([-2, -1, 0] * 4), 3, -2, 0, 0),
    # value - start in the stored dtype wrapped (int8 99 + 100) or overflowed (uint8 0 + 2).
    "int8_past_its_range_after_start": (np.full(9, 99, np.int8), 200, -100, 0, 0),
    "uint8_with_a_negative_start": (np.zeros(9, np.uint8), 3, -2, 0, 0),
    "few_uint8_scalars_negative_start": ([np.uint8(0), np.uint8(1)], 4, -2, 0, 0),
    "few_int8_scalars_past_range": ([np.int8(99)], 200, -100, 0, 0),
}


@pytest.mark.parametrize("values, n, start, left, right", CASES.values(), ids=CASES.keys())
def test_cases_match_reference(values, n, start, left, right):
    out = window_one_hot(values, n=n, start=start, fill_left=left, fill_right=right)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, reference(values, n, start, left, right))


BAD = {
    "small_too_large": [0, 3],
    "small_negative": [-1],
    "long_too_large": list(range(10)),
    "long_negative": [0] * 9 + [-1],
    "below_start_as_array": np.array([1, 2, 3]),
    "fractional": np.array([0.5, 1.0]),
    "fractional_in_list": [1, 0.5],
    "strings": np.array(["a"]),
}


@pytest.mark.parametrize("values", BAD.values(), ids=BAD.keys())
def test_bad_values_are_refused(values):
    start = 2 if isinstance(values, np.ndarray) and values.dtype.kind == "i" else 0
    with pytest.raises(ValueError, match="one-hot"):
        window_one_hot(values, n=3, start=start, fill_left=1, fill_right=1)


@given(
    data=st.data(),
    n=st.integers(1, 6),
    start=st.integers(-3, 3),
    length=st.integers(0, 20),
    left=st.integers(0, 3),
    right=st.integers(0, 3),
    kind=st.sampled_from(["list", "int64", "int8", "float", "numpy_scalars"]),
)
def test_any_window_matches_reference(data, n, start, length, left, right, kind):
    codes = data.draw(st.lists(st.integers(start, start + n - 1), min_size=length, max_size=length))
    values = {
        "list": codes,
        "int64": np.array(codes, np.int64),
        "int8": np.array(codes, np.int8),
        "float": np.array(codes, np.float64),
        "numpy_scalars": [np.int32(c) for c in codes],
    }[kind]
    out = window_one_hot(values, n=n, start=start, fill_left=left, fill_right=right)
    np.testing.assert_array_equal(out, reference(codes, n, start, left, right))
