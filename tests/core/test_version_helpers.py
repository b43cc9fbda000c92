"""Helpers that make the package behave the same on every supported Python and numpy."""

from __future__ import annotations

import copy
import pickle
import sys

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.slots import slot_values
from episodes.buffer.view_store import ViewStore
from episodes.spaces.filler import text_dtype

STORES = {
    "array store": lambda: ArrayStore.from_batch({"a": np.arange(6).reshape(3, 2)}),
    "view store": lambda: ViewStore.from_batch({"o": np.arange(6).reshape(3, 2)[:, 0]}),
}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="object.__getstate__ is Python 3.11's")
@pytest.mark.parametrize("case", STORES)
def test_slot_values_are_what_object_getstate_gives(case):
    store = STORES[case]()
    want = object.__getstate__(store)[1]
    got = slot_values(store)
    assert got.keys() == want.keys() and all(got[k] is want[k] for k in want)


def test_slot_values_skip_unset_slots_and_take_a_str_slot():
    class Base:
        __slots__ = "a"

    class Child(Base):
        __slots__ = ("b", "c")

    child = Child()
    child.a, child.c = 1, 3
    assert slot_values(child) == {"c": 3, "a": 1}


def test_numpy_episodes_copy_and_pickle():
    ep = SingleAgentEpisode(
        observations=[np.zeros(2)] * 3, actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    ).to_numpy()
    assert copy.deepcopy(ep) == ep
    assert pickle.loads(pickle.dumps(ep)) == ep


TEXT_WIDTHS = {"one": 1, "a thousand": 1000, "2**20": 2**20}


@pytest.mark.parametrize("case", TEXT_WIDTHS)
def test_text_dtype_holds_its_width(case):
    width = TEXT_WIDTHS[case]
    assert text_dtype(width) == np.dtype(f"<U{width}")
    assert text_dtype(width).itemsize == 4 * width


@pytest.mark.parametrize("width", [10**9, 2**31, 2**40])
def test_text_dtype_wider_than_numpy_strings_is_a_type_error(width):
    with pytest.raises(TypeError, match=f"no strings {width} characters wide"):
        text_dtype(width)
