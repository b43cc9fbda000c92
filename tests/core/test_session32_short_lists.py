"""Short index lists resolve and read in Python; a contiguous list write is one slice assignment.

A getter or setter given a few indices used to spend its time in numpy (an array built, masks,
``any``/``all`` reductions) where RLlib's loop over a few ints costs a microsecond. Lists of
fewer than 32 Python ints now resolve in Python ints (``indexing.resolve_list``,
``indexing.set_positions``), a list store reads a few positions with one list comprehension
(``reading.read_positions``), and a list store writes a step-1 range of positions with one
slice assignment (``ListStore.set``). The properties here check every fast path against the
path it bypasses: the same index list made longer than the threshold (padded with valid
indices) or given as an array, with ints in and out of range, beyond int64, negative, with and
without ``neg_index_as_lookback`` and ``fill``, in list and numpy mode: same results, same
exception types and messages.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, indexing
from episodes.buffer import reading
from episodes.buffer.list_store import ListStore

PAD = 40  # more than the short-list threshold: the padded list takes the numpy path
SPACES: dict[str, gym.Space[Any] | None] = {
    "none": None,
    "discrete": gym.spaces.Discrete(20),
    "box": gym.spaces.Box(-50.0, 50.0, (2,), np.float32),
}

small = st.integers(-12, 12)
huge = st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30, -(10**30)])
index_lists = st.lists(st.one_of(small, small, small, huge), max_size=31)
layouts = st.tuples(st.integers(1, 8), st.integers(0, 3))  # (items after the lookback, lookback)


def _outcome(call: Any) -> tuple[Any, ...]:
    try:
        return ("ok", _plain(call()))
    except Exception as error:  # noqa: BLE001 - the exception itself is what is compared
        return ("error", type(error), str(error))


def _plain(value: Any) -> Any:
    """``value`` with arrays as (dtype, shape, values): equal exactly when the reads are."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, list):
        return ("list", [_plain(item) for item in value])
    return (type(value).__name__, value)


def _head(value: Any, count: int) -> Any:
    """The first ``count`` items of a read (a list or an array)."""
    return value[:count]


def _buffer(space_name: str, layout: tuple[int, int], numpy: bool) -> InfiniteLookbackBuffer:
    count, lookback = layout
    space = SPACES[space_name]
    if space_name == "box":
        data: list[Any] = [np.full(2, k, np.float32) for k in range(count + lookback)]
    else:
        data = list(range(count + lookback))
    buf = InfiniteLookbackBuffer(data, lookback=lookback, space=space)
    if numpy:
        buf.finalize()
    return buf


@settings(max_examples=300, deadline=None)
@given(index_lists, layouts, st.booleans())
def test_short_lists_resolve_as_the_long_path(indices, layout, neg):
    count, lookback = layout
    kw = dict(lookback=lookback, total=count + lookback, neg_index_as_lookback=neg)
    short = indexing.resolve_list(indices, **kw)
    long = indexing.resolve_list(indices + [0] * PAD, **kw)
    assert short.dtype == np.int64
    assert short.tolist() == long[: len(indices)].tolist()
    as_tuple = indexing.resolve_list(tuple(indices), **kw)
    assert as_tuple.tolist() == short.tolist()


@settings(max_examples=300, deadline=None)
@given(index_lists, layouts, st.booleans())
def test_short_lists_set_positions_as_the_long_path(indices, layout, neg):
    count, lookback = layout
    kw = dict(lookback=lookback, total=count + lookback, neg_index_as_lookback=neg)
    short = _outcome(lambda: indexing.set_positions(indices, **kw))
    # The padding (index 0) is in range: the long path names the same bad indices.
    long = _outcome(lambda: indexing.set_positions(indices + [0] * PAD, **kw)[: len(indices)])
    assert short == long


@settings(max_examples=300, deadline=None)
@given(
    index_lists,
    layouts,
    st.booleans(),
    st.sampled_from([None, -1, 7]),
    st.booleans(),
    st.sampled_from(sorted(SPACES)),
    st.booleans(),
)
def test_short_list_reads_are_the_long_path_reads(
    indices, layout, neg, fill, numpy, space_name, one_hot
):
    buf = _buffer(space_name, layout, numpy)
    one_hot = one_hot and space_name == "discrete"
    kw = dict(neg_index_as_lookback=neg, fill=fill, one_hot_discrete=one_hot)
    short = _outcome(lambda: buf.get(indices, **kw))
    padded = indices + [0] * PAD
    long = _outcome(lambda: _head(buf.get(padded, **kw), len(indices)))
    assert short == long


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    ("indices", "neg", "fill", "want"),
    [
        ([0, 1, -1], False, None, [2, 3, 7]),
        ([-1], False, None, [7]),
        ([-1], True, None, [1]),
        ([-3, 6, 0], True, -1, [-1, -1, 2]),
        ([2**63, -(2**63) - 1, 5], False, 9, [9, 9, 7]),
        ([], False, None, []),
        ((4, 0), False, None, [6, 2]),
    ],
)
def test_short_list_reads_table(indices, neg, fill, want, numpy):
    buf = _buffer("none", (6, 2), numpy)
    got = buf.get(indices, neg_index_as_lookback=neg, fill=fill)
    assert (got.tolist() if numpy else got) == want


@pytest.mark.parametrize(
    ("indices", "error", "message"),
    [
        ([0, 6, -9], IndexError, r"indices \[6, -9\] are out of range"),
        ([2**64], IndexError, r"indices \[18446744073709551616\] are out of range"),
        ([0, True], TypeError, "index must be an int, got bool"),
        ([0, 1.0], TypeError, "index must be an int, got float"),
    ],
)
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_short_list_read_errors_table(indices, error, message, numpy):
    with pytest.raises(error, match=message):
        _buffer("none", (6, 2), numpy).get(indices)


def test_short_lists_never_reach_the_numpy_resolution(monkeypatch):
    def refuse(*args: Any) -> Any:
        raise AssertionError("numpy resolution used for a short list")

    monkeypatch.setattr(indexing, "_resolve_array", refuse)
    monkeypatch.setattr(indexing, "_int_array", refuse)
    kw = dict(lookback=1, total=5, neg_index_as_lookback=False)
    assert indexing.resolve_list([0, -1, 9], **kw).tolist() == [1, 4, 10]
    monkeypatch.setattr(indexing, "resolve_list", refuse)
    assert indexing.set_positions([0, 1, -1], **kw) == [1, 2, 4]
    with pytest.raises(IndexError, match=r"cannot set at indices \[4\]"):
        indexing.set_positions([0, 4], **kw)


def test_one_int_set_position_skips_the_general_path(monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("resolve_int called for a plain int")

    monkeypatch.setattr(indexing, "resolve_int", refuse)
    kw = dict(lookback=1, total=5, neg_index_as_lookback=False)
    assert [indexing.set_positions(i, **kw) for i in (0, 3, -1, -4)] == [1, 4, 4, 1]
    assert indexing.set_positions(-1, lookback=1, total=5, neg_index_as_lookback=True) == 0


class _GatherRefused(ListStore):
    __slots__ = ()

    def gather(self, positions: np.ndarray) -> list[Any]:
        raise AssertionError("a short in-range read of a list store gathers in place")


def test_a_list_store_reads_a_few_positions_in_place():
    store = _GatherRefused(list("abcdef"))
    got = reading.read_positions(store, None, np.array([5, 0, 5]), None, False, 0)
    assert got == ["f", "a", "f"]


class _Recording(list):  # type: ignore[type-arg]
    """A list that records the keys it is assigned at."""

    def __init__(self, items: Any) -> None:
        super().__init__(items)
        self.keys: list[Any] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        self.keys.append(key)
        super().__setitem__(key, value)


@pytest.mark.parametrize(
    ("positions", "keys"),
    [
        (range(1, 4), [slice(1, 4, 1)]),
        (range(0, 6, 2), [slice(0, 6, 2)]),
        (range(3, 3), [slice(3, 3, 1)]),
        ([1, 2, 3], [1, 2, 3]),  # a list of positions: one write each
    ],
)
def test_a_range_write_is_one_slice_assignment(positions, keys):
    data = _Recording(range(6))
    ListStore(data).set(positions, [f"x{p}" for p in positions])
    assert data.keys == keys
    assert list(data) == [f"x{p}" if p in positions else p for p in range(6)]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-3, 9),
    st.integers(-3, 12),
    st.integers(1, 3),
    st.integers(0, 8),
    st.integers(0, 8),
)
def test_range_writes_are_the_position_by_position_writes(start, stop, step, size, extra):
    positions = range(start, stop, step)
    items = [f"new{k}" for k in range(max(0, len(positions) + extra - 4))]
    fast, slow = ListStore(list(range(size))), ListStore(list(range(size)))
    fast_out = _outcome(lambda: fast.set(positions, copy.copy(items)))
    slow_out = _outcome(lambda: slow.set(list(positions), copy.copy(items)))
    assert fast_out == slow_out
    assert fast.data == slow.data


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_setters_write_what_they_wrote_before(numpy):
    buf = _buffer("none", (6, 2), numpy)
    buf.set([10, 11, 12, 13, 14, 15])
    buf.set(20, at_indices=-1)
    buf.set([30, 31], at_indices=[0, 2])
    buf.set([40, 41], at_indices=slice(3, 5))
    got = buf.get()
    assert (got.tolist() if numpy else got) == [30, 11, 31, 40, 41, 20]
    with pytest.raises(IndexError, match=r"cannot set at indices \[6\]"):
        buf.set([1, 2], at_indices=[0, 6])
    with pytest.raises(IndexError, match="cannot set at index 6: out of range"):
        buf.set(1, at_indices=6)
    got = buf.get()
    assert (got.tolist() if numpy else got) == [30, 11, 31, 40, 41, 20]
