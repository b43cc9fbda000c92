import doctest
import importlib
import json
import warnings
from collections import OrderedDict

import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.spaces import space_from_dict, space_to_dict

INF = np.inf

SPACES = {
    "box_f32": gs.Box(-1.0, 1.0, (3,), np.float32),
    "box_inf_f64": gs.Box(-INF, INF, (2, 3), np.float64),
    "box_mixed_inf_f32": gs.Box(
        np.array([-1.0, -INF], np.float32), np.array([INF, 2.0], np.float32), dtype=np.float32
    ),
    "box_f16": gs.Box(-0.5, 0.25, (2,), np.float16),
    "box_scalar": gs.Box(0.0, 1.0, (), np.float32),
    "box_uint8_image": gs.Box(0, 255, (4, 4, 3), np.uint8),
    "box_int32_unbounded": gs.Box(-INF, INF, (2,), np.int32),
    "box_int64_half_bounded": gs.Box(0, INF, (2,), np.int64),
    "box_uint64_max": gs.Box(0, 2**64 - 1, (2,), np.uint64),
    "box_bool": gs.Box(0, 1, (2,), np.bool_),
    "box_empty": gs.Box(0.0, 1.0, (0,), np.float32),
    "discrete": gs.Discrete(4),
    "discrete_start": gs.Discrete(5, start=-2),
    "discrete_int32": gs.Discrete(3, start=7, dtype=np.int32),
    "multi_discrete": gs.MultiDiscrete([2, 3, 4]),
    "multi_discrete_start_2d": gs.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 0], [0, -1]]),
    "multi_discrete_int8": gs.MultiDiscrete([3, 3], dtype=np.int8),
    "multi_binary_int": gs.MultiBinary(5),
    "multi_binary_shape": gs.MultiBinary([2, 3]),
    "text": gs.Text(8),
    "text_charset_order": gs.Text(5, min_length=0, charset="zyxé"),
    "dict_unsorted": gs.Dict(OrderedDict(b=gs.Discrete(2), a=gs.Box(0, 1, (2,)))),
    "dict_nested": gs.Dict(
        {
            "pos": gs.Box(-INF, INF, (3,)),
            "inner": gs.Dict({"k": gs.Discrete(3, start=1), "t": gs.Tuple([gs.MultiBinary(2)])}),
        }
    ),
    "tuple_nested": gs.Tuple(
        [
            gs.Discrete(2),
            gs.Tuple([gs.Box(0, 1), gs.MultiDiscrete([2, 2])]),
            gs.Dict({"x": gs.Text(3)}),
        ]
    ),
    "sequence": gs.Sequence(gs.Discrete(3)),
    "sequence_stack": gs.Sequence(gs.Box(0, 1, (2,)), stack=True),
    "graph_no_edges": gs.Graph(gs.Box(0, 1, (2,)), None),
    "graph_edges": gs.Graph(gs.Discrete(3), gs.Box(-1, 1, (1,))),
    "one_of": gs.OneOf([gs.Discrete(2), gs.Box(0, 1, (2,))]),
}


def _assert_same_space(a: gs.Space, b: gs.Space) -> None:
    """Stricter than ``==``: Box compares bounds with allclose, we want them exact."""
    assert type(a) is type(b)
    assert a == b
    if isinstance(a, gs.Box):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.low, b.low)
        np.testing.assert_array_equal(a.high, b.high)
        np.testing.assert_array_equal(a.bounded_below, b.bounded_below)
        np.testing.assert_array_equal(a.bounded_above, b.bounded_above)
    elif isinstance(a, gs.Dict):
        assert list(a.spaces) == list(b.spaces)
        for key in a.spaces:
            _assert_same_space(a[key], b[key])
    elif isinstance(a, (gs.Tuple, gs.OneOf)):
        for x, y in zip(a.spaces, b.spaces, strict=True):
            _assert_same_space(x, y)
    elif isinstance(a, gs.Text):
        assert a.character_list == b.character_list
    elif isinstance(a, gs.Discrete):
        assert a.dtype == b.dtype
    elif isinstance(a, gs.MultiDiscrete):
        np.testing.assert_array_equal(a.start, b.start)


def _json_round_trip(space: gs.Space) -> gs.Space:
    text = json.dumps(space_to_dict(space), allow_nan=False)
    return space_from_dict(json.loads(text))


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_round_trip_through_json(space):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. gymnasium's precision-lowering warning
        _assert_same_space(_json_round_trip(space), space)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_dict_has_type_and_no_seed(space):
    d = space_to_dict(space)
    assert d["type"] == type(space).__name__
    assert "seed" not in json.dumps(d)


def test_none_passthrough():
    assert space_to_dict(None) is None
    assert space_from_dict(None) is None


def test_infinite_bounds_are_strings():
    d = space_to_dict(gs.Box(-INF, INF, (2,)))
    assert d["low"] == ["-inf", "-inf"] and d["high"] == ["inf", "inf"]


def test_int_box_keeps_unboundedness():
    space = gs.Box(-INF, 5, (2,), np.int32)
    back = _json_round_trip(space)
    assert not back.is_bounded("below") and back.is_bounded("above")


def test_dict_key_order_kept():
    space = SPACES["dict_unsorted"]
    assert list(_json_round_trip(space).spaces) == ["b", "a"]


def test_unknown_space_type_to_dict_raises():
    class Custom(gs.Space):
        pass

    with pytest.raises(TypeError, match="Custom"):
        space_to_dict(Custom())


def _deep_tuple(depth):
    d = {"type": "Discrete", "n": 2, "start": 0}
    for _ in range(depth):
        d = {"type": "Tuple", "spaces": [d]}
    return d


BAD = {
    "not_a_dict": ([1, 2], "expected a dict"),
    "no_type": ({"n": 3}, "unknown space type"),
    "unknown_type": ({"type": "__import__('os')"}, "unknown space type"),
    "type_not_str": ({"type": 3}, "unknown space type"),
    "discrete_missing_n": ({"type": "Discrete", "start": 0}, "missing field 'n'"),
    "discrete_n_str": ({"type": "Discrete", "n": "3", "start": 0}, "must be an int"),
    "discrete_n_bool": ({"type": "Discrete", "n": True, "start": 0}, "must be an int"),
    "discrete_n_zero": ({"type": "Discrete", "n": 0, "start": 0}, "positive"),
    "discrete_bad_dtype": (
        {"type": "Discrete", "n": 3, "start": 0, "dtype": "object"},
        "not allowed",
    ),
    "discrete_garbage_dtype": (
        {"type": "Discrete", "n": 3, "start": 0, "dtype": "no such dtype"},
        "unknown dtype",
    ),
    "box_wrong_count": (
        {"type": "Box", "shape": [2], "dtype": "float32", "low": [0.0], "high": [1.0, 1.0]},
        "expected 2 values",
    ),
    "box_bad_marker": (
        {"type": "Box", "shape": [1], "dtype": "float32", "low": ["1e3"], "high": [1.0]},
        "does not fit",
    ),
    "box_nested_list": (
        {"type": "Box", "shape": [1], "dtype": "float32", "low": [[0.0]], "high": [1.0]},
        "does not fit",
    ),
    "box_structured_dtype": (
        {"type": "Box", "shape": [1], "dtype": "f4,i4", "low": [0], "high": [1]},
        "not allowed",
    ),
    "box_negative_shape": (
        {"type": "Box", "shape": [-1], "dtype": "float32", "low": [], "high": []},
        "non-negative",
    ),
    "box_uint8_overflow": (
        {"type": "Box", "shape": [1], "dtype": "uint8", "low": [0], "high": [300]},
        "out of range",
    ),
    "box_int_float_value": (
        {"type": "Box", "shape": [1], "dtype": "int32", "low": [0.5], "high": [3]},
        "does not fit",
    ),
    "box_low_above_high": (
        {"type": "Box", "shape": [1], "dtype": "float32", "low": [2.0], "high": [1.0]},
        None,
    ),
    "multi_discrete_ragged": (
        {"type": "MultiDiscrete", "nvec": [[2], [3, 4]], "start": [0, 0], "dtype": "int64"},
        None,
    ),
    "multi_discrete_start_shape": (
        {"type": "MultiDiscrete", "nvec": [2, 3], "start": [0], "dtype": "int64"},
        "shape",
    ),
    "text_charset_not_str": (
        {"type": "Text", "max_length": 3, "min_length": 1, "charset": ["a"]},
        "charset",
    ),
    "dict_pair_malformed": ({"type": "Dict", "spaces": [["a"]]}, "pair"),
    "dict_as_object": ({"type": "Dict", "spaces": {"a": {"type": "Discrete"}}}, "must be a list"),
    "dict_duplicate_keys": (
        {
            "type": "Dict",
            "spaces": [
                ["a", {"type": "Discrete", "n": 2, "start": 0}],
                ["a", {"type": "Discrete", "n": 3, "start": 0}],
            ],
        },
        "duplicate",
    ),
    "tuple_bad_child": ({"type": "Tuple", "spaces": [{"type": "Nope"}]}, r"space<Tuple>\[0\]"),
    "sequence_stack_not_bool": (
        {"type": "Sequence", "feature_space": {"type": "Discrete", "n": 2, "start": 0}, "stack": 1},
        "bool",
    ),
    "graph_bad_node": ({"type": "Graph", "node_space": None, "edge_space": None}, "node_space"),
    "multi_discrete_wraps_its_dtype": (
        {"type": "MultiDiscrete", "nvec": [300], "start": [0], "dtype": "uint8"},
        "outside uint8",
    ),
    "multi_discrete_start_plus_nvec_beyond_int64": (
        {"type": "MultiDiscrete", "nvec": [10], "start": [2**63 - 5], "dtype": "int64"},
        "outside int64",
    ),
    "box_bound_true_among_numbers": (
        {"type": "Box", "shape": [2], "dtype": "float32", "low": [True, 0], "high": [1, 1]},
        "does not fit",
    ),
    "nested_too_deeply": (_deep_tuple(1500), "too deeply|nested|space"),
}


@pytest.mark.parametrize(("d", "match"), BAD.values(), ids=BAD.keys())
def test_malformed_dicts_raise_value_error(d, match):
    with pytest.raises(ValueError, match=match):
        space_from_dict(d)


# -- property tests ------------------------------------------------------------------------

_finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@st.composite
def _boxes(draw):
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8]))
    if np.dtype(dtype).kind == "f":
        low = draw(st.one_of(_finite, st.just(-INF)))
        high = draw(st.one_of(_finite, st.just(INF)))
        low, high = min(low, high), max(low, high)
    else:
        info = np.iinfo(dtype)
        low = draw(st.integers(int(info.min), int(info.max)))
        high = draw(st.integers(low, int(info.max)))
    return gs.Box(low, high, shape, dtype)


_leaves = st.one_of(
    _boxes(),
    st.builds(gs.Discrete, st.integers(1, 50), start=st.integers(-10, 10)),
    st.builds(
        lambda nvec, s: gs.MultiDiscrete(nvec, start=[s] * len(nvec)),
        st.lists(st.integers(1, 6), min_size=1, max_size=4),
        st.integers(-3, 3),
    ),
    st.builds(gs.MultiBinary, st.integers(1, 5)),
    st.builds(lambda m: gs.Text(m, min_length=0), st.integers(1, 10)),
)

random_spaces = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.builds(gs.Tuple, st.lists(children, min_size=1, max_size=3)),
        st.builds(
            lambda d: gs.Dict(OrderedDict(d)),  # unsorted keys (sort_keys= is gymnasium 1.3+)
            st.dictionaries(
                st.text("abcxyz", min_size=1, max_size=3), children, min_size=1, max_size=3
            ),
        ),
        st.builds(gs.Sequence, children, stack=st.booleans()),
        st.builds(gs.OneOf, st.lists(children, min_size=1, max_size=3)),
    ),
    max_leaves=6,
)


@settings(max_examples=75, deadline=None)
@given(random_spaces)
def test_round_trip_property(space):
    _assert_same_space(_json_round_trip(space), space)


# import_module, not attribute access: the package re-exports the function ``one_hot``,
# which shadows the submodule of the same name.
MODULES = [
    importlib.import_module(f"episodes.spaces.{name}")
    for name in ("serialization", "one_hot", "filler", "batching")
]


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in MODULES])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_negative_infinite_float_bounds_are_json_safe():
    box = gs.Box(low=np.array([-np.inf, 0.0]), high=np.array([1.0, np.inf]), dtype=np.float64)
    box.high[0] = -np.inf  # -inf in high too: an empty interval, but a legal array
    encoded = json.dumps(space_to_dict(box), allow_nan=False)
    back = space_from_dict(json.loads(encoded))
    np.testing.assert_array_equal(back.low, box.low)
    np.testing.assert_array_equal(back.high, box.high)


@pytest.mark.parametrize(
    "space",
    [
        gs.Dict({"a": gs.Discrete(3, start=1), "b": gs.Box(-1.0, 1.0, (2,))}),
        gs.Tuple([gs.MultiDiscrete([2, 3]), gs.MultiBinary(4)]),
        gs.Box(low=np.array([-np.inf, 0.0]), high=np.array([1.0, np.inf])),
    ],
    ids=["dict", "tuple", "infinite box"],
)
def test_equal_dicts_decode_to_one_shared_space(space):
    # What a reader parses is a fresh dict each time: equal, never the same object.
    encoded = space_to_dict(space)
    decoded = [space_from_dict(json.loads(json.dumps(encoded))) for _ in range(3)]
    assert decoded[0] == space
    assert all(d is decoded[0] for d in decoded)
    assert space_from_dict(encoded) is decoded[0]
