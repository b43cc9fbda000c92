"""Spaces fixes of session 16: bounded space decoding, checkers equal to gymnasium's contains,
by-value comparison of unsigned leaves, clean errors for unstackable spaces and odd items.
"""

from __future__ import annotations

import warnings

import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.spaces import (
    batch,
    batch_in_space,
    equal_in_space,
    filler_batch,
    space_from_dict,
    space_to_dict,
    unbatch,
)
from episodes.spaces.contains import make_checker
from episodes.spaces.space_limits import MAX_COPIED_SPACES

DISCRETE = {"type": "Discrete", "n": 2, "start": 0}


def _graph_chain(depth):
    d = DISCRETE
    for _ in range(depth):
        d = {"type": "Graph", "node_space": DISCRETE, "edge_space": d}
    return d


def _stacked_chain(depth):
    d = DISCRETE
    for _ in range(depth):
        d = {"type": "Sequence", "stack": True, "feature_space": d}
    return d


def _sequence_of_graphs(depth):
    d = DISCRETE
    for _ in range(depth):
        graph = {"type": "Graph", "node_space": DISCRETE, "edge_space": d}
        d = {"type": "Sequence", "stack": True, "feature_space": graph}
    return d


def _tuple_of(n, sub=DISCRETE):
    return {"type": "Tuple", "spaces": [sub] * n}


@pytest.fixture
def built(monkeypatch):
    """Counts the Graph and Sequence spaces gymnasium builds (copies included)."""
    counts = {"spaces": 0}
    for cls in (gs.Graph, gs.Sequence):
        original = cls.__init__

        def counting(self, *args, _original=original, **kwargs):
            counts["spaces"] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    return counts


# ---------------------------------------------------------------- 1: bounded space decoding
COSTLY = {
    "graphs_through_edge_space_16": _graph_chain(16),
    "graphs_through_edge_space_32": _graph_chain(32),
    "stacked_sequences_16": _stacked_chain(16),
    "stacked_sequences_of_graphs_8": _sequence_of_graphs(8),
    "stacked_sequence_of_a_wide_tuple": {
        "type": "Sequence",
        "stack": True,
        "feature_space": _tuple_of(MAX_COPIED_SPACES + 1),
    },
    "many_small_stacked_chains": _tuple_of(100, _stacked_chain(3)),
}


@pytest.mark.parametrize("encoded", COSTLY.values(), ids=COSTLY.keys())
def test_decoder_refuses_spaces_whose_copies_explode_before_building_any(encoded, built):
    with pytest.raises(ValueError, match="would copy"):
        space_from_dict(encoded)
    assert built["spaces"] == 0  # refused before gymnasium built (and copied) anything


def test_episode_state_with_a_costly_space_is_refused():
    ep = SingleAgentEpisode(observations=[0], observation_space=gs.Discrete(2))
    state = ep.get_state()
    key = next(k for k in state if "observation_space" in k)
    state[key] = _graph_chain(15)
    with pytest.raises(ValueError, match="would copy"):
        SingleAgentEpisode.from_state(state)


ACCEPTED = {
    "graph_of_box_and_discrete": {"type": "Graph", "node_space": DISCRETE, "edge_space": None},
    "graphs_through_edge_space_6": _graph_chain(6),
    "stacked_sequences_7": _stacked_chain(7),
    "stacked_sequence_of_a_tuple_of_500": {
        "type": "Sequence",
        "stack": True,
        "feature_space": _tuple_of(500),
    },
    "tuple_of_200_stacked_sequences": _tuple_of(200, _stacked_chain(1)),
}


@pytest.mark.gymnasium_1_4
@pytest.mark.parametrize("encoded", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_spaces_within_the_budget_round_trip(encoded, built):
    space = space_from_dict(encoded)
    # gymnasium's own copies stay within the budget too (counted: no timing involved).
    assert built["spaces"] <= 2 * MAX_COPIED_SPACES
    assert space_from_dict(space_to_dict(space)) == space


@pytest.mark.gymnasium_1_4
def test_encoder_refuses_what_the_decoder_would():
    chain = gs.Discrete(2)
    for _ in range(9):
        chain = gs.Graph(node_space=gs.Discrete(2), edge_space=chain)
    with pytest.raises(TypeError, match="would copy"):
        space_to_dict(chain)


@pytest.mark.parametrize(
    "encoded",
    [
        {"type": "MultiBinary", "n": 2**70},
        {"type": "MultiBinary", "n": [2**40, 2**40]},
        {"type": "Text", "max_length": 2**71, "min_length": 2**70, "charset": "ab"},
    ],
    ids=["multibinary_2_70", "multibinary_2_80_elements", "text_min_length_2_70"],
)
def test_decoder_refuses_sizes_no_array_holds(encoded):
    with pytest.raises(ValueError, match="more than any array|longer than any string"):
        space_from_dict(encoded)


@pytest.mark.parametrize("max_length", [10**9, 2**70], ids=["10_9", "2_70"])
def test_a_text_of_any_max_length_still_decodes(max_length):
    # An unbounded Text: its strings read in list mode (a numpy'd column refuses it).
    text = gs.Text(max_length, min_length=0, charset="ab")
    assert space_from_dict(space_to_dict(text)) == text


# ---------------------------------------------------------------- 2: unsigned leaves by value
UNSIGNED = {
    "uint8_box_list_vs_row": (gs.Box(0, 255, (2,), np.uint8), [21, 60], np.uint8([21, 60]), True),
    "uint16_multidiscrete": (
        gs.MultiDiscrete([3, 3], dtype=np.uint16),
        [1, 2],
        np.uint16([1, 2]),
        True,
    ),
    "uint8_other_values": (gs.Box(0, 255, (2,), np.uint8), [21, 61], np.uint8([21, 60]), False),
    "negative_never_equals_unsigned": (
        gs.Box(0, 255, (2,), np.uint8),
        [-1, 0],
        np.uint8([255, 0]),
        False,
    ),
    "negative_vs_uint64_max": (
        gs.Box(0, 2**63, (1,), np.uint64),
        np.int64([-1]),
        np.uint64([2**64 - 1]),
        False,
    ),
    "wrapped_256_is_not_0": (gs.Box(0, 255, (1,), np.uint8), [256], np.uint8([0]), False),
    "float_is_not_cast_to_uint": (gs.Box(0, 255, (1,), np.uint8), [0.5], np.uint8([0]), False),
}


@pytest.mark.parametrize("space, a, b, expected", UNSIGNED.values(), ids=UNSIGNED.keys())
def test_equal_in_space_compares_ints_by_value_whatever_the_signedness(space, a, b, expected):
    assert equal_in_space(a, b, space) is expected
    assert equal_in_space(b, a, space) is expected


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_concat_joins_unsigned_observations_equal_by_value(dtype):
    box = gs.Box(0, 100, (2,), dtype)
    common = {"observation_space": box, "action_space": gs.Discrete(2), "len_lookback_buffer": 0}
    a = SingleAgentEpisode(
        id_="e", observations=[[1, 2], [3, 4]], actions=[0], rewards=[1.0], **common
    )
    b = SingleAgentEpisode(
        id_="e",
        observations=[np.array([3, 4], dtype), np.array([5, 6], dtype)],
        actions=[1],
        rewards=[1.0],
        t_started=1,
        **common,
    )
    a.concat_episode(b)
    assert len(a) == 2


# ---------------------------------------------------------------- 3-5: checkers = contains
F32_UNIT = gs.Box(-1.0, 1.0, (), np.float32)
CHECKER_CASES = {
    "float64_rounds_into_float32_box": (F32_UNIT, np.float64(1.0 + 1e-9), True),
    "python_float_rounds_into_float32_box": (F32_UNIT, 1.0 + 1e-9, True),
    "python_float_beyond_rounding": (F32_UNIT, 1.0 + 1e-6, False),
    "two_is_true_in_a_bool_box": (gs.Box(0, 1, (), np.bool_), 2, True),
    "2.5_casts_to_2_in_uint8": (gs.Box(0, 10, (), np.uint8), 2.5, True),
    "10_5_casts_to_10_in_uint8": (gs.Box(0, 10, (), np.uint8), 10.5, True),
    "11_is_out_of_uint8_box": (gs.Box(0, 10, (), np.uint8), 11.0, False),
    "huge_int_in_unbounded_float_box": (gs.Box(-np.inf, np.inf, (), np.float32), 10**400, False),
    "huge_int_in_float64_box": (gs.Box(-np.inf, np.inf, (), np.float64), 10**400, False),
    "1e300_overflows_to_inf_in_float32": (gs.Box(-np.inf, np.inf, (), np.float32), 1e300, True),
    "nan_never_in": (F32_UNIT, float("nan"), False),
    "nan_into_int_box": (gs.Box(0, 10, (), np.int64), float("nan"), False),
    "int_beyond_2_24_rounds_in_float32": (
        gs.Box(0, 2.0**24, (), np.float32),
        2**24 + 1,
        True,
    ),
    "int64_row_of_two_rounds_to_float64_bound": (
        gs.Box(0, 2.0**53, (2,), np.float64),
        np.array([2**53 + 1, 0], np.int64),
        True,
    ),
    "int64_row_of_twenty_rounds_to_float64_bound": (
        gs.Box(0, 2.0**53, (20,), np.float64),
        np.array([2**53 + 1] + [0] * 19, np.int64),
        True,
    ),
    "tuple_of_a_0d_array": (gs.Tuple([gs.Discrete(2), gs.Discrete(3)]), np.array(5), False),
    "one_element_row_for_a_scalar_box": (F32_UNIT, [0.5], False),
}


@pytest.mark.gymnasium_1_4
@pytest.mark.parametrize("space, item, expected", CHECKER_CASES.values(), ids=CHECKER_CASES.keys())
def test_checker_answers_what_gymnasium_answers(space, item, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not isinstance(space, gs.Tuple):  # gymnasium's Tuple raises on a 0-d array
            assert bool(space.contains(item)) is expected
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the checker warns of nothing (overflow, casting)
            assert make_checker(space)(item) is expected


_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int64, np.uint64, np.bool_]


@st.composite
def _box_and_item(draw):
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    shape = draw(st.sampled_from([(), (2,), (20,)]))
    if dtype.kind == "b":
        box = gs.Box(0, 1, shape, dtype)
    elif dtype.kind == "f":
        big = 2.0**53 if dtype.itemsize == 8 else 2.0**24 if dtype.itemsize == 4 else 2.0**11
        low = draw(st.sampled_from([-np.inf, -1.0, 0.0, -big]))
        high = draw(st.sampled_from([np.inf, 1.0, big]))
        box = gs.Box(low, high, shape, dtype)
    else:
        info = np.iinfo(dtype)
        low = draw(st.sampled_from([int(info.min), 0]))
        high = draw(st.sampled_from([int(info.max), 10]))
        box = gs.Box(low, high, shape, dtype)
    numbers = st.one_of(
        st.integers(-(2**65), 2**65),
        st.sampled_from([10**400, -(10**400), 2**53 + 1, 2**24 + 1, 255, 256, -1, 0, 1, 2]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([1.0 + 1e-9, 1.0 - 1e-9, 10.5, 2.5, -0.5, 1e300, 65520.0]),
        st.booleans(),
    )
    scalar_kinds = st.sampled_from(
        ["python", "float64", "float32", "int64", "uint8", "0d", "list1", "space_dtype"]
    )

    def as_kind(value, kind):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                if kind == "python":
                    return value
                if kind in ("float64", "float32"):
                    return np.dtype(kind).type(float(value))
                if kind in ("int64", "uint8"):
                    return np.array(value).astype(kind)[()]
                if kind == "0d":
                    return np.array(value)
                if kind == "list1":
                    return [value]
                return np.array(value).astype(dtype)[()]
            except (OverflowError, ValueError, TypeError):
                return value

    if shape == ():
        return box, as_kind(draw(numbers), draw(scalar_kinds))
    size = shape[0]
    values = draw(st.lists(numbers, min_size=size, max_size=size))
    row_kind = draw(st.sampled_from(["list", "int64", "float64", "space_dtype"]))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            if row_kind == "list":
                return box, values
            target = dtype if row_kind == "space_dtype" else np.dtype(row_kind)
            return box, np.array(values).astype(target)
        except (OverflowError, ValueError, TypeError):
            return box, values


@pytest.mark.gymnasium_1_4
@settings(max_examples=600, deadline=None)
@given(case=_box_and_item())
def test_box_checker_agrees_with_gymnasium_on_numbers_rows_and_near_misses(case):
    box, item = case
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        expected = bool(box.contains(item))
        assert make_checker(box)(item) is expected, (box, item)


def _numpyd(space, first, action_space=None):
    ep = SingleAgentEpisode(observation_space=space, action_space=action_space or gs.Discrete(2))
    ep.add_env_reset(first)
    ep.add_env_step(first, 0 if action_space is None else first, 1.0)
    return ep.to_numpy()


def test_numpyd_episode_takes_a_step_gymnasium_takes():
    ep = _numpyd(F32_UNIT, np.float32(0.0))
    ep.add_env_step(np.float64(1.0 + 1e-9), 0, 1.0)  # RLlib 2.60 takes it too
    assert ep.get_observations(-1) == np.float32(1.0)


def test_a_lossy_value_in_the_space_is_the_columns_clear_error():
    ep = _numpyd(gs.Box(0, 10, (), np.uint8), np.uint8(1))
    with pytest.raises(ValueError, match="observations cannot be stored"):
        ep.add_env_step(2.5, 0, 1.0)  # in the space (gymnasium casts), not in a uint8 column
    assert len(ep) == 1


OVERFLOWING = {
    "add_env_step": lambda ep, buf: ep.add_env_step(10**400, 0, 1.0),
    "set_rewards": lambda ep, buf: ep.set_rewards(new_data=10**400, at_indices=0),
    "set_observations": lambda ep, buf: ep.set_observations(new_data=10**400, at_indices=0),
    "buffer_set": lambda ep, buf: buf.set(10**400, at_indices=0),
}


@pytest.mark.parametrize("write", OVERFLOWING.values(), ids=OVERFLOWING.keys())
def test_int_beyond_float_range_is_a_value_error_and_changes_nothing(write):
    box = gs.Box(-np.inf, np.inf, (), np.float32)
    ep = _numpyd(box, np.float32(0.5))
    buf = InfiniteLookbackBuffer([np.float32(0), np.float32(1)], space=box)
    buf.finalize()
    with pytest.raises(ValueError, match="not in the"):
        write(ep, buf)
    assert len(ep) == 1 and ep.get_rewards().tolist() == [1.0]
    assert ep.get_observations().tolist() == [0.5, 0.5]
    assert buf.get().tolist() == [0.0, 1.0]


TUPLE = gs.Tuple([gs.Discrete(2), gs.Discrete(3)])
ZERO_D = {
    "observation": lambda ep: ep.add_env_step(np.array(5), (0, 0), 1.0),
    "action": lambda ep: ep.add_env_step((0, 0), np.array(5), 1.0),
    "set_observations": lambda ep: ep.set_observations(new_data=np.array(5), at_indices=0),
}


@pytest.mark.parametrize("write", ZERO_D.values(), ids=ZERO_D.keys())
def test_0d_array_for_a_tuple_space_is_a_value_error(write):
    ep = _numpyd(TUPLE, (0, 1), action_space=TUPLE)
    with pytest.raises(ValueError, match="not in the"):
        write(ep)
    assert len(ep) == 1


def test_0d_array_for_a_tuple_under_a_dict_is_a_value_error():
    buf = InfiniteLookbackBuffer([{"t": (0, 1)}], space=gs.Dict({"t": TUPLE}))
    buf.finalize()
    with pytest.raises(ValueError, match="not in the buffer's space"):
        buf.set({"t": np.array(1)}, at_indices=0)
    assert [int(x) for x in buf.get(0)["t"]] == [0, 1]


# ---------------------------------------------------------------- 6: Tuple items as arrays
@pytest.mark.parametrize("indices", [[-3, 0], [0, -3]], ids=["filler_first", "item_first"])
def test_padded_index_read_of_array_tuple_items_is_the_same_before_and_after_to_numpy(indices):
    ep = SingleAgentEpisode(observation_space=TUPLE, action_space=gs.Discrete(2))
    ep.add_env_reset(np.array([1, 2]))
    ep.add_env_step(np.array([0, 1]), 0, 1.0)
    listed = ep.get_observations(indices, fill=0)
    numpyd = ep.to_numpy().get_observations(indices, fill=0)
    # The numpy'd column is the Tuple space's tuple of arrays (an array item's rows its parts).
    assert isinstance(numpyd, tuple)
    assert [[int(x) for x in row] for row in zip(*numpyd)] == [
        [int(x) for x in item] for item in listed
    ]
    ep.add_env_step(np.array([1, 0]), 0, 1.0)  # array items still append after to_numpy
    assert [int(x) for x in ep.get_observations(-1)] == [1, 0]


def test_batch_stacks_array_rows_among_tuples_whatever_comes_first():
    assert batch([(0, 0), np.array([1, 2])]).tolist() == [[0, 0], [1, 2]]
    assert batch([np.array([1, 2]), (0, 0)]).tolist() == [[1, 2], [0, 0]]
    with pytest.raises(ValueError, match="differing structure"):
        batch([(0, 0), np.array([1, 2, 3])])


# ---------------------------------------------------------------- 7: int and str Dict keys
MIXED = gs.Dict([(2, gs.Discrete(2)), ("x", gs.Discrete(3))])


def test_mixed_key_dicts_are_refused_naming_the_keys():
    with pytest.raises(ValueError, match=r"keys \[2, 'x'\] do not sort"):
        unbatch({2: np.array([1, 0]), "x": np.array([2, 1])})
    with pytest.raises(ValueError, match=r"keys \[2, 'x'\]"):
        batch_in_space([{2: 1, "x": 2}], MIXED)
    with pytest.raises(ValueError, match=r"keys \[2, 'x'\]"):
        batch([{2: 1, "x": 2}, {2: 0, "x": 1}])


@pytest.mark.parametrize("steps", [0, 1], ids=["empty", "one_step"])
def test_to_numpy_refuses_a_mixed_key_space_and_stays_in_list_mode(steps):
    ep = SingleAgentEpisode(observation_space=MIXED, action_space=gs.Discrete(2))
    if steps:
        ep.add_env_reset({2: 0, "x": 0})
        ep.add_env_step({2: 1, "x": 2}, 0, 1.0)
    with pytest.raises(ValueError, match=r"to_numpy: observations .*keys \[2, 'x'\]"):
        ep.to_numpy()
    assert not ep.is_numpy


# ---------------------------------------------------------------- 8: Text wider than numpy's
WIDE_TEXT = gs.Text(10**9, min_length=0, charset="ab")


@pytest.mark.parametrize("n", [0, 2])
def test_filler_batch_of_a_too_wide_text_is_a_memory_error(n):
    with pytest.raises(MemoryError, match="no array holds"):
        filler_batch(WIDE_TEXT, "", n)


@pytest.mark.parametrize("items", [[], ["ab"]], ids=["empty", "one"])
def test_batch_in_space_of_a_too_wide_text_is_a_value_error(items):
    with pytest.raises(ValueError, match="1000000000"):
        batch_in_space(items, WIDE_TEXT)


def test_to_numpy_with_a_too_wide_text_space_is_a_value_error():
    ep = SingleAgentEpisode(observation_space=WIDE_TEXT, action_space=gs.Discrete(2))
    with pytest.raises(ValueError, match="to_numpy: observations cannot be stacked"):
        ep.to_numpy()
    assert not ep.is_numpy
