"""``copy_range``/``copy_tail`` take numpy ints as ints and refuse bools (an ints hunt).

numpy scalar arithmetic overflowed (``np.int8(1)`` beside 300), a ``np.uint64`` lookback was
stored as it was and broke later reads, and ``True`` was taken as a count.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer


def _buffer():
    return InfiniteLookbackBuffer(list(range(10)), lookback=2)


@pytest.mark.parametrize(
    "args",
    [(np.int8(1), 300, 5), (0, 300, np.uint64(5)), (np.int64(2), np.uint8(8), np.int16(1))],
)
def test_copy_range_takes_numpy_ints_as_ints(args):
    plain = _buffer().copy_range(*(int(a) for a in args))
    copied = _buffer().copy_range(*args)
    assert copied == plain and type(copied.lookback) is int
    assert copied.get(-1, neg_index_as_lookback=True) == plain.get(-1, neg_index_as_lookback=True)


def test_copy_tail_takes_numpy_ints_as_ints():
    assert _buffer().copy_tail(np.uint8(200), np.uint8(3)) == _buffer().copy_tail(200, 3)


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.copy_tail(True, 1),
        lambda b: b.copy_range(True, 3, 1),
        lambda b: b.copy_range(0, 3, False),
    ],
)
def test_bools_are_refused(call):
    with pytest.raises(TypeError, match="must be an int, got bool"):
        call(_buffer())
