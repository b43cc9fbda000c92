import gymnasium.spaces as gs
import numpy as np
import pytest

from episodes.spaces import batch, filler_batch, filler_item

NESTED = gs.Dict(
    {
        "pos": gs.Box(-1, 1, (2,), np.float64),
        "t": gs.Tuple([gs.Discrete(3, start=1), gs.MultiDiscrete([2, 4])]),
    }
)

ITEM_CASES = {
    "box_f32": (gs.Box(0, 1, (2, 3)), 0, False, np.zeros((2, 3), np.float32)),
    "box_nan": (gs.Box(0, 1, (2,), np.float64), np.nan, False, np.full(2, np.nan)),
    "box_uint8": (gs.Box(0, 255, (2,), np.uint8), 7, False, np.full(2, 7, np.uint8)),
    "box_scalar": (gs.Box(0, 1, ()), 0.5, False, np.float32(0.5) * np.ones((), np.float32)),
    "discrete_0d_int64": (gs.Discrete(4), 0, False, np.asarray(0, np.int64)),
    "discrete_float_fill_cast": (gs.Discrete(4), 0.0, False, np.asarray(0, np.int64)),
    "discrete_int32": (gs.Discrete(4, dtype=np.int32), -1, False, np.asarray(-1, np.int32)),
    "discrete_zero_hot": (gs.Discrete(4, start=2), 0, True, np.zeros(4, np.float32)),
    "multi_discrete": (gs.MultiDiscrete([2, 3]), -1, False, np.array([-1, -1], np.int64)),
    "multi_discrete_zero_hot": (gs.MultiDiscrete([2, 3]), -1, True, np.zeros(5, np.float32)),
    "multi_binary": (gs.MultiBinary([2, 2]), 0, False, np.zeros((2, 2), np.int8)),
    "multi_binary_one_hot_ignored": (gs.MultiBinary(2), 1, True, np.ones(2, np.int8)),
    "box_one_hot_ignored": (gs.Box(0, 1, (1,)), 0, True, np.zeros(1, np.float32)),
    "no_space": (None, -1.0, False, -1.0),
    "text_is_fill": (gs.Text(3), "ab", False, "ab"),
    "nested": (
        NESTED,
        0,
        False,
        {"pos": np.zeros(2), "t": (np.asarray(0, np.int64), np.zeros(2, np.int64))},
    ),
    "nested_zero_hot": (
        NESTED,
        0,
        True,
        {"pos": np.zeros(2), "t": (np.zeros(3, np.float32), np.zeros(6, np.float32))},
    ),
}


def _assert_equal(a, b):
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b)
        for k in b:
            _assert_equal(a[k], b[k])
    elif isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_equal(x, y)
    else:
        assert np.asarray(a).dtype == np.asarray(b).dtype
        assert np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("space", "fill", "one_hot", "expected"), ITEM_CASES.values(), ids=ITEM_CASES.keys()
)
def test_filler_item(space, fill, one_hot, expected):
    _assert_equal(filler_item(space, fill, one_hot_discrete=one_hot), expected)


def test_filler_item_no_space_returns_fill_itself():
    fill = {"any": "thing"}
    assert filler_item(None, fill) is fill


def test_filler_item_value_is_in_space():
    space = gs.Dict({"a": gs.Box(-1, 1, (2,)), "b": gs.Discrete(3), "c": gs.MultiBinary(2)})
    assert space.contains(filler_item(space, 0))


@pytest.mark.parametrize("n", [0, 1, 4], ids=["n0", "n1", "n4"])
@pytest.mark.parametrize("one_hot", [False, True], ids=["plain", "zero_hot"])
@pytest.mark.parametrize(
    ("space", "fill"),
    [(c[0], c[1]) for c in ITEM_CASES.values()],
    ids=list(ITEM_CASES.keys()),
)
def test_filler_batch_equals_batched_items(space, fill, one_hot, n):
    item = filler_item(space, fill, one_hot_discrete=one_hot)
    got = filler_batch(space, fill, n, one_hot_discrete=one_hot)
    if isinstance(space, gs.Text):  # as wide as the space's strings, not the filler's
        assert got.dtype == np.dtype("<U3") and got.tolist() == [item] * n
    elif n:
        _assert_equal(got, batch([item] * n))
    else:
        import tree

        for leaf, item_leaf in zip(tree.flatten(got), tree.flatten(item), strict=True):
            assert leaf.shape == (0, *np.shape(item_leaf))
            assert leaf.dtype == np.asarray(item_leaf).dtype


@pytest.mark.parametrize("fill", [0, 1.5, None, b"x"])
def test_a_text_leaf_takes_only_a_string_fill(fill):
    # A number filled a list-mode read as itself and a numpy'd one as its string.
    with pytest.raises(ValueError, match="give a string"):
        filler_item(gs.Text(3), fill)
    with pytest.raises(ValueError, match="give a string"):
        filler_batch(gs.Dict({"t": gs.Text(3)}), fill, 2)
    assert filler_batch(gs.Text(3), fill, 0).dtype == np.dtype("<U3")  # an empty column's layout


def test_a_fill_beyond_a_float_leafs_range_is_refused():
    box = gs.Box(0, 1, (2,), np.float32)
    with pytest.raises(ValueError, match="beyond the dtype's range"):
        filler_item(box, 1e40)  # was an item of inf
    assert np.isinf(filler_item(box, np.inf)).all() and np.isnan(filler_item(box, np.nan)).all()
    assert filler_item(gs.Box(0, 1, (2,), np.float16), 0.1).dtype == np.float16  # rounding is fine


def test_filler_batch_shapes():
    got = filler_batch(NESTED, 0, 3, one_hot_discrete=True)
    assert got["pos"].shape == (3, 2)
    assert got["t"][0].shape == (3, 3) and got["t"][0].dtype == np.float32
    assert got["t"][1].shape == (3, 6)


def test_filler_batch_negative_n():
    with pytest.raises(ValueError):
        filler_batch(gs.Discrete(2), 0, -1)


@pytest.mark.parametrize(
    ("space", "fill"),
    [
        (gs.Discrete(3), np.nan),  # was -9223372036854775808
        (gs.MultiDiscrete([2, 3]), np.nan),
        (gs.Box(0, 5, (2,), np.int64), 2.7),  # was truncated to 2
        (gs.Box(0, 5, (2,), np.int64), -0.5),
        (gs.Box(0, 255, (2,), np.uint8), 300),  # was an OverflowError
        (gs.Box(0, 255, (2,), np.uint8), -1),
    ],
    ids=["nan-discrete", "nan-multidiscrete", "2.7-int", "-0.5-int", "300-uint8", "-1-uint8"],
)
def test_fill_values_an_integer_leaf_cannot_hold_are_refused(space, fill):
    with pytest.raises(ValueError, match="cannot fill"):
        filler_item(space, fill)
    with pytest.raises(ValueError, match="cannot fill"):
        filler_batch(space, fill, 3)
    assert filler_item(space, 0.0).dtype == space.dtype  # a whole float still fills
