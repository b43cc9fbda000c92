"""Scaling fixes of the buffer: index lists read and batches written without Python per row.

A. ``get``/``get_*`` with an index list or integer array resolved every index in Python
   (``indexing.as_int`` + ``resolve_int`` per index, an array slower than a list), and a read
   with ``fill`` and any out-of-range index fetched and stacked items one by one.
B. ``set``/``set_*`` of a batched array on a numpy column split it into items, then checked,
   cast and wrote each row (2-7 µs of Python per row).

The work tests count calls of the per-index / per-row helpers (never timings); the behaviour
tests pin that results, dtypes, nesting and errors are what the item-by-item paths give.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode, indexing
from episodes.buffer import array_store, lookback_buffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.view_store import ViewStore
from episodes.spaces.contains import checker_for

F32 = np.float32
BOX = gym.spaces.Box(-1.0, 2.0, (3,), F32)
DICT = gym.spaces.Dict({"b": gym.spaces.Discrete(3), "a": gym.spaces.Box(-1, 1, (2,), F32)})
TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), F32)))


def _box_buffer(n: int = 12, lookback: int = 2) -> InfiniteLookbackBuffer:
    rows = list(np.random.default_rng(0).random((n, 3), dtype=F32))
    buf = InfiniteLookbackBuffer(rows, lookback=lookback, space=BOX)
    buf.finalize()
    return buf


def _dict_buffer(n: int = 8) -> InfiniteLookbackBuffer:
    rng = np.random.default_rng(1)
    items = [{"a": rng.uniform(-1, 1, 2).astype(F32), "b": int(i % 3)} for i in range(n)]
    buf = InfiniteLookbackBuffer(items, lookback=1, space=DICT)  # recorded in another key order
    buf.finalize()
    return buf


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    calls = [0]
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _strict_equal(a: Any, b: Any) -> bool:
    """Equal values, dtypes, shapes, container classes and dict key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind in "fc"
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)
    return bool(a == b)


# ------------------------------------------------------------ A. index lists, per-index work
INDEX_KINDS: dict[str, Callable[[list[int]], Any]] = {
    "list": list,
    "tuple": tuple,
    "int64_array": lambda idx: np.array(idx, np.int64),
    "int32_array": lambda idx: np.array(idx, np.int32),
    "uint16_array": lambda idx: np.array(idx, np.uint16),
    "uint64_array": lambda idx: np.array(idx, np.uint64),
    "list_of_numpy_ints": lambda idx: [np.int32(i) for i in idx],
}


@pytest.mark.parametrize("kind", list(INDEX_KINDS))
def test_an_index_list_resolves_without_python_per_index(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = _box_buffer(n=300)
    indices = INDEX_KINDS[kind](list(range(0, 280, 3)))
    as_int = _counting(monkeypatch, indexing, "as_int")
    resolve_int = _counting(monkeypatch, indexing, "resolve_int")
    got = buf.get(indices)
    assert as_int[0] == 0 and resolve_int[0] == 0
    assert np.array_equal(got, buf.get(slice(0, 280, 3)))


@pytest.mark.parametrize(
    "buffer, indices, kwargs",
    [
        (_box_buffer, [0, 9, 3, -1, 4], {}),
        (_box_buffer, [-2, 0, 15, 1, -20], {"fill": 0.0}),
        (_box_buffer, [12, 13, 0, 1], {"fill": -1.0}),  # fillers first
        (_box_buffer, [0, 1, 14, 15], {"fill": 0.5}),  # fillers last
        (_box_buffer, [-1, -3, 0], {"neg_index_as_lookback": True, "fill": 0.0}),
        (_dict_buffer, [1, 9, 0, -1], {"fill": 0}),
        (_dict_buffer, [9, 1, 0], {"fill": 0, "one_hot_discrete": True}),
    ],
    ids=[
        "plain",
        "filled_middle",
        "filled_first",
        "filled_last",
        "neg_lookback",
        "dict",
        "one_hot",
    ],
)
def test_a_filled_index_read_gathers_the_stored_items_at_once(
    buffer: Callable[[], InfiniteLookbackBuffer],
    indices: list[int],
    kwargs: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buf = buffer()
    # The item-by-item read, built from int reads (each an item or its filler).
    want = ArrayStore.from_items([buf.get(i, **kwargs) for i in indices])
    gets = _counting(monkeypatch, ArrayStore, "get")
    for variant in (indices, np.array(indices)):
        assert _strict_equal(buf.get(variant, **kwargs), want)
    assert gets[0] == 0


# --------------------------------------------------------- A. index lists, same behaviour
def _scalar_buffer(values: list[Any], lookback: int = 0, **kw: Any) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer(values, lookback=lookback, **kw)
    buf.finalize()
    return buf


FILLED_READS: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], list[int], Any]] = {
    # Stacked as the items stack: a Python float filler makes a float32 column's read float64,
    # an int filler a uint8 column's read int64.
    "float32_python_float_fill": (
        lambda: _scalar_buffer([F32(0.5), F32(1.5)]),
        [0, 5, 1],
        0.0,
    ),
    "uint8_negative_fill": (lambda: _scalar_buffer([np.uint8(3), np.uint8(4)]), [3, 1], -1),
    "int_float_fill": (lambda: _scalar_buffer([1, 2, 3]), [-9, 2], 0.5),
    "bool_column": (lambda: _scalar_buffer([True, False]), [1, 4], False),
    "strings": (lambda: _scalar_buffer(["a", "abc"]), [0, 3], "x"),
    "text_space": (
        lambda: _scalar_buffer(["a", "ab"], space=gym.spaces.Text(6)),
        [5, 0],
        "x",
    ),
    "discrete_start": (
        lambda: _scalar_buffer([2, 4, 3], space=gym.spaces.Discrete(3, start=2)),
        [2, 7, 0],
        -1,
    ),
    "tuple_recorded_as_lists": (
        lambda: _scalar_buffer([[1, np.zeros(2, F32)], [2, np.ones(2, F32)]], space=TUPLE),
        [1, 2, 0],
        0,
    ),
    "no_space_row_fill": (
        lambda: _scalar_buffer([np.zeros(2), np.ones(2)]),
        [4, 1],
        np.full(2, -1.0),
    ),
    "no_space_dict_items": (
        lambda: _scalar_buffer([{"k": 1.5, "j": (1, F32(2))}, {"k": 0.5, "j": (2, F32(3))}]),
        [0, 6, 1],
        {"j": (0, 0), "k": 0},
    ),
}


@pytest.mark.parametrize("case", list(FILLED_READS))
def test_filled_index_reads_stack_as_the_items_do(case: str) -> None:
    make, indices, fill = FILLED_READS[case]
    buf = make()
    try:
        want: Any = ArrayStore.from_items([buf.get(i, fill=fill) for i in indices])
    except ValueError:
        want = ValueError
    if want is ValueError:
        with pytest.raises(ValueError, match="cannot pad this buffer's items"):
            buf.get(indices, fill=fill)
    else:
        assert _strict_equal(buf.get(indices, fill=fill), want)
        assert _strict_equal(buf.get(np.array(indices), fill=fill), want)


def test_a_list_fill_of_one_row_pads_rows_without_a_space_in_any_order() -> None:
    # A list shaped like one row is that row (contract §3.5), whether a filler comes first or
    # not: the read is the rows stacked, not a list that depends on the order.
    buf = _scalar_buffer([np.zeros(2), np.ones(2)])
    want = np.array([[7.0, 7.0], [1.0, 1.0]])
    for indices in ([4, 1], np.array([4, 1])):
        got = buf.get(indices, fill=[7, 7])
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(buf.get([1, 4], fill=[7, 7]), want[::-1])


def test_a_scalar_fill_for_rows_without_a_space_is_still_refused() -> None:
    buf = _scalar_buffer([np.zeros(2), np.ones(2)])
    with pytest.raises(ValueError, match="fill=0 cannot pad this buffer's items"):
        buf.get([0, 5], fill=0)


BAD_INDEX_LISTS: dict[str, tuple[Any, type[Exception], str]] = {
    "bool_in_list": ([0, True], TypeError, r"index must be an int, got bool \(True\)"),
    "float_in_list": ([1.0], TypeError, r"index must be an int, got float \(1.0\)"),
    "bool_array": (np.array([True]), TypeError, "index must be an int, got bool"),
    "float_array": (np.array([1.0]), TypeError, "index must be an int, got float64"),
    "2d_array": (np.zeros((1, 2), int), TypeError, "an index array must be 1-d"),
    "out_of_range_list": ([0, 12], IndexError, r"indices \[12\] are out of range"),
    "out_of_range_array": (np.array([12, 0]), IndexError, r"indices \[12\] are out of range"),
    "beyond_int64_array": (np.array([2**63 - 1]), IndexError, "out of range"),
    "beyond_int64_uint64": (np.array([2**64 - 1, 0], np.uint64), IndexError, "out of range"),
    "beyond_int64_list": ([2**70], IndexError, "out of range"),
}


@pytest.mark.parametrize("case", list(BAD_INDEX_LISTS))
def test_bad_index_lists_raise_as_before(case: str) -> None:
    indices, error, message = BAD_INDEX_LISTS[case]
    with pytest.raises(error, match=message):
        _box_buffer(n=12, lookback=2).get(indices)


@pytest.mark.parametrize("neg", [False, True], ids=["plain", "neg_as_lookback"])
@pytest.mark.parametrize("kind", list(INDEX_KINDS))
def test_resolved_index_lists_equal_resolve_int_per_index(kind: str, neg: bool) -> None:
    idx = [0, 3, 7, 2**31 - 1, 65535]
    idx += [] if kind.startswith("uint") else [-1, -5, -(2**31)]
    kw = dict(lookback=3, total=9, neg_index_as_lookback=neg)
    want = [indexing.resolve_int(i, **kw) for i in idx]
    if kind == "uint16_array":
        idx, want = idx[:3] + idx[4:5], want[:3] + want[4:5]
    assert indexing.resolve_list(INDEX_KINDS[kind](idx), **kw).tolist() == want


def test_int64_indices_near_the_bound_are_out_of_range_not_wrapped() -> None:
    kw = dict(lookback=3, total=9, neg_index_as_lookback=False)
    indices = np.array([2**63 - 1, 2**63 - 3, -(2**63), 1])
    assert indexing.resolve_list(indices, **kw).tolist() == [9, 9, 9 - 2**63, 4]
    uint = np.array([2**64 - 1, 2**63, 2], np.uint64)
    assert indexing.resolve_list(uint, **kw).tolist() == [9, 9, 5]


def test_list_mode_reads_an_index_array_as_a_list() -> None:
    buf = InfiniteLookbackBuffer([10, 11, 12, 13], lookback=1)
    assert buf.get(np.array([0, -1, 5]), fill=0) == [11, 13, 0]
    with pytest.raises(IndexError, match="out of range"):
        buf.get(np.array([5], np.uint8))


# ---------------------------------------------------------------- B. batch set, per-row work
def _numpyd_episode(n: int = 50) -> SingleAgentEpisode:
    rng = np.random.default_rng(0)
    return SingleAgentEpisode(
        observations=list(rng.random((n + 1, 3), dtype=F32)),
        actions=[int(i % 2) for i in range(n)],
        rewards=[1.0] * n,
        observation_space=BOX,
        action_space=gym.spaces.Discrete(2),
        extra_model_outputs={"adv": [0.0] * n},
        len_lookback_buffer=0,
    ).to_numpy()


SETS: dict[str, Callable[[SingleAgentEpisode], None]] = {
    "observations_all": lambda ep: ep.set_observations(new_data=np.full((51, 3), 0.5, F32)),
    "observations_slice": lambda ep: ep.set_observations(
        new_data=np.zeros((10, 3), F32), at_indices=slice(5, 25, 2)
    ),
    "observations_reversed": lambda ep: ep.set_observations(
        new_data=np.ones((4, 3), F32), at_indices=slice(8, 4, -1)
    ),
    "observations_index_array": lambda ep: ep.set_observations(
        new_data=np.ones((3, 3), F32), at_indices=np.array([0, -1, 7])
    ),
    "actions": lambda ep: ep.set_actions(new_data=np.ones(50, np.int64)),
    "actions_narrower": lambda ep: ep.set_actions(new_data=np.ones(50, np.int8)),
    "extra_model_outputs_float32": lambda ep: ep.set_extra_model_outputs(
        key="adv", new_data=np.arange(50, dtype=F32)
    ),
    "rewards_index_list": lambda ep: ep.set_rewards(
        new_data=np.array([2.0, 3.0]), at_indices=[1, 3]
    ),
}


@pytest.mark.parametrize("case", list(SETS))
def test_a_batch_set_checks_and_writes_without_python_per_row(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = _numpyd_episode()
    staged = _counting(monkeypatch, array_store, "staged_rows")
    items = _counting(monkeypatch, ArrayStore, "items")
    checks = [0]
    real_checker_for = lookback_buffer.checker_for

    def counting_checker_for(space: gym.Space[Any]) -> Callable[[Any], bool]:
        check = real_checker_for(space)

        def counted(item: Any) -> bool:
            checks[0] += 1
            return check(item)

        return counted

    monkeypatch.setattr(lookback_buffer, "checker_for", counting_checker_for)
    SETS[case](ep)
    assert (staged[0], items[0], checks[0]) == (0, 0, 0)


# ------------------------------------------------------------ B. batch set, same behaviour
def _items_of(batch: Any) -> list[Any]:
    return ArrayStore.from_batch(batch).items(0)


SAME_SETS: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], Any, Any]] = {
    "box_all": (_box_buffer, np.full((10, 3), 0.25, F32), None),
    "box_float16_rows": (_box_buffer, np.full((10, 3), 0.5, np.float16), None),
    "box_index_array": (_box_buffer, np.zeros((3, 3), F32), np.array([4, -1, 0])),
    "box_reversed_slice": (_box_buffer, np.ones((3, 3), F32), slice(6, 3, -1)),
    "box_repeated_positions": (_box_buffer, np.stack([np.zeros(3, F32), np.ones(3, F32)]), [2, 2]),
    "dict_other_key_order": (
        _dict_buffer,
        {"a": np.zeros((7, 2), F32), "b": np.arange(7) % 3},
        None,
    ),
    "dict_narrower_ints": (
        _dict_buffer,
        {"b": np.full(2, 2, np.int8), "a": np.ones((2, 2), F32)},
        [0, 3],
    ),
    "tuple_space": (
        lambda: _scalar_buffer([(1, np.zeros(2, F32)), (2, np.ones(2, F32))], space=TUPLE),
        (np.array([0, 2]), np.full((2, 2), -1.0, F32)),
        None,
    ),
    "multi_discrete": (
        lambda: _scalar_buffer(
            [np.array([0, 1]), np.array([2, 3])], space=gym.spaces.MultiDiscrete([3, 4])
        ),
        np.array([[2, 0], [1, 3]], np.int32),
        None,
    ),
    "multi_binary": (
        lambda: _scalar_buffer([np.zeros(2, np.int8)] * 3, space=gym.spaces.MultiBinary(2)),
        np.array([[1, 0], [1, 1], [0, 1]], np.int8),
        None,
    ),
    "scalar_box_ints": (
        lambda: _scalar_buffer([1, 2, 3], space=gym.spaces.Box(0, 10, (), np.int64)),
        np.array([7, 8, 9], np.int16),
        None,
    ),
    "no_space_ints_into_floats": (lambda: _scalar_buffer([0.5, 1.5]), np.array([3, 4]), None),
}


@pytest.mark.parametrize("case", list(SAME_SETS))
def test_a_batch_set_writes_what_its_items_write(case: str) -> None:
    make, batch, at = SAME_SETS[case]
    fast, by_items = make(), make()
    fast.set(batch, at_indices=at)
    by_items.set(_items_of(batch), at_indices=at)  # a list of items: the item-by-item path
    assert _strict_equal(fast.get_state()["data"], by_items.get_state()["data"])
    assert fast == by_items


REFUSED_SETS: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], Any, Any, type, str]] = {
    "outside_the_box": (
        _box_buffer,
        np.concatenate([np.zeros((9, 3), F32), np.full((1, 3), 5.0, F32)]),
        None,
        ValueError,
        "is not in the buffer's space",
    ),
    "nan_in_box": (_box_buffer, np.full((2, 3), np.nan, F32), [0, 1], ValueError, "space"),
    "float64_rows_for_a_float32_box": (
        _box_buffer,
        np.zeros((10, 3)),
        None,
        ValueError,
        "is not in the buffer's space",
    ),
    "wrong_length": (_box_buffer, np.zeros((4, 3), F32), slice(0, 3), IndexError, "address 3"),
    "wrong_row_shape": (
        lambda: _scalar_buffer([np.zeros(3)] * 3),
        np.zeros((3, 2)),
        None,
        ValueError,
        "does not fit a numpy column",
    ),
    "lossy_ints": (
        lambda: _scalar_buffer([1, 2]),
        np.array([0.5, 1.0]),
        None,
        ValueError,
        "does not fit a numpy column",
    ),
    "int8_overflow": (
        lambda: _scalar_buffer([np.int8(1), np.int8(2)]),
        np.array([300, 1]),
        None,
        ValueError,
        "does not fit",
    ),
    "float32_overflow": (
        lambda: _scalar_buffer([F32(1), F32(2)]),
        np.array([1e40, 1.0]),
        None,
        ValueError,
        "beyond the range",
    ),
    "discrete_out_of_range": (
        lambda: _scalar_buffer([0, 1], space=gym.spaces.Discrete(2)),
        np.array([1, 2]),
        None,
        ValueError,
        "is not in the buffer's space",
    ),
    "dict_missing_key": (_dict_buffer, {"a": np.zeros((7, 2), F32)}, None, ValueError, "space"),
    "later_leaf_misfits": (
        lambda: _scalar_buffer([{"x": 1, "y": 1}, {"x": 2, "y": 2}]),
        {"x": np.array([5, 6]), "y": np.array([0.5, 1.0])},
        None,
        ValueError,
        "does not fit",
    ),
    "strings_into_numbers": (
        lambda: _scalar_buffer([1.0, 2.0]),
        np.array(["1", "2"]),
        None,
        ValueError,
        "does not fit",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_SETS))
def test_a_refused_batch_set_raises_as_before_and_changes_nothing(case: str) -> None:
    make, batch, at, error, message = REFUSED_SETS[case]
    buf = make()
    before = copy.deepcopy(buf)
    with pytest.raises(error, match=message):
        buf.set(batch, at_indices=at)
    assert buf == before
    assert _strict_equal(buf.get_state()["data"], before.get_state()["data"])


def test_a_batch_viewing_its_own_column_is_written_as_a_copy() -> None:
    buf = _box_buffer(n=10, lookback=0)
    want = buf.get()[::-1].copy()
    buf.set(buf.get()[::-1])
    assert np.array_equal(buf.get(), want)
    buf = _box_buffer(n=10, lookback=0)
    want = buf.get(slice(0, 9)).copy()
    buf.set(buf.get(slice(0, 9)), at_indices=slice(1, 10))  # overlapping, shifted
    assert np.array_equal(buf.get(slice(1, 10)), want)


def test_a_batch_set_on_a_view_store_leaves_the_block_alone() -> None:
    block = np.zeros((4, 2), F32)
    buf = InfiniteLookbackBuffer(ViewStore.from_batch(block[:, 1]), space=gym.spaces.Box(-5, 5, ()))
    buf.set(np.arange(4, dtype=F32))
    assert buf.get().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert block.tolist() == np.zeros((4, 2)).tolist()
    assert buf.store.written and buf.store.detached


def test_a_batch_set_in_list_mode_stays_item_by_item() -> None:
    buf = InfiniteLookbackBuffer([0, 1, 2])
    buf.set(np.array([5, 6, 7]))
    assert [type(x) for x in buf.get()] == [np.int64] * 3 and buf.get() == [5, 6, 7]


# ------------------------------------------------- B. the vectorized space check, per item
MASK_CASES: dict[str, tuple[gym.Space[Any], Any]] = {
    "box_rows": (BOX, np.array([[0, 0, 0], [3, 0, 0], [np.nan, 0, 0], [-1, 2, 2]], F32)),
    "box_big": (
        gym.spaces.Box(-1, 1, (20,), F32),
        np.stack([np.zeros(20, F32), np.full(20, 1.5, F32), np.full(20, -np.inf, F32)]),
    ),
    "box_unbounded": (
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
        np.array([[np.inf, -np.inf], [np.nan, 0.0], [1e300, 0]]),
    ),
    "box_other_bounds": (
        gym.spaces.Box(np.array([-1, 0], F32), np.array([1, np.inf], F32)),
        np.array([[0, 5], [2, 5], [0, -1]], F32),
    ),
    "box_int_rows_in_float_box": (
        gym.spaces.Box(0, 2**53, (1,), np.float64),
        np.array([[2**53], [2**53 + 1], [3]], np.int64),
    ),
    "box_int32_rows_in_float_box": (
        gym.spaces.Box(0, 5, (1,), np.float64),
        np.array([[1], [6]], np.int32),
    ),
    "box_uint8_rows": (
        gym.spaces.Box(0, 255, (2,), np.uint8),
        np.array([[0, 255], [1, 2]], np.uint8),
    ),
    "box_narrower_float_rows": (BOX, np.zeros((2, 3), np.float16)),
    "box_wider_float_rows": (BOX, np.zeros((2, 3))),
    "box_bool_rows": (gym.spaces.Box(0, 1, (2,), np.int64), np.array([[True, False]] * 2)),
    "box_wrong_shape": (BOX, np.zeros((2, 4), F32)),
    "scalar_box_float64": (
        gym.spaces.Box(-1, 1, (), F32),
        np.array([0.5, 1.0000001, -1.0, np.nan, np.inf]),
    ),
    "scalar_box_ints": (
        gym.spaces.Box(-(2**62), 2**62, (), np.int64),
        np.array([2**62, 2**62 + 1, -(2**62) - 1, 0]),
    ),
    "scalar_int_box_floats": (gym.spaces.Box(0, 5, (), np.int64), np.array([1.0, 1.5, 6.0])),
    "scalar_uint_box_negative_ints": (gym.spaces.Box(0, 5, (), np.uint8), np.array([-1, 3, 5])),
    "discrete": (gym.spaces.Discrete(3, start=-1), np.array([-2, -1, 1, 2], np.int8)),
    "discrete_uint64": (gym.spaces.Discrete(3), np.array([0, 2], np.uint64)),
    "discrete_floats": (gym.spaces.Discrete(3), np.array([0.0, 1.0])),
    "multi_discrete": (
        gym.spaces.MultiDiscrete([3, 4], start=[-1, 2]),
        np.array([[-1, 2], [1, 5], [2, 5], [-2, 3]]),
    ),
    "multi_discrete_floats": (gym.spaces.MultiDiscrete([3, 4]), np.zeros((2, 2))),
    "multi_binary": (
        gym.spaces.MultiBinary([2, 2]),
        np.array([[[0, 1], [1, 1]], [[2, 0], [0, 0]]]),
    ),
    "multi_binary_floats": (gym.spaces.MultiBinary(2), np.array([[0.0, 1.0], [0.5, 1.0]])),
    "dict": (DICT, {"a": np.array([[0, 0], [2, 0]], F32), "b": np.array([0, 1])}),
    "dict_other_keys": (DICT, {"a": np.zeros((2, 2), F32), "c": np.array([0, 1])}),
    "tuple_as_list": (TUPLE, [np.array([0, 3]), np.zeros((2, 2), F32)]),
    "tuple_as_array": (gym.spaces.Tuple((gym.spaces.Discrete(2),) * 2), np.array([[0, 1], [1, 2]])),
    "text": (gym.spaces.Text(3), np.array(["ab", "abcd"])),
}


@pytest.mark.parametrize("case", list(MASK_CASES))
def test_the_vectorized_space_check_judges_each_item_as_the_checker(case: str) -> None:
    from episodes.buffer.batch_writes import in_space_mask

    space, batch = MASK_CASES[case]
    items = _items_of(batch)
    check = checker_for(space)
    assert in_space_mask(space, batch, len(items)).tolist() == [bool(check(i)) for i in items]
