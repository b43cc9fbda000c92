"""Session 16 fixes in filled and one-hot reads.

Each test failed before its fix:

* a numpy'd column without a space, padded with a ``fill`` shaped like one item (contract §3.5):
  slices refused a dict or tuple fill that index lists took, an all-filler slice came back as
  an object array of dicts (or one float64 array of a tuple's leaves), and an all-filler index
  list of a column of rows padded with a list fill came back as a list of leaf arrays: every
  read form now stacks the fill leaf by leaf, nested like the column's reads;
* a filled slice just under ``2**62`` items raised a fill error (numpy'd), a bare
  ``MemoryError`` (list mode) or numpy's raw "array is too big" (one-hot), where a longer one
  gives the documented ``MemoryError`` (contract §3.2);
* a one-hot slice of a Discrete column holding items that are no single value (an array
  ``[1]``, outside the space) set wrong slots (each row got every row's slots), where an int
  or an index list encodes each item as ``one_hot`` does (contract §3.6).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.buffer.discrete_window import window_one_hot
from episodes.spaces import batch, filler_batch

# ------------------------------------------------------------ fills shaped like one item


def _dicts() -> list[Any]:
    return [{"h": np.full(2, t, np.float32), "c": np.int64(t)} for t in range(3)]


def _tuples() -> list[Any]:
    return [(np.float32(t), np.int64(t)) for t in range(3)]


def _rows() -> list[Any]:
    return [np.full(2, t, np.float32) for t in range(3)]


def _strings() -> list[Any]:
    return [{"s": "ab"[: t + 1], "v": np.int64(t)} for t in range(3)]


# name: (items, fill, the fill as one item of the column)
FILLS = {
    "dict_item_fill": (
        _dicts,
        {"h": np.zeros(2, np.float32), "c": np.int64(0)},
        {"h": np.zeros(2, np.float32), "c": np.int64(0)},
    ),
    "dict_python_numbers": (
        _dicts,
        {"c": -1, "h": [0.5, 0.5]},  # other key order; float64 leaves
        {"h": np.full(2, 0.5), "c": -1},
    ),
    "tuple_item_fill": (
        _tuples,
        (np.float32(0), np.int64(0)),
        (np.float32(0), np.int64(0)),
    ),
    "rows_list_fill": (_rows, [7.0, 7.0], np.full(2, 7.0)),
    "rows_array_fill": (_rows, np.full(2, 7, np.float32), np.full(2, 7, np.float32)),
    "dict_with_longer_string": (_strings, {"s": "longer", "v": 0}, {"s": "longer", "v": 0}),
}

# name: (index, neg_index_as_lookback); the buffers hold 3 items, lookback 1
READS = {
    "list_mixed": ([0, 5], False),
    "list_filler_first": ([5, 0], False),
    "list_one_filler": ([5], False),
    "list_fillers_only": ([5, 6], False),
    "slice_padded_right": (slice(0, 4), False),
    "slice_padded_left": (slice(-3, 1), True),
    "slice_padded_both": (slice(-3, 4), True),
    "slice_fillers_only": (slice(5, 7), False),
    "slice_fillers_only_left": (slice(-5, -3), True),
    "slice_stepped": (slice(-3, 5, 2), True),
    "negative_step": (slice(4, -1, -1), False),
}


def _assert_same_batch(got: Any, want: Any, path: str = "") -> None:
    assert type(got) is type(want), (path, type(got), type(want))
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for key in want:
            _assert_same_batch(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same_batch(g, w, f"{path}/{i}")
    else:
        assert got.dtype == want.dtype and got.shape == want.shape, (path, got, want)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("case", list(FILLS), ids=list(FILLS))
def test_a_fill_shaped_like_one_item_pads_every_read_form_alike(case: str, read: str) -> None:
    """A numpy'd read equals stacking its items one by one, the fill taken as one item."""
    make, fill, as_item = FILLS[case]
    index, neg = READS[read]
    listed = InfiniteLookbackBuffer(make(), lookback=1)
    items = listed.get(index, fill=fill, neg_index_as_lookback=neg)
    want = batch([as_item if item is fill else item for item in items])
    numpy = InfiniteLookbackBuffer(make(), lookback=1)
    numpy.finalize()
    got = numpy.get(index, fill=fill, neg_index_as_lookback=neg)
    _assert_same_batch(got, want)


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_an_item_fill_keeps_the_columns_layout(read: str) -> None:
    """A fill with the items' dtypes reads as the stored items do: same nesting and dtypes."""
    index, neg = READS[read]
    buf = InfiniteLookbackBuffer(_dicts(), lookback=1)
    buf.finalize()
    stored = buf.get(slice(0, 2))
    got = buf.get(
        index, fill={"h": np.zeros(2, np.float32), "c": np.int64(0)}, neg_index_as_lookback=neg
    )
    assert type(got) is dict and list(got) == list(stored)
    for key in stored:
        assert got[key].dtype == stored[key].dtype and got[key].shape[1:] == stored[key].shape[1:]


# name: (items, fill that does not stack with them)
MISFITS = {
    "dict_leaf_of_another_shape": (_dicts, {"h": 0.0, "c": 0}),
    "row_of_another_length": (_rows, [0.0, 0.0, 0.0]),
    "tuple_leaf_of_another_shape": (_tuples, (np.zeros(2), 0)),
}


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("case", list(MISFITS), ids=list(MISFITS))
def test_a_fill_not_shaped_like_an_item_is_refused_by_every_read_form(case: str, read: str) -> None:
    make, fill = MISFITS[case]
    index, neg = READS[read]
    buf = InfiniteLookbackBuffer(make(), lookback=1)
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match=r"cannot pad this buffer's items.*shaped like one item"):
        buf.get(index, fill=fill, neg_index_as_lookback=neg)
    assert buf == before


def test_filler_batch_without_a_space_stacks_a_nested_fill_leaf_by_leaf() -> None:
    fill = {"h": np.zeros(2, np.float32), "c": (np.int64(1), 0.5)}
    got = filler_batch(None, fill, 3)
    _assert_same_batch(got, batch([fill] * 3))
    assert got["h"].shape == (3, 2) and got["c"][0].dtype == np.int64


# ------------------------------------------------------------------------ too long to fill

BIG = 2**61  # under the 2**62 every mode refuses up front, over what an array of int64 holds


def _a_dicts() -> list[Any]:
    return [{"a": np.full(2, 0.5, np.float32)} for _ in range(3)]


# name: (items, space, fill, one_hot)
TOO_LONG = {
    "discrete": (lambda: [0, 1, 2], gym.spaces.Discrete(3), 0, False),
    "discrete_one_hot": (lambda: [0, 1, 2], gym.spaces.Discrete(3), 0, True),
    "multi_discrete_one_hot": (
        lambda: [np.array([0, 1])] * 3,
        gym.spaces.MultiDiscrete([2, 2]),
        0,
        True,
    ),
    "no_space": (lambda: [0, 1, 2], None, 0, False),
    "dict_space": (_a_dicts, gym.spaces.Dict({"a": gym.spaces.Box(0, 1, (2,))}), 0.0, False),
    "no_space_dict_fill": (_a_dicts, None, {"a": np.zeros(2, np.float32)}, False),
}


@pytest.mark.parametrize(
    "window",
    [slice(-BIG, 0), slice(0, -BIG, -1), slice(BIG, 0, -1)],
    ids=["forward", "backward_into_lookback", "backward_from_beyond"],
)
@pytest.mark.parametrize("case", list(TOO_LONG), ids=list(TOO_LONG))
@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_a_filled_slice_too_long_for_memory_is_the_documented_memory_error(
    case: str, finalized: bool, window: slice
) -> None:
    make, space, fill, one_hot = TOO_LONG[case]
    buf = InfiniteLookbackBuffer(make(), lookback=1, space=space)
    if finalized:
        buf.finalize()
    with pytest.raises(
        MemoryError, match=r"a slice of \d+ items \(fillers included\) cannot be read"
    ):
        buf.get(window, fill=fill, one_hot_discrete=one_hot)
    assert len(buf) == 2


def test_filler_batch_and_window_one_hot_say_memory_not_fill() -> None:
    with pytest.raises(MemoryError):
        filler_batch(gym.spaces.Discrete(3), 0, BIG)
    with pytest.raises(MemoryError):
        filler_batch(gym.spaces.Discrete(3), 0, BIG, one_hot_discrete=True)
    with pytest.raises(MemoryError):
        filler_batch(None, 0, BIG)
    with pytest.raises(MemoryError):
        window_one_hot([1], n=3, start=0, fill_left=BIG, fill_right=0)


# ----------------------------------------------------------- one-hot of items that are arrays


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_one_hot_of_array_items_agrees_across_read_forms(finalized: bool) -> None:
    """Each item encodes as a read of it alone does: (1, 3) per item, the right slots."""
    buf = InfiniteLookbackBuffer(
        [np.array([0]), np.array([2]), np.array([1])], space=gym.spaces.Discrete(3)
    )
    if finalized:
        buf.finalize()
    alone = [np.asarray(buf.get(i, one_hot_discrete=True)) for i in range(3)]
    assert [a.tolist() for a in alone] == [[[1, 0, 0]], [[0, 0, 1]], [[0, 1, 0]]]
    for index in (slice(0, 3), [0, 1, 2], slice(None, None, -1)):
        got = buf.get(index, one_hot_discrete=True)
        rows = list(got) if finalized else got
        order = [2, 1, 0] if isinstance(index, slice) and index.step == -1 else [0, 1, 2]
        assert len(rows) == 3
        for row, i in zip(rows, order):
            assert row.shape == (1, 3) and row.dtype == np.float32
            np.testing.assert_array_equal(row, alone[i])


def test_window_one_hot_leaves_items_that_are_no_single_value_to_the_caller() -> None:
    assert window_one_hot(np.array([[1], [0]]), n=2, start=0, fill_left=0, fill_right=0) is None
    assert window_one_hot([np.array([1])] * 9, n=2, start=0, fill_left=1, fill_right=0) is None
    flat = window_one_hot(np.array([1, 0]), n=2, start=0, fill_left=1, fill_right=0)
    assert flat is not None and flat.tolist() == [[0, 0], [0, 1], [1, 0]]


def _object_column() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([0, None, 1.0, "a"], lookback=1)
    buf.finalize()
    return buf


def _row_column() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([np.zeros(2), np.ones(2), np.ones(2)], lookback=1)
    buf.finalize()
    return buf


# name: (buffer, fill, read, expected list or the refusal)
FLAT_COLUMN_FILLS = {
    "object_dict_mixed": (
        _object_column,
        {"h": 0.0},
        slice(1, 5),
        [1.0, "a", {"h": 0.0}, {"h": 0.0}],
    ),
    "object_dict_fillers_only": (_object_column, {"h": 0.0}, slice(5, 7), [{"h": 0.0}] * 2),
    "object_list_fillers_only": (_object_column, [0, 0], slice(5, 7), [[0, 0]] * 2),
    "rows_dict_mixed": (_row_column, {"h": 0.0}, slice(0, 4), ValueError),
    "rows_dict_fillers_only": (_row_column, {"h": 0.0}, slice(5, 7), ValueError),
    "rows_dict_index_list": (_row_column, {"h": 0.0}, [5], ValueError),
    "rows_ragged_list_index_list": (_row_column, [0.0, [0.0, 0.0]], [0, 5], ValueError),
    "rows_ragged_list_slice": (_row_column, [0.0, [0.0, 0.0]], slice(0, 4), ValueError),
    "rows_ragged_tuple_fillers_only": (
        _row_column,
        (np.array([1]), np.zeros((2, 2))),
        slice(5, 7),
        ValueError,
    ),
}


@pytest.mark.parametrize("case", list(FLAT_COLUMN_FILLS))
def test_fills_of_flat_spaceless_columns(case: str) -> None:
    # An object column's filler is the fill itself (never split into leaves); a row column
    # refuses a dict or a ragged fill with the fill's own ValueError in every read form.
    make, fill, read, expected = FLAT_COLUMN_FILLS[case]
    buf = make()
    if expected is ValueError:
        with pytest.raises(ValueError, match="cannot pad this buffer's items"):
            buf.get(read, fill=fill)
        return
    got = buf.get(read, fill=fill)
    assert isinstance(got, np.ndarray) and got.dtype == object
    assert got.tolist() == expected
