"""Backward slices with fill whose bounds or step lie beyond int64, against Python's ``range``.

Such a slice is all fillers but for at most a few stored items; its positions are worked out in
Python ints, a path no other test reaches (a mutation test left it unpinned).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, indexing

BIG = 10**20

# (start, stop, step, total): every case has a bound or the step beyond int64.
CASES = {
    "all-right-fillers": (BIG, 2, -(10**19), 5),
    "right-then-one-inside-then-left": (BIG, -BIG, -(10**19), 5),
    "one-step-to-the-end": (BIG, -3, -(BIG - 2), 5),
    "one-inside-by-a-huge-step": (BIG, -BIG, -(BIG - 3), 5),
    "two-inside": (2**63 + 3, -(2**63) - 7, -(2**63 // 3), 7),
    "start-inside-stop-far-left": (4, -BIG, -3 * 10**19, 6),
    "last-item-then-left": (10**19 + 4, -(10**19), -(10**19), 6),
    "lands-on-zero": (3 * 10**19, -4 * 10**19, -(10**19), 4),
    "start-on-the-end": (BIG + 7, -BIG, -(BIG // 10 * 10 - 3), 7),
    "whole-run-inside": (BIG, -BIG, -(BIG - 6), 5),
}


def _reference(start: int, stop: int, step: int, total: int, lookback: int) -> list[int]:
    kw = dict(lookback=lookback, total=total, neg_index_as_lookback=True)
    first = indexing.resolve_int(start, **kw)
    end = indexing.resolve_int(stop, **kw)
    return [-1 if p < 0 else total if p >= total else p for p in range(first, end, step)]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("lookback", [0, 2])
def test_filled_backward_positions_beyond_int64_are_pythons_range(case, lookback):
    start, stop, step, total = case
    got = indexing.slice_positions(
        slice(start, stop, step),
        lookback=lookback,
        total=total,
        neg_index_as_lookback=True,
        fill=True,
    )
    assert got.dtype == np.int64
    assert got.tolist() == _reference(start, stop, step, total, lookback)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_buffer_reads_them_as_fillers_around_its_items(case):
    start, stop, step, total = case
    buf = InfiniteLookbackBuffer(list(range(10, 10 + total)), lookback=0)
    want = [-5 if p in (-1, total) else 10 + p for p in _reference(start, stop, step, total, 0)]
    got = buf.get(slice(start, stop, step), fill=-5, neg_index_as_lookback=True)
    assert got == want
