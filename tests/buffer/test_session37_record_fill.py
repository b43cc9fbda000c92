"""A padded index-list read of a record (structured) column: refused as a slice's read is."""

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

RECORD = np.dtype([("a", "<f4"), ("b", "<i4")])


def _buffer():
    data = np.zeros(4, RECORD)
    data["a"], data["b"] = [1, 2, 3, 4], [5, 6, 7, 8]
    return InfiniteLookbackBuffer(data, lookback=1)


@pytest.mark.parametrize(
    "indices",
    [[0, 5], [5, 0], [-1, 3, 0], slice(0, 5)],
    ids=["item then pad", "pad then item", "three", "slice"],
)
def test_a_number_fill_cannot_pad_records(indices):
    buffer = _buffer()
    with pytest.raises(ValueError, match="fill=0 cannot pad this buffer's items"):
        buffer.get(indices, fill=0)


@pytest.mark.parametrize(
    ("indices", "expected_a"),
    [([0, 5], [2, 0]), ([5, 0], [0, 2]), (slice(0, 5), [2, 3, 4, 0, 0])],
    ids=["list", "reversed", "slice"],
)
def test_a_record_fill_pads_records(indices, expected_a):
    got = _buffer().get(indices, fill=np.zeros((), RECORD))
    assert got.dtype == RECORD
    np.testing.assert_array_equal(got["a"], expected_a)
