from collections import OrderedDict, namedtuple

import gymnasium.spaces as gs
import numpy as np
import pytest
import tree
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.spaces import (
    batch,
    batch_in_space,
    is_flat,
    map_leaves,
    map_leaves_with_space,
    unbatch,
)

Point = namedtuple("Point", ["x", "y"])


def _assert_equal(a, b):
    """Leaf-wise equality that also checks structure types and dtypes."""
    tree.assert_same_structure(a, b, check_types=True)
    if isinstance(a, dict):
        assert list(a) == list(b)
    for x, y in zip(tree.flatten(a), tree.flatten(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype, (x, y)
        np.testing.assert_array_equal(x, y)


BATCH_CASES = {
    "python_ints_int64": ([1, 2, 3], np.array([1, 2, 3], np.int64)),
    "python_floats_float64": ([0.5, 1.5], np.array([0.5, 1.5], np.float64)),
    "numpy_scalars_keep_dtype": ([np.int32(1), np.int32(2)], np.array([1, 2], np.int32)),
    "float32_arrays": (
        [np.zeros(2, np.float32), np.ones(2, np.float32)],
        np.array([[0, 0], [1, 1]], np.float32),
    ),
    "dict_key_order_kept": (
        [{"b": 1, "a": 0.5}, {"b": 2, "a": 1.5}],
        {"b": np.array([1, 2]), "a": np.array([0.5, 1.5])},
    ),
    "tuple_stays_tuple": ([(1, 2.0), (3, 4.0)], (np.array([1, 3]), np.array([2.0, 4.0]))),
    "list_is_structure": ([[1, 2], [3, 4]], [np.array([1, 3]), np.array([2, 4])]),
    "namedtuple": ([Point(1, 2), Point(3, 4)], Point(np.array([1, 3]), np.array([2, 4]))),
    "nested": (
        [{"o": (np.int64(0), {"p": np.zeros(2)})}, {"o": (np.int64(1), {"p": np.ones(2)})}],
        {"o": (np.array([0, 1]), {"p": np.array([[0.0, 0.0], [1.0, 1.0]])})},
    ),
    "strings": (["ab", "c"], np.array(["ab", "c"])),
    "empty_no_space": ([], np.asarray([])),
}


@pytest.mark.parametrize(("items", "expected"), BATCH_CASES.values(), ids=BATCH_CASES.keys())
def test_batch(items, expected):
    _assert_equal(batch(items), expected)


EMPTY_CASES = {
    "box": (gs.Box(0, 1, (2, 3)), np.zeros((0, 2, 3), np.float32)),
    "discrete": (gs.Discrete(3), np.zeros((0,), np.int64)),
    "multi_discrete": (gs.MultiDiscrete([2, 2], dtype=np.int32), np.zeros((0, 2), np.int32)),
    "nested": (
        gs.Dict({"a": gs.Tuple([gs.Discrete(2), gs.MultiBinary(3)])}),
        {"a": (np.zeros(0, np.int64), np.zeros((0, 3), np.int8))},
    ),
}


@pytest.mark.parametrize(("space", "expected"), EMPTY_CASES.values(), ids=EMPTY_CASES.keys())
def test_batch_empty_with_space(space, expected):
    got = batch([], space=space)
    _assert_equal(got, expected)
    for leaf, exp in zip(tree.flatten(got), tree.flatten(expected), strict=True):
        assert leaf.shape == exp.shape


def test_batch_space_ignored_when_items_given():
    _assert_equal(batch([1, 2], space=gs.Discrete(3, dtype=np.int32)), np.array([1, 2]))


BAD_BATCHES = {
    "differing_keys": [{"a": 1}, {"b": 1}],
    "dict_vs_tuple": [{"a": 1}, (1,)],
    "ragged_leaf": [{"a": np.zeros(2)}, {"a": np.zeros(3)}],
    "ragged_flat": [np.zeros(2), np.zeros(3)],
    # Refused in the other order; with a flat item first it became an object array.
    "flat_then_dict": [0, {"a": 1}],
    "row_then_dict": [np.zeros(2), {"a": np.zeros(2)}],
    # A TypeError (len() of a 0-d array) instead of the ValueError of the other order.
    "row_then_0d": [np.zeros(2), np.array(5.0)],
    "0d_then_row": [np.array(5.0), np.zeros(2)],
}


@pytest.mark.parametrize("items", BAD_BATCHES.values(), ids=BAD_BATCHES.keys())
def test_batch_rejects_mismatched_items(items):
    with pytest.raises(ValueError):
        batch(items)


_ROW_SHAPES = [(2,), (3,), (2, 2), (2, 3), (3, 2), (1, 4), (4,)]
_ROW_DTYPES = [np.float32, np.float64, np.int8, np.int64, np.bool_, np.uint8]


@st.composite
def _array_rows(draw):
    """Lists of arrays that mostly share one shape and dtype, sometimes not."""
    n = draw(st.integers(1, 6))
    shape = draw(st.sampled_from(_ROW_SHAPES))
    dtype = draw(st.sampled_from(_ROW_DTYPES))
    rows = []
    for i in range(n):
        row_shape = draw(st.sampled_from(_ROW_SHAPES)) if draw(st.integers(0, 4)) == 0 else shape
        row_dtype = draw(st.sampled_from(_ROW_DTYPES)) if draw(st.integers(0, 4)) == 0 else dtype
        row = np.arange(int(np.prod(row_shape)), dtype=np.int64).reshape(row_shape) + i
        rows.append(row.astype(row_dtype))
    if draw(st.booleans()):
        rows[-1] = rows[-1].T  # a non-contiguous view among the rows
    return rows


@settings(max_examples=300, deadline=None)
@given(_array_rows())
def test_batch_of_array_rows_matches_asarray(rows):
    """The joined fast path builds exactly what np.asarray builds, or refuses alike."""
    try:
        expected = np.asarray(rows)
    except ValueError:
        with pytest.raises(ValueError):
            batch(rows)
        return
    got = batch(rows)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    assert got.flags.writeable
    assert not any(np.shares_memory(got, row) for row in rows)


UNBATCH_CASES = {
    "flat": (np.array([1, 2]), [np.int64(1), np.int64(2)]),
    "rows": (np.arange(4.0).reshape(2, 2), [np.array([0.0, 1.0]), np.array([2.0, 3.0])]),
    "dict": (
        {"a": np.array([1, 2]), "b": np.array([0.5, 1.5])},
        [{"a": np.int64(1), "b": np.float64(0.5)}, {"a": np.int64(2), "b": np.float64(1.5)}],
    ),
    "tuple_stays_tuple": (
        (np.array([1, 2]), (np.array([3, 4]),)),
        [(np.int64(1), (np.int64(3),)), (np.int64(2), (np.int64(4),))],
    ),
    "empty": (np.zeros((0, 3)), []),
    "empty_dict_leaves": ({"a": np.zeros(0)}, []),
}


@pytest.mark.parametrize(("struct", "expected"), UNBATCH_CASES.values(), ids=UNBATCH_CASES.keys())
def test_unbatch(struct, expected):
    got = unbatch(struct)
    assert isinstance(got, list) and len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        _assert_equal(g, e)


def test_unbatch_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        unbatch({"a": np.zeros(2), "b": np.zeros(3)})


FLAT = {
    "int": (1, True),
    "array": (np.zeros(3), True),
    "string": ("abc", True),
    "none": (None, True),
    "dict": ({"a": 1}, False),
    "tuple": ((1,), False),
    "list": ([1], False),
}


@pytest.mark.parametrize(("item", "flat"), FLAT.values(), ids=FLAT.keys())
def test_is_flat(item, flat):
    assert is_flat(item) is flat


def test_map_leaves():
    assert map_leaves(lambda x: x + 1, 1) == 2
    assert map_leaves(lambda x: x + 1, {"b": (1, 2), "a": 3}) == {"b": (2, 3), "a": 4}
    assert list(map_leaves(str, {"b": 1, "a": 2})) == ["b", "a"]


def test_map_leaves_with_space_passes_leaf_spaces():
    space = gs.Dict({"d": gs.Discrete(2), "t": gs.Tuple([gs.Box(0, 1), gs.MultiBinary(2)])})
    got = map_leaves_with_space(lambda v, s: (v, type(s).__name__), {"t": [1, 2], "d": 0}, space)
    assert got == {"t": ((1, "Box"), (2, "MultiBinary")), "d": (0, "Discrete")}


# -- property tests ------------------------------------------------------------------------

_leaf_spaces = st.one_of(
    st.builds(
        lambda shape, dtype: gs.Box(0, 100, tuple(shape), dtype),
        st.lists(st.integers(1, 3), max_size=2),
        st.sampled_from([np.float32, np.float64, np.int32, np.uint8]),
    ),
    st.builds(gs.Discrete, st.integers(1, 10), start=st.integers(-5, 5)),
    st.builds(gs.MultiDiscrete, st.lists(st.integers(1, 5), min_size=1, max_size=3)),
    st.builds(gs.MultiBinary, st.integers(1, 4)),
    st.builds(gs.Text, st.integers(1, 5)),
)

fixed_shape_spaces = st.recursive(
    _leaf_spaces,
    lambda children: st.one_of(
        st.builds(gs.Tuple, st.lists(children, min_size=1, max_size=3)),
        st.builds(
            lambda d: gs.Dict(OrderedDict(d)),  # unsorted keys (sort_keys= is gymnasium 1.3+)
            st.dictionaries(
                st.text("abxy", min_size=1, max_size=2), children, min_size=1, max_size=3
            ),
        ),
    ),
    max_leaves=6,
)


# Box.contains warns on the numpy scalars a shape-() leaf unbatches into; harmless here.
@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
@settings(max_examples=60, deadline=None)
@given(space=fixed_shape_spaces, n=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_unbatch_batch_round_trip(space, n, seed):
    space.seed(seed)
    items = [space.sample() for _ in range(n)]
    batched = batch(items)
    for leaf in tree.flatten(batched):
        assert leaf.shape[0] == n
    back = unbatch(batched)
    assert len(back) == n
    for got, item in zip(back, items, strict=True):
        _assert_equal(got, item)
        assert space.contains(got)


@settings(max_examples=40, deadline=None)
@given(space=fixed_shape_spaces, n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_batch_unbatch_round_trip(space, n, seed):
    space.seed(seed)
    batched = batch([space.sample() for _ in range(n)])
    _assert_equal(batch(unbatch(batched)), batched)


@pytest.mark.parametrize(
    "items",
    [[1.0, None], [1.0, "2.5"], [1.0, 2**70]],
    ids=["none", "string", "huge_int"],
)
def test_a_first_python_float_does_not_turn_other_items_into_floats(items):
    got = batch(items)
    want = np.asarray(items)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


_BOX2 = gs.Box(-5, 5, (2,))
IN_SPACE_CASES = {
    # (items, space, what comes back)
    "box_rows_as_lists": ([[0.0, 0.5], [1.0, 2.0]], _BOX2, np.array([[0.0, 0.5], [1.0, 2.0]])),
    "box_rows_as_tuples": ([(0.0, 0.5), (1.0, 2.0)], _BOX2, np.array([[0.0, 0.5], [1.0, 2.0]])),
    "multidiscrete_lists": ([[0, 1], [2, 0]], gs.MultiDiscrete([3, 3]), np.array([[0, 1], [2, 0]])),
    "arrays_as_batch_does": ([np.zeros(2), np.ones(2)], _BOX2, np.array([[0.0, 0.0], [1.0, 1.0]])),
    # Only a first list decides: after an array, lists are rows too (one look, not a scan).
    "array_then_list": ([np.zeros(2), [1.0, 2.0]], _BOX2, np.array([[0.0, 0.0], [1.0, 2.0]])),
    "list_then_array": ([[1.0, 2.0], np.zeros(2)], _BOX2, np.array([[1.0, 2.0], [0.0, 0.0]])),
    "dict_of_box_lists": (
        [{"p": [0, 1], "n": 2}, {"p": [1, 1], "n": 0}],
        gs.Dict({"p": _BOX2, "n": gs.Discrete(3)}),
        {"p": np.array([[0, 1], [1, 1]]), "n": np.array([2, 0])},
    ),
    "tuple_given_as_lists": (
        [[[0, 1], 2], [[1, 1], 0]],
        gs.Tuple([_BOX2, gs.Discrete(3)]),
        [np.array([[0, 1], [1, 1]]), np.array([2, 0])],
    ),
    "no_space_nests_lists": ([[0, 1], [2, 3]], None, [np.array([0, 2]), np.array([1, 3])]),
}


@pytest.mark.parametrize(
    ("items", "space", "expected"), IN_SPACE_CASES.values(), ids=IN_SPACE_CASES.keys()
)
def test_batch_in_space(items, space, expected):
    got = batch_in_space(items, space)
    assert type(got) is type(expected)
    for g, e in zip(tree.flatten(got), tree.flatten(expected)):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize(
    "items", [[[0.0, 1.0], [1.0]], [[0.0, None], [1.0, 2.0]]], ids=["ragged", "none_inside"]
)
def test_batch_in_space_refuses_rows_it_cannot_stack(items):
    with pytest.raises(ValueError, match="Cannot batch"):
        batch_in_space(items, _BOX2)
