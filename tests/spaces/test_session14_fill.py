"""Session 14 fill fixes: a long Text fill comes back whole; a number leaf refuses a non-number."""

import warnings
from decimal import Decimal
from fractions import Fraction

import gymnasium.spaces as gs
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.spaces import filler_batch, filler_item

BOX = gs.Box(-1.0, 1.0, (2,), np.float32)


def _buffer(data, space, numpy):
    buf = InfiniteLookbackBuffer(data=data, lookback=0, space=space)
    if numpy:
        buf.finalize()
    return buf


# --- Bug 1: a string fill longer than a Text space's max_length -------------------------------

TEXT_READS = {
    "slice_right": (slice(0, 4), ["ab", "c", "PADDING", "PADDING"]),
    "slice_left": (slice(-2, 2), ["ab", "c"]),  # no lookback: nothing left of ts=0 to pad
    "index_list": ([0, 5], ["ab", "PADDING"]),
    "slice_stepped": (slice(0, 5, 2), ["ab", "PADDING", "PADDING"]),
    "reversed": (slice(4, None, -1), ["PADDING", "PADDING", "PADDING", "c", "ab"]),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("indices, expected", TEXT_READS.values(), ids=TEXT_READS.keys())
def test_a_long_text_fill_is_kept_whole_in_every_read(indices, expected, numpy):
    buf = _buffer(["ab", "c"], gs.Text(3), numpy)
    got = buf.get(indices, fill="PADDING")
    assert list(got) == expected


def test_a_long_text_fill_is_whole_in_a_numpyd_episode_slice():
    ep = SingleAgentEpisode(
        observations=["ab", "c", "abc"],
        actions=[0, 1],
        rewards=[0.0, 0.0],
        observation_space=gs.Text(3),
        action_space=gs.Discrete(2),
        len_lookback_buffer=0,
    )
    listed = ep.get_observations(slice(-4, None), fill="<pad>")
    ep.to_numpy()
    numpyd = ep.get_observations(slice(-4, None), fill="<pad>")
    assert list(numpyd) == list(listed) == ["<pad>", "ab", "c", "abc"]


def test_a_nested_text_fillers_batch_is_as_wide_as_the_fill():
    space = gs.Dict({"s": gs.Text(2), "t": gs.Tuple([gs.Text(1)])})
    got = filler_batch(space, "long", 2)
    assert got["s"].tolist() == ["long", "long"]
    assert got["t"][0].tolist() == ["long", "long"]
    # A short fill keeps the space's width, so a later string up to max_length fits.
    assert filler_batch(gs.Text(5), "", 1).dtype == np.dtype("<U5")


# --- Bug 2: a fill that is not a number, for a number leaf ------------------------------------

NON_NUMBER_FILLS = {
    "digit_string": "1",
    "nan_string": "nan",
    "inf_string": "-inf",
    "float_string": "1e3",
    "padded_string": " 2 ",
    "bytes": b"1",
    "complex": 1 + 2j,
    "complex_zero_imag": 1 + 0j,
    "none_in_a_list": [None, 1.0],
    "mixed_list": [1, "a"],
}

NUMBER_SPACES = {
    "box": (BOX, [np.zeros(2, np.float32)]),
    "discrete": (gs.Discrete(3), [0, 1]),
    "multi_binary": (gs.MultiBinary(2), [np.zeros(2, np.int8)]),
    "multi_discrete": (gs.MultiDiscrete([2, 3]), [np.zeros(2, np.int64)]),
    "dict_of_box": (gs.Dict({"x": BOX}), [{"x": np.zeros(2, np.float32)}]),
}

READS = {"int": 5, "slice": slice(0, 3), "index_list": [0, 4], "reversed": slice(3, None, -1)}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("space, data", NUMBER_SPACES.values(), ids=NUMBER_SPACES.keys())
@pytest.mark.parametrize("fill", NON_NUMBER_FILLS.values(), ids=NON_NUMBER_FILLS.keys())
def test_a_number_leaf_refuses_a_fill_that_is_no_number(fill, space, data, numpy, read):
    buf = _buffer(data, space, numpy)
    before = buf.get(slice(None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the error
        with pytest.raises(ValueError, match="fill="):
            buf.get(read, fill=fill)
    after = buf.get(slice(None))
    assert len(after) == len(before)


@pytest.mark.parametrize("fill", NON_NUMBER_FILLS.values(), ids=NON_NUMBER_FILLS.keys())
def test_filler_item_and_batch_refuse_a_fill_that_is_no_number(fill):
    with pytest.raises(ValueError, match="fill="):
        filler_item(BOX, fill)
    with pytest.raises(ValueError, match="fill="):
        filler_batch(gs.Discrete(3), fill, 2)


NUMBER_FILLS = {
    "zero": (BOX, 0, np.zeros(2, np.float32)),
    "nan": (BOX, np.nan, np.full(2, np.nan, np.float32)),
    "minus_one": (gs.Discrete(3), -1, np.asarray(-1, np.int64)),
    "whole_float_into_ints": (gs.Discrete(3), 2.0, np.asarray(2, np.int64)),
    "bool": (gs.MultiBinary(2), True, np.ones(2, np.int8)),
    "numpy_scalar": (BOX, np.float32(0.5), np.full(2, 0.5, np.float32)),
    "row": (BOX, [0.5, -0.5], np.array([0.5, -0.5], np.float32)),
    "int_beyond_64_bits_into_floats": (gs.Box(-1, 1, (), np.float64), 2**70, np.float64(2**70)),
}


@pytest.mark.parametrize("space, fill, expected", NUMBER_FILLS.values(), ids=NUMBER_FILLS.keys())
def test_number_fills_still_fill(space, fill, expected):
    got = filler_item(space, fill)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_an_int_beyond_64_bits_is_refused_where_it_does_not_fit():
    with pytest.raises(ValueError, match="fill="):
        filler_item(gs.Discrete(3), 2**70)
    with pytest.raises(ValueError, match="fill="):
        filler_item(BOX, 2**200)  # inf in float32


def test_one_hot_fillers_ignore_fill_even_a_string():
    # The zero-hot filler does not use fill, so there is nothing to refuse (contract 3.5).
    got = filler_item(gs.Discrete(3), "x", one_hot_discrete=True)
    np.testing.assert_array_equal(got, np.zeros(3, np.float32))


REAL_OBJECTS = {
    "Decimal one": (Decimal(1), 1.0),
    "Fraction half": (Fraction(1, 2), 0.5),
}


@pytest.mark.parametrize("fill, value", REAL_OBJECTS.values(), ids=REAL_OBJECTS.keys())
def test_real_numbers_numpy_keeps_as_objects_still_fill_float_leaves(fill, value):
    box = gs.Box(-1.0, 1.0, (2,), np.float32)
    assert filler_batch(box, fill, 2).tolist() == [[value, value]] * 2


def test_a_fraction_that_is_no_whole_number_is_refused_for_int_leaves():
    assert filler_batch(gs.Discrete(3), Fraction(2, 1), 1).tolist() == [2]
    with pytest.raises(ValueError, match="fill="):
        filler_batch(gs.Discrete(3), Fraction(1, 2), 1)
