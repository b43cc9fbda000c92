"""The cached membership checkers agree with gymnasium's ``space.contains``.

A table of named edge cases (bounds, NaN, dtypes, shapes, uniform and per-element bounds), then a
property: for drawn spaces and items that are in the space or perturbed out of it, the checker
answers exactly what ``space.contains`` answers.
"""

import warnings

import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.spaces.contains import checker_for, make_checker
from episodes.testing.strategies import items, spaces

F32 = np.float32
UNIFORM = gs.Box(-1.0, 1.0, (4,), F32)
PER_ELEMENT = gs.Box(np.array([-1.0, 0.0, -5.0], F32), np.array([1.0, 2.0, -4.0], F32))
LOW_ONLY = gs.Box(np.array([0.0, -np.inf], F32), np.array([np.inf, np.inf], F32))
BIG = gs.Box(-1.0, 1.0, (5, 5), F32)  # 25 elements: the numpy path
IMAGE = gs.Box(0, 255, (2, 2, 3), np.uint8)
SCALAR = gs.Box(-1.0, 1.0, (), F32)

CASES = {
    "uniform_inside": (UNIFORM, np.array([0.0, -1.0, 1.0, 0.5], F32), True),
    "uniform_above": (UNIFORM, np.array([0.0, 0.0, 1.5, 0.0], F32), False),
    "uniform_below": (UNIFORM, np.array([-1.01, 0.0, 0.0, 0.0], F32), False),
    "uniform_nan_first": (UNIFORM, np.array([np.nan, 0.0, 0.0, 0.0], F32), False),
    "uniform_nan_last": (UNIFORM, np.array([0.0, 0.0, 0.0, np.nan], F32), False),
    "uniform_float64_row": (UNIFORM, np.zeros(4), False),
    "uniform_float16_row_casts": (UNIFORM, np.zeros(4, np.float16), True),
    "uniform_int_row_casts": (UNIFORM, np.zeros(4, np.int8), True),
    "uniform_wrong_shape": (UNIFORM, np.zeros(3, F32), False),
    "uniform_2d_shape": (UNIFORM, np.zeros((1, 4), F32), False),
    "per_element_inside": (PER_ELEMENT, np.array([0.5, 2.0, -4.5], F32), True),
    "per_element_third_out": (PER_ELEMENT, np.array([0.5, 2.0, -3.5], F32), False),
    "per_element_nan": (PER_ELEMENT, np.array([0.5, np.nan, -4.5], F32), False),
    "low_only_inf_inside": (LOW_ONLY, np.array([np.inf, -np.inf], F32), True),
    "low_only_negative": (LOW_ONLY, np.array([-1.0, 0.0], F32), False),
    "big_inside": (BIG, np.zeros((5, 5), F32), True),
    "big_nan": (BIG, np.full((5, 5), np.nan, F32), False),
    "big_above": (BIG, np.full((5, 5), 2.0, F32), False),
    "image_any_uint8": (IMAGE, np.full((2, 2, 3), 255, np.uint8), True),
    "scalar_box_array": (SCALAR, np.array(0.5, F32), True),
    "scalar_box_array_out": (SCALAR, np.array(2.0, F32), False),
    "discrete_int": (gs.Discrete(3, start=-1), 1, True),
    "discrete_int_above": (gs.Discrete(3, start=-1), 2, False),
    "discrete_numpy_int": (gs.Discrete(3), np.int64(2), True),
    "discrete_numpy_int_out": (gs.Discrete(3), np.int32(3), False),
    "discrete_bool_is_an_int": (gs.Discrete(2), True, True),
    "dict_inside": (
        gs.Dict({"a": gs.Discrete(2), "b": UNIFORM}),
        {"a": 1, "b": np.zeros(4, F32)},
        True,
    ),
    "dict_missing_key": (gs.Dict({"a": gs.Discrete(2), "b": gs.Discrete(2)}), {"a": 1}, False),
    "tuple_inside": (gs.Tuple([gs.Discrete(2), UNIFORM]), (0, np.ones(4, F32)), True),
    "tuple_given_as_list": (gs.Tuple([gs.Discrete(2), gs.Discrete(2)]), [0, 1], True),
    "tuple_wrong_length": (gs.Tuple([gs.Discrete(2), gs.Discrete(2)]), (0,), False),
    # Compared as floats, 2**62 + 1 rounded to the bound 2**62 and passed.
    "big_int_above_scalar_int_box": (gs.Box(0, 2**62, (), np.int64), 2**62 + 1, False),
    "big_int_at_scalar_int_box_bound": (gs.Box(0, 2**62, (), np.int64), 2**62, True),
}


@pytest.mark.parametrize("space, item, expected", CASES.values(), ids=CASES.keys())
def test_checker_cases(space, item, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert bool(space.contains(item)) is expected  # the table itself agrees with gymnasium
    assert make_checker(space)(item) is expected
    assert checker_for(space)(item) is expected


def test_checker_is_cached_per_space():
    space = gs.Box(-1.0, 1.0, (2,), F32)
    assert checker_for(space) is checker_for(space)


def _perturbed(value):
    """Derived items that may leave the space: NaN, out of range, wrong dtype, wrong shape."""
    if isinstance(value, np.ndarray) and value.size:
        kinds = (
            ["nan", "big", "negative", "float64", "flat"]
            if value.dtype.kind == "f"
            else [
                "big",
                "negative",
                "float64",
                "flat",
            ]
        )

        def derive(kind):
            out = value.copy()
            if kind == "nan":
                out.flat[-1] = np.nan
            elif kind == "big":
                out.flat[0] = np.iinfo(out.dtype).max if out.dtype.kind in "iu" else 1e30
            elif kind == "negative":
                out.flat[-1] = np.iinfo(out.dtype).min if out.dtype.kind in "iu" else -1e30
            elif kind == "float64":
                out = value.astype(np.float64)
            else:
                out = value.reshape(-1)
            return out

        return st.sampled_from(kinds).map(derive)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return st.sampled_from([1, -1, 10**6]).map(lambda delta: value + delta)
    return st.just(value)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_checker_agrees_with_gymnasium(data):
    space = data.draw(
        spaces(("box", "discrete", "multi_binary", "multi_discrete", "dict", "tuple"), max_depth=1)
    )
    item = data.draw(items(space))
    check = make_checker(space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert check(item) == bool(space.contains(item))
        if not isinstance(space, (gs.Dict, gs.Tuple)):
            other = data.draw(_perturbed(item))
            assert check(other) == bool(space.contains(other)), (space, other)


@pytest.mark.parametrize(
    ("space", "item"),
    [
        (gs.Discrete(3), np.uint64(1)),
        (gs.Discrete(3, dtype=np.uint8), np.int64(1)),
        (gs.Discrete(3, dtype=np.int32), np.int64(1)),
    ],
    ids=["uint64_into_int64", "int64_into_uint8", "int64_into_int32"],
)
def test_discrete_checker_agrees_with_contains_on_numpy_integers(space, item):
    assert make_checker(space)(item) == space.contains(item)
