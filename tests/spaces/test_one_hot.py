import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.spaces import one_hot, one_hot_size


def _oh(n, *idx):
    out = np.zeros(n, np.float32)
    out[list(idx)] = 1.0
    return out


CASES = {
    "discrete_scalar": (gs.Discrete(3), 1, _oh(3, 1)),
    "discrete_numpy_scalar": (gs.Discrete(3), np.int64(2), _oh(3, 2)),
    "discrete_start": (gs.Discrete(3, start=-1), -1, _oh(3, 0)),
    "discrete_batch": (
        gs.Discrete(3),
        np.array([0, 2, 1]),
        np.stack([_oh(3, 0), _oh(3, 2), _oh(3, 1)]),
    ),
    "discrete_list_is_batch": (gs.Discrete(2), [1, 0], np.stack([_oh(2, 1), _oh(2, 0)])),
    "discrete_2d_batch": (
        gs.Discrete(2, start=5),
        np.array([[5, 6], [6, 6]]),
        np.array([[[1, 0], [0, 1]], [[0, 1], [0, 1]]], np.float32),
    ),
    "discrete_empty_batch": (gs.Discrete(4), np.zeros(0, np.int64), np.zeros((0, 4), np.float32)),
    "discrete_integral_float": (gs.Discrete(3), 2.0, _oh(3, 2)),
    "multi_discrete": (gs.MultiDiscrete([2, 3]), [1, 2], _oh(5, 1, 4)),
    "multi_discrete_start": (gs.MultiDiscrete([2, 3], start=[1, -1]), [1, -1], _oh(5, 0, 2)),
    "multi_discrete_batch": (
        gs.MultiDiscrete([2, 3]),
        np.array([[0, 0], [1, 2]]),
        np.stack([_oh(5, 0, 2), _oh(5, 1, 4)]),
    ),
    "multi_discrete_2d_nvec": (
        gs.MultiDiscrete([[2, 2], [3, 1]]),
        np.array([[1, 0], [2, 0]]),
        _oh(8, 1, 2, 6, 7),
    ),
    "box_unchanged": (
        gs.Box(0, 1, (2,)),
        np.array([0.5, 0.25], np.float32),
        np.array([0.5, 0.25], np.float32),
    ),
    "multi_binary_unchanged": (
        gs.MultiBinary(2),
        np.array([1, 0], np.int8),
        np.array([1, 0], np.int8),
    ),
    "dict": (
        gs.Dict({"a": gs.Discrete(2), "b": gs.Box(0, 1, (1,))}),
        {"a": 1, "b": np.array([0.5], np.float32)},
        {"a": _oh(2, 1), "b": np.array([0.5], np.float32)},
    ),
    "tuple_nested_batched": (
        gs.Tuple([gs.Discrete(2), gs.Dict({"m": gs.MultiDiscrete([2, 2])})]),
        (np.array([0, 1]), {"m": np.array([[0, 1], [1, 1]])}),
        (np.stack([_oh(2, 0), _oh(2, 1)]), {"m": np.stack([_oh(4, 0, 3), _oh(4, 1, 3)])}),
    ),
    "tuple_given_as_list": (
        gs.Tuple([gs.Discrete(2), gs.Discrete(3)]),
        [1, 2],
        (_oh(2, 1), _oh(3, 2)),
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
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("space", "value", "expected"), CASES.values(), ids=CASES.keys())
def test_one_hot(space, value, expected):
    _assert_equal(one_hot(value, space), expected)


def test_other_leaves_returned_as_given():
    value = np.array([0.5], np.float32)
    assert one_hot(value, gs.Box(0, 1, (1,))) is value


BAD = {
    "above_range": (gs.Discrete(3), 3, ValueError),
    "below_start": (gs.Discrete(3, start=1), 0, ValueError),
    "negative_would_wrap": (gs.Discrete(3), -1, ValueError),
    "non_integral": (gs.Discrete(3), 1.5, ValueError),
    "md_component_out_of_range": (gs.MultiDiscrete([2, 3]), [2, 0], ValueError),
    "md_wrong_trailing_shape": (gs.MultiDiscrete([2, 3]), [1, 0, 0], ValueError),
    "md_scalar": (gs.MultiDiscrete([2, 3]), 1, ValueError),
    "no_space": (None, 1, ValueError),
    "dict_unknown_key": (gs.Dict({"a": gs.Discrete(2)}), {"b": 0}, ValueError),
    # Encoded silently without the key: flattened rows came out shorter.
    "dict_missing_key": (gs.Dict({"a": gs.Discrete(2), "b": gs.Discrete(3)}), {"a": 1}, ValueError),
    "dict_not_mapping": (gs.Dict({"a": gs.Discrete(2)}), 0, ValueError),
    "tuple_wrong_length": (gs.Tuple([gs.Discrete(2)]), (0, 1), ValueError),
}


@pytest.mark.parametrize(("space", "value", "exc"), BAD.values(), ids=BAD.keys())
def test_one_hot_rejects(space, value, exc):
    with pytest.raises(exc):
        one_hot(value, space)


SIZES = {
    "discrete": (gs.Discrete(7, start=3), 7),
    "multi_discrete": (gs.MultiDiscrete([2, 3, 4]), 9),
    "multi_discrete_2d": (gs.MultiDiscrete([[2, 2], [3, 1]]), 8),
}


@pytest.mark.parametrize(("space", "size"), SIZES.values(), ids=SIZES.keys())
def test_one_hot_size(space, size):
    assert one_hot_size(space) == size


def test_one_hot_size_rejects_box():
    with pytest.raises(TypeError):
        one_hot_size(gs.Box(0, 1))


def test_huge_discrete_does_not_build_identity():
    out = one_hot(np.array([5, 99_999]), gs.Discrete(100_000))
    assert out.shape == (2, 100_000) and out.sum() == 2 and out[1, 99_999] == 1


@settings(max_examples=50, deadline=None)
@given(
    nvec=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    start=st.integers(-3, 3),
    batch=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_multi_discrete_matches_per_component_concat(nvec, start, batch, seed):
    space = gs.MultiDiscrete(nvec, start=[start] * len(nvec), seed=seed)
    values = (
        np.stack([space.sample() for _ in range(batch)])
        if batch
        else np.zeros((0, len(nvec)), np.int64)
    )
    got = one_hot(values, space)
    expected = np.concatenate(
        [one_hot(values[:, j], gs.Discrete(n, start=start)) for j, n in enumerate(nvec)], axis=-1
    )
    np.testing.assert_array_equal(got, expected.reshape(batch, sum(nvec)))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.sum(-1), np.full(batch, len(nvec)))


def test_an_empty_multi_discrete_one_hots_to_nothing():
    space = gs.MultiDiscrete([])
    assert one_hot(np.zeros(0, np.int64), space).shape == (0,)
