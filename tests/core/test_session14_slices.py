"""Slices whose bounds lie beyond int64, with any step: clipped as Python does, or filled.

Negative-step bounds beyond int64 reached ``np.arange`` as they were: numpy refused them
("Maximum allowed size exceeded") or wrapped ``2**63 + k`` round to an empty range.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes.buffer import InfiniteLookbackBuffer

DATA = [10, 11, 12, 13]
FILL = -1
HUGE = [10**19, 10**30, 2**63 - 2, 2**63 + 1, 2**64]


def _numpy_buffer() -> InfiniteLookbackBuffer:
    buffer = InfiniteLookbackBuffer(list(DATA), lookback=0)
    buffer.finalize()
    return buffer


def _filled(sl: slice) -> list[int]:
    """The reference with fill: every position the slice names, data where there is some."""
    start = len(DATA) - 1 if sl.start is None and (sl.step or 1) < 0 else sl.start
    start = 0 if start is None else start
    stop = sl.stop if sl.stop is not None else (-1 if (sl.step or 1) < 0 else len(DATA))
    if start < 0 or stop < -1:
        pytest.skip("negative bounds count from the end; the table covers them")
    out, position, step = [], start, sl.step or 1
    while (position < stop) if step > 0 else (position > stop):
        out.append(DATA[position] if 0 <= position < len(DATA) else FILL)
        position += step
    return out


CLIPPED = {
    "stop far right, backwards": slice(None, 10**19, -1),
    "stop beyond 2**100, backwards": slice(None, 10**30, -1),
    "start far left, backwards": slice(-(10**19), None, -1),
    "start far right, backwards": slice(10**30, None, -1),
    "stop far left, backwards": slice(None, -(10**30), -1),
    "both far right, forwards": slice(10**30, 10**30 + 3),
    "start far left, forwards": slice(-(10**30), 2),
}


@pytest.mark.parametrize("sl", CLIPPED.values(), ids=CLIPPED.keys())
def test_without_fill_huge_bounds_clip_as_python_slices(sl):
    buffer = InfiniteLookbackBuffer(list(DATA), lookback=0)
    assert buffer.get(sl) == DATA[sl]
    assert _numpy_buffer().get(sl).tolist() == DATA[sl]


FILLED = {
    "three fillers far right, backwards": slice(10**30 + 3, 10**30, -1),
    "across 2**63, backwards": slice(2**63 + 1, 2**63 - 2, -1),
    "from the right fillers into the data": slice(6, 0, -1),
    "stride 2 from the right": slice(7, 0, -2),
    "three fillers far right, forwards": slice(10**30, 10**30 + 3),
}


@pytest.mark.parametrize("sl", FILLED.values(), ids=FILLED.keys())
def test_with_fill_far_windows_are_fillers(sl):
    buffer = InfiniteLookbackBuffer(list(DATA), lookback=0)
    expected = _filled(sl)
    assert buffer.get(sl, fill=FILL) == expected
    assert _numpy_buffer().get(sl, fill=FILL).tolist() == expected


@pytest.mark.parametrize(
    "sl", [slice(2**63 + 10, 0, -1), slice(0, 10**30)], ids=["backwards", "forwards"]
)
def test_a_filled_read_no_array_holds_is_a_memory_error(sl):
    buffer = InfiniteLookbackBuffer(list(DATA), lookback=0)
    with pytest.raises(MemoryError, match="cannot be read"):
        buffer.get(sl, fill=FILL)


def test_setting_an_empty_huge_backwards_slice_is_a_no_op():
    buffer = _numpy_buffer()
    buffer.set(np.array([], dtype=np.int64), at_indices=slice(None, 10**19, -1))
    assert buffer.get().tolist() == DATA


bound = st.one_of(
    st.none(), st.sampled_from(HUGE), st.integers(-8, 8), st.sampled_from(HUGE).map(lambda x: -x)
)


@given(start=bound, stop=bound, step=st.sampled_from([-3, -2, -1, 1, 2, 3]))
def test_without_fill_any_bounds_read_as_a_python_slice(start, stop, step):
    sl = slice(start, stop, step)
    buffer = InfiniteLookbackBuffer(list(DATA), lookback=0)
    assert buffer.get(sl) == DATA[sl]
