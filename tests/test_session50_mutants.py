"""Behaviour that hand-made mutants of ``episodes.spaces.filler`` and the other space, buffer,
rollout and converter helpers showed no test pinned (session 50).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
"""

from __future__ import annotations

import gc
import warnings
from decimal import Decimal
from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

from episodes.buffer.array_batches import ArrayBatchOps, from_items, join, write_leaves
from episodes.buffer.plain_arrays import holds_masked, native_leaves, plain_leaves, same_record
from episodes.spaces import (
    batch_in_space,
    equal_in_space,
    filler_batch,
    filler_item,
    nest_as_space,
    one_hot,
)
from episodes.spaces.contains import checker_for, make_checker
from episodes.spaces.filler import filler_leaf

# --- episodes.spaces.filler ------------------------------------------------------------------


@pytest.mark.parametrize(
    "space", [None, gym.spaces.Discrete(3), gym.spaces.Text(4)], ids=["none", "discrete", "text"]
)
def test_a_negative_count_of_fillers_is_refused_by_name(space):
    # mutant: ``n < -1`` let -1 through to numpy, whose error names no argument.
    fill = "a" if isinstance(space, gym.spaces.Text) else 0
    with pytest.raises(ValueError, match="n must be non-negative, got -1"):
        filler_batch(space, fill, -1)


@pytest.mark.parametrize(
    ("space", "fill"),
    [
        (None, "x\x00"),
        (None, b"x\x00"),
        (None, {"a": 0, "t": "x\x00"}),
        (gym.spaces.Text(5), "x\x00"),
        (gym.spaces.Dict({"t": gym.spaces.Text(5)}), "x\x00"),
    ],
    ids=["none_str", "none_bytes", "none_dict", "text", "dict_of_text"],
)
def test_a_batch_of_fillers_refuses_a_fill_ending_in_nul(space, fill):
    # mutants: no NUL check in the space-less repeat, bytes not checked, none for Text leaves.
    with pytest.raises(ValueError, match="ends in NUL"):
        filler_batch(space, fill, 2)


def test_zero_fillers_of_a_nul_fill_are_fine():
    # Zero fillers hold no value to cut: the check is for reads that stack some.
    assert filler_batch(None, "x\x00", 0).shape == (0,)


def test_a_space_less_batch_owns_writable_rows():
    # mutant: the broadcast view returned as is (read-only, every row the same memory).
    out = filler_batch(None, np.zeros(2, np.float32), 3)
    assert out.flags.writeable and out.flags.owndata
    out[0, 0] = 5.0
    np.testing.assert_array_equal(out[1:], np.zeros((2, 2), np.float32))


@pytest.mark.parametrize(
    ("space", "fill", "n"),
    [
        (gym.spaces.Discrete(3), 0, 2**61),  # 2**61 items, yet 2**64 bytes
        (gym.spaces.Text(10), "a", 2**60),  # 40 bytes an item
        (gym.spaces.Text(0, min_length=0), "", 2**62),  # an empty text still takes 4 bytes
    ],
    ids=["int64", "text", "empty_text"],
)
def test_fillers_too_big_in_bytes_are_a_memory_error(space, fill, n):
    # mutants: the size check counting items not bytes; none for Text; a 0-wide Text dtype.
    with pytest.raises(MemoryError, match="do not fit in one array"):
        filler_batch(space, fill, n)


@pytest.mark.parametrize(
    ("shape", "fill"),
    [((1,), np.zeros(3)), ((2, 1), np.zeros((1, 2)))],
    ids=["wider", "crossed"],
)
def test_a_fill_not_shaped_like_an_item_says_so(shape, fill):
    # Shapes that broadcast with the item's, to a bigger shape. mutant: no such check, and
    # numpy's own error names no item shape.
    with pytest.raises(ValueError, match=r"does not fit an item of shape"):
        filler_leaf(shape, fill, np.float64)


@pytest.mark.parametrize("fill", [2, -1, 0.5], ids=["two", "minus_one", "half"])
def test_a_bool_leaf_refuses_numbers_other_than_0_and_1(fill):
    # mutant: bool leaves skipped in the "value changes" check (2 would pad with True).
    with pytest.raises(ValueError, match="the value changes in that dtype"):
        filler_leaf((2,), fill, np.bool_)
    assert filler_leaf((2,), 1, np.bool_).tolist() == [True, True]


@pytest.mark.parametrize(
    "fill",
    [Fraction(2**54 - 1, 2), Decimal("9007199254740991.5")],
    ids=["fraction", "decimal"],
)
def test_a_big_fraction_fill_is_its_nearest_float(fill):
    # 2**53 - 0.5 is not whole: its nearest float (2**53), not its truncation (2**53 - 1).
    # mutant: whole-looking floats taken as int(fill).
    out = filler_item(gym.spaces.Box(-1, 1, (), np.float64), fill)
    assert out.item() == 2.0**53


class _ComplexPair(gym.spaces.Space):
    """A space of one's own: two complex numbers an item."""

    def __init__(self):
        super().__init__(shape=(2,), dtype=np.complex64)

    def sample(self, mask=None, probability=None):
        return np.zeros(2, np.complex64)

    def contains(self, x):
        return True


def test_a_custom_space_of_complex_numbers_fills_as_a_box():
    # mutant: complex dtypes left out of the "fills as a Box" rule (the fill came back bare).
    item = filler_item(_ComplexPair(), 0)
    assert isinstance(item, np.ndarray) and item.dtype == np.complex64 and item.shape == (2,)
    assert filler_batch(_ComplexPair(), 1j, 3).shape == (3, 2)


# --- episodes.spaces.one_hot -----------------------------------------------------------------

_BIG_START = 2**63 - 3  # the top of int64: start + n overflows it


@pytest.mark.parametrize(
    ("value", "space", "message"),
    [
        ([2**70], gym.spaces.Discrete(3), "out of range"),  # mutant: "needs integer values"
        (np.array([1 + 0j]), gym.spaces.Discrete(3), "needs integer values"),  # mutant: TypeError
        (np.array([1.0], dtype=object), gym.spaces.Discrete(3), "needs integer values"),
        # Below start, yet int64 subtraction would wrap it to start + 3. mutant: no low check.
        (np.array([-(2**63)]), gym.spaces.Discrete(4, start=_BIG_START), "out of range"),
        (np.array([1]), gym.spaces.MultiDiscrete([2, 2, 2]), "expects values ending in shape"),
    ],
    ids=["int_beyond_64_bits", "complex", "object_floats", "wraps_below_start", "short_md"],
)
def test_one_hot_refuses_with_the_reason(value, space, message):
    with pytest.raises(ValueError, match=message):
        one_hot(value, space)


def test_a_multi_discrete_at_the_top_of_int64_encodes():
    # mutant: start + nvec summed in int64, which wrapped negative and refused every value.
    space = gym.spaces.MultiDiscrete([3, 2], start=[_BIG_START, 0])
    out = one_hot(np.array([[_BIG_START + 2, 1]], np.int64), space)
    np.testing.assert_array_equal(out, [[0, 0, 1, 0, 1]])


@pytest.mark.parametrize(
    ("value", "n"),
    [(np.zeros(0, np.int64), 2**62), (np.array([0]), 2**61)],
    ids=["no_rows", "one_row_of_2_to_61"],
)
def test_a_one_hot_batch_no_array_holds_is_a_memory_error(value, n):
    # mutants: zero rows counted as none (numpy's "too big" ValueError), slots not bytes.
    with pytest.raises(MemoryError, match="do not fit in one array"):
        one_hot(value, gym.spaces.Discrete(n))


# --- episodes.spaces.contains ----------------------------------------------------------------

F32 = np.float32
SCALAR_BOX = gym.spaces.Box(-1.0, 1.0, (), F32)
CONTAINS_CASES = {
    # mutant: an in-range Python float in a float Box answered False.
    "float_in_scalar_box": (SCALAR_BOX, 0.5, True),
    "float_out_of_scalar_box": (SCALAR_BOX, 1.5, False),
    # gymnasium casts: 2**24 + 1 is 2**24 in float32. mutants: ints compared exactly.
    "int_rounded_into_float32": (gym.spaces.Box(0, 2**24, (), F32), 2**24 + 1, True),
    "float_rounded_into_float32": (gym.spaces.Box(0, 1, (), F32), 1 + 1e-9, True),
    # gymnasium compares an int64 row in float64: 2**53 + 1 is the bound. mutant: no cast.
    "int64_row_rounded_into_float64": (
        gym.spaces.Box(0, 2**53, (2,), np.float64),
        np.array([2**53 + 1, 0], np.int64),
        True,
    ),
    # No bound to compare a NaN against (a big box skips the unbounded ones). mutant: no NaN
    # check on the numpy path.
    "big_unbounded_nan": (
        gym.spaces.Box(-np.inf, np.inf, (5, 5), F32),
        np.full((5, 5), np.nan, F32),
        False,
    ),
    # One low bound, two high ones. mutant: the box taken as uniform from its low bounds.
    "uniform_low_per_element_high": (
        gym.spaces.Box(np.zeros(2, F32), np.array([1.0, 2.0], F32)),
        np.array([0.0, 1.5], F32),
        True,
    ),
    # A 0-d array has no parts (gymnasium's tuple() of it raises). mutant: taken as a Tuple's.
    "zero_dim_array_for_a_tuple": (gym.spaces.Tuple([gym.spaces.Discrete(2)]), np.array(0), None),
    "numpy_float32_scalar": (SCALAR_BOX, np.float32(0.5), True),
    "numpy_float32_scalar_out": (SCALAR_BOX, np.float32(2.0), False),
}


@pytest.mark.parametrize(("space", "item", "expected"), CONTAINS_CASES.values(), ids=CONTAINS_CASES)
def test_a_checker_answers_as_gymnasium(space, item, expected):
    if expected is None:  # gymnasium raises: the checker says no
        with pytest.raises(TypeError):
            space.contains(item)
        expected = False
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert bool(space.contains(item)) is expected  # the table agrees with gymnasium
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and the checker casts without numpy's warnings
        assert make_checker(space)(item) is expected


def test_a_checker_casts_a_huge_float_without_warning():
    # 1e300 is inf in float32, as gymnasium's cast makes it. mutant: cast with numpy's
    # overflow warning.
    space = gym.spaces.Box(-np.inf, np.inf, (), F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_checker(space)(1e300) is True
        assert make_checker(gym.spaces.Box(0, 1, (), F32))(1e300) is False


class _NoNegativeZeroBox(gym.spaces.Box):
    """A stricter Box of one's own: its own ``contains`` refuses what the bounds allow."""

    def contains(self, x):
        return super().contains(x) and not np.signbit(np.asarray(x)).any()


def test_a_subclass_overriding_contains_is_asked_itself():
    # mutant: the fast Box check used for every Box subclass, its own contains ignored.
    space = _NoNegativeZeroBox(-1.0, 1.0, (2,), F32)
    assert make_checker(space)(np.zeros(2, F32)) is True
    assert make_checker(space)(np.array([-0.5, 0.0], F32)) is False
    assert checker_for(space)(np.array([-0.5, 0.0], F32)) is False


def test_a_checker_whose_space_died_answers_false():
    # The checker keeps no strong reference to its space. mutant: a dead space contained all.
    space = gym.spaces.Sequence(gym.spaces.Discrete(2))
    check = make_checker(space)
    assert check((0, 1)) is True
    del space
    gc.collect()
    assert check((0, 1)) is False


# --- episodes.spaces.stacking ----------------------------------------------------------------


def test_items_that_fit_no_box_are_not_equal_in_it():
    # The same values, but neither fits a Box row. mutant: object arrays compared as they are.
    a, b = [None, 1.0], np.array([None, 1.0], dtype=object)
    assert equal_in_space(a, b, gym.spaces.Box(-1, 1, (2,))) is False


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # Floats of two widths compare by value, infinities too. mutant: checked as ints.
        (np.array([np.inf, 2.0**60]), np.array([np.inf, 2.0**60], F32), True),
        ({"a": np.array([-np.inf])}, {"a": np.array([-np.inf], F32)}, True),
        (np.array([np.inf]), np.array([-np.inf], F32), False),
        # 2**53 + 1 rounds to 2.0**53 in float64, yet is not equal to it. mutant: ``> 2**53``
        # left the rounded int unchecked.
        (np.array([2**53 + 1]), np.array([2.0**53]), False),
        (np.array([2**53]), np.array([2.0**53]), True),
    ],
    ids=["inf_and_big", "dict_minus_inf", "inf_against_minus_inf", "int_2_53_plus_1", "int_2_53"],
)
def test_equal_without_a_space_compares_values_exactly(a, b, expected):
    assert equal_in_space(a, b, None) is expected


def test_equal_in_an_int_space_makes_no_float_to_int_cast():
    # As documented: a cast of another kind is not made, whole floats included. mutant: any
    # cast that keeps the values made.
    space = gym.spaces.Box(0, 5, (2,), np.int64)
    assert equal_in_space(np.array([1.0, 2.0]), np.array([1, 2]), space) is False
    assert equal_in_space(np.array([1, 2], np.int32), np.array([1, 2]), space) is True


@pytest.mark.parametrize(
    ("a", "b", "space"),
    [
        # A key the Dict space lacks. mutant: its dtype looked up in the space (a KeyError).
        ({"a": 1, "x": 2}, {"a": 1, "x": 3}, gym.spaces.Dict({"a": gym.spaces.Discrete(3)})),
        # A third part beyond the Tuple space's two. mutant: zip dropped it, so they were equal.
        ((1, 2, 5), (1, 2, 6), gym.spaces.Tuple([gym.spaces.Discrete(3)] * 2)),
    ],
    ids=["dict_extra_key", "tuple_extra_part"],
)
def test_items_beyond_their_space_differ_where_their_extra_part_does(a, b, space):
    assert equal_in_space(a, b, space) is False
    assert equal_in_space(a, a, space) is True


D2 = gym.spaces.Discrete(2)


def test_nest_as_space_turns_inner_lists_into_tuples_below_a_tuple():
    # mutant: a tuple value returned as it was, its inner Tuple part still a list.
    space = gym.spaces.Tuple([gym.spaces.Tuple([D2, D2]), D2])
    out = nest_as_space(([np.zeros(2), np.ones(2)], np.zeros(2)), space)
    assert out.__class__ is tuple and out[0].__class__ is tuple


def test_nest_as_space_leaves_dict_parts_without_a_tuple_alone():
    # mutant: the plan kept an entry for every key, and a key with no Tuple part crashed it.
    space = gym.spaces.Dict({"a": gym.spaces.Box(0, 1, (2,)), "b": gym.spaces.Tuple([D2, D2])})
    rows = [[0.0, 1.0], [1.0, 0.0]]
    value = {"a": rows, "b": [np.zeros(2), np.ones(2)]}
    out = nest_as_space(value, space)
    assert out["a"] is rows and out["b"].__class__ is tuple
    # mutant: the caller's dict changed in place.
    assert value["b"].__class__ is list


def test_text_items_longer_than_max_length_are_kept_whole():
    # List mode does not check spaces. mutant: the column as wide as max_length, cutting them.
    out = batch_in_space(["abcdef", "ab"], gym.spaces.Text(3))
    assert out.tolist() == ["abcdef", "ab"]


def test_dict_items_with_a_key_beyond_the_space_batch_without_it():
    # Batched as without a space. mutant: the extra key's space looked up (a KeyError).
    items = [{"a": 0, "x": 1.5}, {"a": 1, "x": 2.5}]
    out = batch_in_space(items, gym.spaces.Dict({"a": D2}))
    assert out["a"].tolist() == [0, 1] and out["x"].tolist() == [1.5, 2.5]


def test_an_array_item_that_is_no_tuple_of_the_space_is_refused_by_batching():
    # Three values for two parts: batched as without a space, which refuses the mix.
    # mutant: its parts (None) indexed, a TypeError.
    space = gym.spaces.Tuple([D2, D2])
    with pytest.raises(ValueError, match="Cannot batch items"):
        batch_in_space([np.array([1, 0, 1]), (0, 1)], space)


def test_equal_items_of_a_space_without_fixed_layout_are_equal():
    # A Sequence's items do not stack, yet equal ones are equal. mutant: no data_equal first,
    # and the failed stacking called them different.
    space = gym.spaces.Sequence(gym.spaces.Discrete(3))
    assert equal_in_space((1, 2), (1, 2), space) is True
    assert equal_in_space((1, 2), (1, 0), space) is False


def test_nest_as_space_leaves_a_value_of_another_length_as_it_is():
    # mutant: no length check, and zip cut the third part off.
    value = [np.zeros(2), np.ones(2), np.zeros(2)]
    assert nest_as_space(value, gym.spaces.Tuple([D2, D2])) is value


# --- episodes.buffer.plain_arrays ------------------------------------------------------------


def _nested(leaf, depth):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("depth", [3, 15, 16, 40], ids=lambda d: f"depth_{d}")
def test_a_masked_leaf_is_found_at_any_depth(depth):
    # Past 16 levels the walk goes container by container. mutants: that walk answering False,
    # or not looking at its leaves.
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    assert holds_masked([_nested(masked, depth)]) is True
    assert holds_masked([_nested(masked.filled(0.0), depth)]) is False


def test_a_container_holding_itself_is_walked_once():
    # mutant: no record of the containers seen, and the walk never ended.
    looped: list = [np.zeros(2)]
    looped.append(looped)
    assert holds_masked([looped]) is False
    looped.append(np.ma.masked_array([1.0], mask=[True]))
    assert holds_masked([looped]) is True


def test_plain_leaves_refuses_a_masked_leaf_of_a_struct():
    # mutant: no check, and np.asarray dropped the mask.
    batch = {"a": np.zeros(2), "b": np.ma.masked_array([1.0, 2.0], mask=[True, False])}
    with pytest.raises(ValueError, match="obs: a numpy masked array with masked entries"):
        plain_leaves(batch, "obs")
    leaves, _ = plain_leaves({"a": np.ma.masked_array([1.0], mask=[False])}, "obs")
    assert leaves[0].tolist() == [1.0]


@pytest.mark.parametrize(
    ("given", "column", "expected"),
    [
        ([("a", "<f4")], [("a", ">f4")], True),  # byte order aside
        ([("a", "<i4")], [("a", "<i8")], False),  # mutant: same_kind casting took it
        ("<f4", "<f4", False),  # mutant: a plain dtype taken as a record
    ],
    ids=["byte_order", "wider_field", "not_a_record"],
)
def test_same_record_is_the_column_record_only(given, column, expected):
    assert same_record(np.dtype(given), np.dtype(column)) is expected


def test_native_leaves_makes_a_flat_big_endian_batch_native():
    # mutant: a flat batch returned as it was, big-endian.
    out = native_leaves(np.arange(3, dtype=">f4"))
    assert out.dtype == np.dtype("=f4") and out.dtype.isnative
    assert out.tolist() == [0.0, 1.0, 2.0]


# --- episodes.buffer.array_batches -----------------------------------------------------------


@pytest.mark.parametrize(
    "parts",
    [
        [np.zeros(2), {"a": np.zeros(2)}],
        [{"a": np.zeros(2)}, {"b": np.zeros(2)}],
        [{"a": np.zeros(2)}, {"a": np.zeros(2)}, (np.zeros(2),)],
    ],
    ids=["flat_then_dict", "other_keys", "third_differs"],
)
def test_join_refuses_batches_that_do_not_nest_alike(parts):
    # mutant: the second part's nesting left unchecked.
    with pytest.raises(ValueError, match="the batches do not nest alike"):
        join(parts)


@pytest.mark.parametrize(
    "items",
    [[(1, 0.5), [2, 1.5]], [[1, 0.5], (2, 1.5)], [{"a": (1, 0.5)}, {"a": [2, 1.5]}]],
    ids=["tuple_first", "list_first", "inside_a_dict"],
)
@pytest.mark.parametrize("build", [from_items, ArrayBatchOps.from_items], ids=["function", "ops"])
def test_items_nesting_alike_but_for_lists_and_tuples_stack(items, build):
    # A Tuple space's filler (a tuple) among items recorded as lists: one column, a tuple of
    # leaves whichever form comes first.
    batch = build(items)
    parts = batch["a"] if isinstance(batch, dict) else batch
    assert parts.__class__ is tuple
    assert [leaf.tolist() for leaf in parts] == [[1, 2], [0.5, 1.5]]


def test_write_leaves_names_the_column_a_write_does_not_fit():
    # mutant: numpy's own error re-raised, naming neither the array nor the column.
    column = np.zeros(3)
    column.flags.writeable = False
    with pytest.raises(ValueError, match=r"shape \(1,\) and dtype float64 does not fit a numpy"):
        write_leaves([column], slice(0, 1), [np.array([1.0])])


# --- episodes.rollout.circular_buffer --------------------------------------------------------


def test_a_circular_buffer_refuses_ints_its_narrower_dtype_would_wrap():
    # mutant: no range check, and 300 was stored as 44 in the int8 ring.
    torch = pytest.importorskip("torch")
    from episodes.rollout import CircularBuffer

    buf = CircularBuffer(3, 2)
    buf.append(torch.zeros(2, dtype=torch.int8))
    with pytest.raises(ValueError, match=r"values in \[1, 300\] do not fit a torch.int8"):
        buf.append(torch.tensor([300, 1]))
    assert buf.current_length.tolist() == [1, 1]  # nothing appended
    buf.append(torch.tensor([-128, 127]))  # in range: taken
    assert buf[0].tolist() == [-128, 127]


@pytest.mark.parametrize("ids", [[0, 5], [1, -9]], ids=["above", "below"])
def test_a_refused_reset_forgets_no_env(ids):
    # mutant: the lengths written in place, so envs before the bad index were reset.
    torch = pytest.importorskip("torch")
    from episodes.rollout import CircularBuffer

    buf = CircularBuffer(3, 2)
    buf.append(torch.tensor([1.0, 2.0]))
    with pytest.raises(IndexError):
        buf.reset(ids)
    assert buf.current_length.tolist() == [1, 1]
    assert buf[0].tolist() == [1.0, 2.0]


def test_windows_longer_than_the_ring_are_refused_by_their_length():
    # mutant: max_len + 1 let through, then refused as "no env has 4 items" (naming no bound).
    torch = pytest.importorskip("torch")
    from episodes.rollout import CircularBuffer

    buf = CircularBuffer(3, 2)
    for v in range(3):
        buf.append(torch.full((2,), float(v)))
    with pytest.raises(ValueError, match=r"seq_len must be in \[1, 3\], got 4"):
        buf.mini_batch_generator(4, 2, 1)
    assert next(iter(buf.mini_batch_generator(3, 2, 1))).data.shape == (3, 2)
