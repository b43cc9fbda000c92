"""Padded reads of int columns keep ints float64 would round as the item-by-item read does.

A space-less uint64 column padded with ``fill=0`` (an int64 filler), or an int64 column padded
with ``fill=2**63`` (a uint64 one), joins as float64 in numpy, rounding ``2**63 + 1``. The
item-by-item read (each stored item and filler stacked with ``batch``) keeps such ints exact as
uint64, and refuses a fill that would make the column's ints objects. The index-list fast path
(``_filled_gather``, whose docstring promises the item-by-item result) and slice reads joined
the parts and rounded; they now give that read's result, for every read form.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer
from episodes.buffer import reading

BIG = 2**63 + 1


def _outcome(fn: Any) -> Any:
    try:
        out = fn()
    except (ValueError, TypeError, IndexError) as err:
        return type(err).__name__, str(err)
    if isinstance(out, dict):
        return {key: (leaf.dtype, leaf.tolist()) for key, leaf in out.items()}
    return out.dtype, out.tolist()


def _read(buffer: InfiniteLookbackBuffer, read: Any, fill: Any) -> Any:
    return _outcome(lambda: buffer.get(read, fill=fill, neg_index_as_lookback=True))


def _item_by_item(buffer: InfiniteLookbackBuffer, indices: list[int], fill: Any) -> Any:
    """The reference: the read of ``indices`` with every item stacked one by one."""
    with mock.patch.object(reading, "_filled_gather", return_value=None):
        return _read(buffer, indices, fill)


def _slice_indices(read: slice) -> list[int]:
    # With neg_index_as_lookback and no lookback, index i is position i (fillers outside).
    start, stop, step = read.start, read.stop, read.step or 1
    return list(range(start, stop, step))


COLUMNS = [
    (np.array([1, BIG], np.uint64), 0),
    (np.array([1, 2], np.int64), 2**63),
    (np.array([-1, 2], np.int64), 2**63),  # the fill does not stack exactly: refused
    (np.array([1, 2], np.int64), np.uint64(2**63)),
    (np.array([1, BIG], np.uint64), -1),  # refused too
    (np.array([[1, BIG]], np.uint64), [0, 0]),
    (np.array([1, 2], np.uint64), -1),  # small: float64, as numpy stacks them
    (np.array([1, 2**53 + 1], np.int64), 0.5),  # a float fill: floats
]
INDEX_READS = [[0, 1, 5], [5, 0], [0, 5, 1], [-1, 0, 1, 3], [5], [0, 1], [1, 1, 7, 0]]
SLICE_READS = [slice(0, 4), slice(-2, 2), slice(-1, 3), slice(-3, 4, 2), slice(4, -3, -1)]


@pytest.mark.parametrize(("data", "fill"), COLUMNS)
def test_index_reads_give_the_item_by_item_result(data: np.ndarray, fill: Any) -> None:
    buffer = InfiniteLookbackBuffer(data)
    for indices in INDEX_READS:
        assert _read(buffer, indices, fill) == _item_by_item(buffer, indices, fill), indices


@pytest.mark.parametrize(("data", "fill"), COLUMNS)
def test_slice_reads_give_the_item_by_item_result(data: np.ndarray, fill: Any) -> None:
    buffer = InfiniteLookbackBuffer(data)
    for read in SLICE_READS:
        indices = _slice_indices(read)
        assert _read(buffer, read, fill) == _item_by_item(buffer, indices, fill), read


def test_the_reported_reads() -> None:
    column = InfiniteLookbackBuffer(np.array([1, BIG], np.uint64))
    for read in ([0, 1, 5], slice(0, 3)):
        out = column.get(read, fill=0)
        assert out.dtype == np.uint64 and out.tolist() == [1, BIG, 0]
    small = InfiniteLookbackBuffer(np.array([1, 2], np.int64))
    for read in ([0, 1, 5], slice(0, 3)):
        out = small.get(read, fill=2**63)
        assert out.dtype == np.uint64 and out.tolist() == [1, 2, 2**63]
    signed = InfiniteLookbackBuffer(np.array([-1, 2], np.int64))
    for read in ([0, 1, 5], slice(0, 3)):
        with pytest.raises(ValueError, match="cannot pad"):
            signed.get(read, fill=2**63)


def test_a_dict_column_keeps_its_int_leaf_exact() -> None:
    buffer = InfiniteLookbackBuffer({"a": np.array([1, BIG], np.uint64), "b": np.zeros(2)})
    fill = {"a": 0, "b": 0.0}
    for read in ([0, 1, 5], slice(0, 3)):
        assert _read(buffer, read, fill) == _item_by_item(buffer, [0, 1, 5], fill)
        assert buffer.get(read, fill=fill)["a"].tolist() == [1, BIG, 0]


_INTS = st.sampled_from([0, 1, -1, 2**52, 2**53 + 1, 2**62, 2**63 - 1, 2**63, BIG, 2**64 - 1])
_FILLS = st.sampled_from(
    [0, -1, 1, 2**53 + 1, 2**63, BIG, -(2**63), 0.5, np.uint64(2**63), np.int64(-1), np.int8(3)]
)


@settings(max_examples=300, deadline=None)
@given(
    dtype=st.sampled_from([np.int64, np.uint64, np.int8, np.uint8]),
    values=st.lists(_INTS, min_size=1, max_size=5),
    fill=_FILLS,
    indices=st.lists(st.integers(-3, 8), max_size=6),
    bounds=st.tuples(st.integers(-3, 8), st.integers(-3, 8), st.sampled_from([1, 2, -1, -2])),
)
def test_every_read_form_agrees_with_the_item_by_item_read(
    dtype: Any, values: list[int], fill: Any, indices: list[int], bounds: tuple[int, int, int]
) -> None:
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    data = np.array([min(max(v, info.min), info.max) for v in values], dtype)
    buffer = InfiniteLookbackBuffer(data)
    if indices:
        assert _read(buffer, indices, fill) == _item_by_item(buffer, indices, fill)
    read = slice(*bounds)
    slice_indices = _slice_indices(read)
    if slice_indices:
        assert _read(buffer, read, fill) == _item_by_item(buffer, slice_indices, fill)
