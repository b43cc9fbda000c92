"""Pins behaviour that hand-made mutants of the core index and read modules left untested.

Each case fails on one mutant of ``episodes.indexing``, ``episodes.buffer.reading``,
``episodes.buffer.lookback_buffer`` or ``episodes.buffer.store_bounds`` and passes on the code.
"""

from __future__ import annotations

import copy
import re

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.list_store import ListStore
from episodes.indexing import listed_indices, plan_slice


def _buffer(finalized: bool) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([10, 11, 12, 13, 14], lookback=2)
    if finalized:
        buf.finalize()
    return buf


# --- episodes.indexing -------------------------------------------------------------------------


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("index", "neg", "expected"),
    [
        pytest.param(slice(0, 0), False, [], id="stop-zero-is-ts0-not-the-end"),
        pytest.param(slice(1, 0), False, [], id="stop-zero-before-start"),
        pytest.param(slice(-3, 0), False, [], id="negative-start-stop-zero"),
        pytest.param(slice(-2, 0), True, [10, 11], id="lookback-up-to-ts0"),
        pytest.param(slice(None, 0), False, [], id="open-start-stop-zero"),
    ],
)
def test_slice_stopping_at_zero(finalized: bool, index: slice, neg: bool, expected: list) -> None:
    got = _buffer(finalized).get(index, neg_index_as_lookback=neg)
    assert list(np.asarray(got).tolist()) == expected


@pytest.mark.parametrize(
    ("slice_", "fill", "expected_stored"),
    [
        pytest.param(slice(3, 1), False, 0, id="reversed-bounds-clipped"),
        pytest.param(slice(5, -4), False, 0, id="reversed-after-negative-resolution"),
        pytest.param(slice(2, 2), False, 0, id="empty"),
    ],
)
def test_plan_never_reads_a_negative_count(slice_: slice, fill: bool, expected_stored: int) -> None:
    plan = plan_slice(slice_, lookback=2, total=7, neg_index_as_lookback=False, fill=fill)
    assert plan.stored == expected_stored
    assert plan.length == 0


@pytest.mark.parametrize(
    ("slice_", "expected"),
    [
        # Starting exactly at the end of the data: every filler lies on the right.
        pytest.param(slice(3, 5), (0, 3, 3, 2), id="from-the-end"),
        pytest.param(slice(4, 6), (0, 3, 3, 2), id="past-the-end"),
        pytest.param(slice(-6, -4), (2, 0, 0, 0), id="before-the-start"),
    ],
)
def test_plan_keeps_fillers_on_their_side(slice_: slice, expected: tuple) -> None:
    plan = plan_slice(slice_, lookback=0, total=3, neg_index_as_lookback=False, fill=True)
    assert (plan.fill_left, plan.start, plan.stop, plan.fill_right) == expected


@pytest.mark.parametrize(
    "slice_",
    [
        pytest.param(slice(0, 2**62), id="exactly-2**62-items"),
        pytest.param(slice(0, 2**63 - 1, 2), id="2**62-items-after-a-rounded-up-step"),
    ],
)
def test_plan_refuses_reads_of_2_62_items(slice_: slice) -> None:
    with pytest.raises(MemoryError, match=r"a slice of 4611686018427387904 items"):
        plan_slice(slice_, lookback=0, total=3, neg_index_as_lookback=False, fill=True)


def test_plan_takes_one_below_2_62_items() -> None:
    plan = plan_slice(slice(0, 2**62 - 1), lookback=0, total=3, neg_index_as_lookback=False,
                      fill=True)  # fmt: skip
    assert plan.length == 2**62 - 1


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_uint64_index_beyond_int64_is_out_of_range(finalized: bool) -> None:
    buf = _buffer(finalized)
    # 2**64 - 1 wraps to -1 in int64: read as "the last item" would be wrong.
    indices = np.array([2**64 - 1, 0], dtype=np.uint64)
    with pytest.raises(IndexError, match="18446744073709551615"):
        buf.get(indices)
    assert np.asarray(buf.get(indices, fill=-1)).tolist() == [-1, 12]


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_bool_index_array_is_refused(finalized: bool) -> None:
    with pytest.raises(TypeError, match="bool"):
        _buffer(finalized).get(np.array([True, False]))


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        pytest.param(8, "[0, 1, 2, 3, 4, 5, 6, 7]", id="eight-without-count"),
        pytest.param(9, "[0, 1, 2, 3, 4, 5, 6, 7, ...] (9 indices)", id="nine-with-count"),
    ],
)
def test_listed_indices_counts_only_beyond_eight(count: int, expected: str) -> None:
    assert listed_indices(range(count), [False] * count) == expected


# --- episodes.buffer.reading -------------------------------------------------------------------


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("slice_", "count"),
    [
        pytest.param(slice(0, 2**62 - 1), 2**62 - 1, id="fillers-right"),
        pytest.param(slice(-(2**62) + 1, 1), 2**62 - 3, id="fillers-left"),
    ],
)
def test_too_long_padded_read_names_every_item(finalized: bool, slice_: slice, count: int) -> None:
    # Below plan_slice's limit, so the fillers' allocation fails: the message counts the
    # fillers too, not only the 3 stored items.
    with pytest.raises(MemoryError, match=rf"^a slice of {count} items \(fillers included\)"):
        _buffer(finalized).get(slice_, fill=0)


@pytest.mark.parametrize(
    "index", [slice(0, 3), [0, 5], slice(-3, None), 7], ids=["slice", "list", "left", "int"]
)
@pytest.mark.parametrize(
    ("kind", "fill"), [("bytes", b"z\x00"), ("str", "z\x00")], ids=["bytes", "str"]
)
def test_object_column_keeps_a_nul_ending_fill_whole(
    kind: str, fill: object, index: object
) -> None:
    items = [b"x", b"y"] if kind == "bytes" else ["x", "y"]
    got = InfiniteLookbackBuffer(np.array(items, dtype=object)).get(index, fill=fill)
    filled = [got] if index == 7 else [v for v in got if v not in items]
    assert filled and all(v == fill for v in filled)


@pytest.mark.parametrize(
    "index", [slice(0, 5), [0, 9], slice(7, 9)], ids=["slice", "list", "all-fill"]
)
def test_dict_fill_cannot_pad_a_flat_numpy_column(index: object) -> None:
    buf = InfiniteLookbackBuffer(np.arange(3))
    with pytest.raises(ValueError, match=r"fill=\{'a': 0\} cannot pad this buffer's items"):
        buf.get(index, fill={"a": 0})


# --- episodes.buffer.lookback_buffer -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "lookback", "expected_lookback"),
    [
        pytest.param(np.arange(3), 5, 3, id="array-shorter-than-lookback"),
        pytest.param({"a": np.arange(2)}, 4, 2, id="dict-batch-shorter-than-lookback"),
        pytest.param(None, 2, 0, id="no-data"),
        pytest.param((np.arange(2), np.zeros(2)), 3, 2, id="tuple-batch"),
        pytest.param(np.arange(3), 2, 2, id="array-longer-than-lookback"),
    ],
)
def test_lookback_is_clamped_to_any_data(
    data: object, lookback: int, expected_lookback: int
) -> None:
    buf = InfiniteLookbackBuffer(data, lookback=lookback)
    assert buf.lookback == expected_lookback
    assert len(buf) == buf.len_incl_lookback() - expected_lookback >= 0


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("bad", ["Discrete(3)", {"n": 3}, 3], ids=["str", "dict", "int"])
def test_space_setter_refuses_non_spaces(finalized: bool, bad: object) -> None:
    buf = _buffer(finalized)
    with pytest.raises(
        TypeError, match=f"space must be a gymnasium Space or None, got {type(bad).__name__}"
    ):
        buf.space = bad  # type: ignore[assignment]
    assert buf.space is None
    assert np.asarray(buf.get()).tolist() == [12, 13, 14]


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("length", [8, -1], ids=["beyond-the-items", "negative"])
def test_truncate_names_its_length_argument(finalized: bool, length: int) -> None:
    buf = _buffer(finalized)
    with pytest.raises(IndexError, match=f"^truncate length {length} out of range for 5 stored"):
        buf.truncate(length)
    assert (buf.lookback, np.asarray(buf.get()).tolist()) == (2, [12, 13, 14])


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "index",
    [None, 0, 9, slice(0, 2), slice(None, None, -1), [0, 1]],
    ids=["all", "int", "int-out-of-range", "slice", "backwards-slice", "list"],
)
def test_one_hot_without_a_space_names_the_space(finalized: bool, index: object) -> None:
    with pytest.raises(ValueError, match="one_hot_discrete=True needs the buffer's space"):
        _buffer(finalized).get(index, one_hot_discrete=True, fill=0)


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("start", "stop", "lookback", "expected"),
    [
        pytest.param(10, 12, 0, ([], 0), id="start-beyond-the-items"),
        pytest.param(3, 1, 0, ([], 0), id="stop-before-start"),
        pytest.param(4, 1, 3, ([], 0), id="stop-before-start-with-lookback"),
        pytest.param(1, 3, 5, ([11, 12], 2), id="lookback-clamped-to-the-copy"),
        pytest.param(-3, 2, 1, ([10, 11], 1), id="negative-start-clipped"),
        pytest.param(3, 9, 1, ([13, 14], 1), id="stop-clipped"),
    ],
)
def test_copy_range_clips_like_a_slice(
    finalized: bool, start: int, stop: int, lookback: int, expected: tuple
) -> None:
    copy = _buffer(finalized).copy_range(start, stop, lookback)
    assert copy.lookback == expected[1]
    assert len(copy) == len(expected[0]) - expected[1]
    everything = copy.get(slice(-copy.lookback, None), neg_index_as_lookback=True)
    assert np.asarray(everything).tolist() == expected[0]
    assert copy.finalized is finalized


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("count", "visible", "expected"),
    [
        pytest.param(2, 5, ([13, 14], 0), id="more-visible-than-copied"),
        pytest.param(9, 2, ([10, 11, 12, 13, 14], 3), id="more-than-stored"),
        pytest.param(5, 5, ([10, 11, 12, 13, 14], 0), id="all-visible"),
        pytest.param(0, 0, ([], 0), id="nothing"),
    ],
)
def test_copy_tail_lookback_never_negative(
    finalized: bool, count: int, visible: int, expected: tuple
) -> None:
    copy = _buffer(finalized).copy_tail(count, visible)
    assert copy.lookback == expected[1]
    everything = copy.get(slice(-copy.lookback, None), neg_index_as_lookback=True)
    assert np.asarray(everything).tolist() == expected[0]


@pytest.mark.parametrize(("count", "visible"), [(2, -1), (-1, 0)], ids=["visible", "count"])
def test_copy_tail_refuses_negative_sizes(count: int, visible: int) -> None:
    with pytest.raises(ValueError, match=f"must be >= 0, got {count}, {visible}"):
        _buffer(False).copy_tail(count, visible)


@pytest.mark.parametrize(
    ("data", "fill"),
    [
        pytest.param(np.zeros((3, 2)), [0, 0], id="numpy-rows-list-fill"),
        pytest.param(np.zeros((3, 2)), (0, 0), id="numpy-rows-tuple-fill"),
        pytest.param([[0.0, 0.0]] * 3, [0, 0], id="list-rows"),
    ],
)
def test_int_read_without_a_space_returns_fill_as_given(data: object, fill: object) -> None:
    got = InfiniteLookbackBuffer(data).get(9, fill=fill)
    assert type(got) is type(fill) and got == fill


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param(lambda: InfiniteLookbackBuffer([1, 2]), lambda: _final([1, 2]), id="modes"),
        pytest.param(
            lambda: InfiniteLookbackBuffer([1], space=gym.spaces.Discrete(3)),
            lambda: InfiniteLookbackBuffer([1], space=gym.spaces.Discrete(4)),
            id="spaces",
        ),
        pytest.param(
            lambda: InfiniteLookbackBuffer([1], space=gym.spaces.Discrete(3)),
            lambda: InfiniteLookbackBuffer([1]),
            id="space-and-none",
        ),
    ],
)
def test_buffers_differing_only_in_mode_or_space_are_unequal(left, right) -> None:  # noqa: ANN001
    assert left() != right()
    assert not left() == right()


def _final(items: list) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer(items)
    buf.finalize()
    return buf


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_shallow_copy_keeps_the_space(finalized: bool) -> None:
    space = gym.spaces.Discrete(20)
    buf = InfiniteLookbackBuffer([10, 11, 12], lookback=1, space=space)
    if finalized:
        buf.finalize()
    clone = copy.copy(buf)
    assert clone.space is space
    assert clone == buf
    assert np.asarray(clone.get(0, one_hot_discrete=True)).argmax() == 11


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("flag", ["no", 1, None], ids=["str", "int", "none"])
@pytest.mark.parametrize("at", [0, slice(0, 1), [0]], ids=["int", "slice", "list"])
def test_set_refuses_a_non_bool_flag(finalized: bool, flag: object, at: object) -> None:
    buf = _buffer(finalized)
    value = 99 if at == 0 else [99]
    with pytest.raises(
        TypeError, match=f"neg_index_as_lookback must be a bool, got {type(flag).__name__}"
    ):
        buf.set(value, at_indices=at, neg_index_as_lookback=flag)  # type: ignore[arg-type]
    assert np.asarray(buf.get(slice(-2, None), neg_index_as_lookback=True)).tolist() == [
        10,
        11,
        12,
        13,
        14,
    ]


# --- episodes.buffer.store_bounds --------------------------------------------------------------

STORES = {
    "list": lambda: ListStore([1, 2, 3]),
    "array": lambda: ArrayStore.from_batch(np.array([1, 2, 3])),
}


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("size", [4, -1], ids=["beyond", "negative"])
def test_store_truncate_says_the_valid_sizes(kind: str, size: int) -> None:
    store = STORES[kind]()
    message = f"truncate size {size} out of range for 3 stored items (0 <= size <= 3)"
    with pytest.raises(IndexError, match=re.escape(message)):
        store.truncate(size)
    assert [int(x) for x in store.data] == [1, 2, 3]
