"""Tiny float64 values written into a float32 column under ``np.seterr(under="raise")``.

Numpy rounds them to 0 by default; a batched write raised numpy's bare ``FloatingPointError``
when the user's error state made underflow an error (overflow is the one a column refuses).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer

WRITES = {
    "extend-array": lambda b: b.extend(np.array([1e-50, 2.0])),
    "extend-list": lambda b: b.extend([1e-50, 2.0]),
    "set-slice": lambda b: b.set(np.array([1e-50, 2.0]), at_indices=slice(0, 2)),
    "set-list": lambda b: b.set(np.array([1e-50, 2.0]), at_indices=[0, 1]),
    "set-int": lambda b: b.set(np.float64(1e-50), at_indices=0),
    "append": lambda b: b.append(1e-50),
}


def _buffer() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer(np.ones(3, np.float32), lookback=0)
    assert buf.finalized
    return buf


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_tiny_value_rounds_to_zero_as_by_numpys_default(write):
    want = _buffer()
    write(want)
    got = _buffer()
    with np.errstate(all="raise"):
        write(got)
    assert got.get().dtype == np.float32
    assert np.array_equal(got.get(), want.get())
    assert 0.0 in got.get().tolist()


@pytest.mark.parametrize(
    "write",
    [WRITES["extend-array"], lambda b: b.set(np.array([1e40, 2.0]), at_indices=slice(0, 2))],
    ids=["extend", "set-slice"],
)
def test_overflow_is_still_refused_and_the_buffer_unchanged(write):
    buf = _buffer()
    big = (lambda b: b.extend(np.array([1e40, 2.0]))) if write is WRITES["extend-array"] else write
    with np.errstate(all="raise"), pytest.raises(ValueError, match="float32"):
        big(buf)
    assert buf.get().tolist() == [1.0, 1.0, 1.0]
