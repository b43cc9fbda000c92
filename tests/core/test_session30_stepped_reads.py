"""Stepped slice reads take the step before they pad and encode.

``get(slice(a, b, step), fill=..., one_hot_discrete=...)`` is the padded (and encoded) window
``[a, b)`` with every ``step``-th item kept. Items the step skips are never encoded: one
outside the space (a list-mode write lets it in) raises nothing unless it is returned.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer
from episodes.structs import data_equal

OUT_OF_SPACE = {
    # name: (space, an item in the space, one outside it)
    "Discrete": (gym.spaces.Discrete(3), 1, 7),
    "MultiDiscrete": (gym.spaces.MultiDiscrete([2, 3]), np.array([1, 0]), np.array([1, 7])),
}


@pytest.mark.parametrize("fill", [None, 0], ids=["no fill", "fill=0"])
@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", list(OUT_OF_SPACE))
def test_an_item_the_step_skips_is_never_encoded(name, numpyd, fill):
    space, good, bad = OUT_OF_SPACE[name]
    buf = InfiniteLookbackBuffer([good, bad, good], space=space)
    if numpyd:
        buf.finalize()
    stepped = buf.get(slice(0, 3, 2), one_hot_discrete=True, fill=fill)
    assert data_equal(stepped, buf.get([0, 2], one_hot_discrete=True))
    with pytest.raises(ValueError, match="out of range"):
        buf.get(slice(1, 3, 2), one_hot_discrete=True, fill=fill)  # ts=1 is returned


@given(
    values=st.lists(st.integers(0, 3), max_size=6),
    lookback=st.integers(0, 3),
    start=st.integers(-8, 8),
    stop=st.integers(-8, 10),
    step=st.integers(1, 4),
    neg_index_as_lookback=st.booleans(),
    one_hot=st.booleans(),
    numpyd=st.booleans(),
)
def test_a_stepped_read_is_the_unstepped_read_strided(
    values, lookback, start, stop, step, neg_index_as_lookback, one_hot, numpyd
):
    lookback = min(lookback, len(values))
    buf = InfiniteLookbackBuffer(values, lookback=lookback, space=gym.spaces.Discrete(4))
    if numpyd:
        buf.finalize()
    kw = dict(neg_index_as_lookback=neg_index_as_lookback, one_hot_discrete=one_hot, fill=0)
    whole = buf.get(slice(start, stop), **kw)
    assert data_equal(buf.get(slice(start, stop, step), **kw), whole[::step])
