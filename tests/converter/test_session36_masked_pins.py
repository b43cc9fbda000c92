"""Pins the mutation hunt found loose: masked entries inside Dict and Tuple items, and the
longdouble casts (one rounding, named refusals, no warning)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch
from episodes.converter.storage_for import as_tensors

MASKED = "a numpy masked array with masked entries"


def _masked():
    return np.ma.masked_array([-999.0, 1.0], mask=[True, False])


def _episode(wrap):
    ep = SingleAgentEpisode("e")
    ep.add_env_reset(wrap(np.zeros(2)))
    ep.add_env_step(wrap(_masked()), 1, 1.0)
    ep.add_env_step(wrap(np.ones(2)), 1, 1.0, terminated=True)
    return ep


NESTED = {
    "Dict item": lambda leaf: {"pos": leaf},
    "Tuple item": lambda leaf: (leaf,),
    "Dict in a Tuple": lambda leaf: ({"pos": leaf},),
}


@pytest.mark.parametrize("name", list(NESTED))
def test_masked_entries_inside_nested_items_are_refused(name):
    with pytest.raises(ValueError, match=MASKED):
        episodes_to_batch([_episode(NESTED[name])])


TIE = np.longdouble(1) + np.longdouble(2) ** -24 + np.longdouble(2) ** -60


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="longdouble is float64 here")
def test_longdouble_rounds_once_into_float32():
    # Through float64 first, 1 + 2**-24 + 2**-60 would round to 1 + 2**-24, then tie to 1.0.
    got = as_tensors(np.array([TIE]), torch.device("cpu"), torch.float32)
    assert got.item() == float(np.float32(TIE))
    assert got.item() != 1.0


@pytest.mark.parametrize("dtype", [None, torch.float32])
def test_clongdouble_is_refused_naming_the_column(dtype):
    with pytest.raises(TypeError, match="values"):
        as_tensors(np.array([1 + 1j], np.clongdouble), torch.device("cpu"), dtype, name="values")


def test_longdouble_beyond_the_field_is_inf_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = as_tensors(np.array([1e300], np.longdouble), torch.device("cpu"), torch.float32)
    assert got.item() == float("inf")
