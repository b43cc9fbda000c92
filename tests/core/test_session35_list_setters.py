"""Setters given a Python list of numbers, or of like arrays, write it as one batch.

A numpy'd column staged such a list item by item (about 2 us an item). The list is now taken as
the array it makes where that array holds the items exactly (Python floats; Python ints that
int64 holds; arrays of one dtype and shape): the batch path then judges it. The property here
is that this changes no outcome: every list, odd values included, gives the values, or the
error with the buffer unchanged, that the item-by-item path gives.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer import batch_writes

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int64, np.uint8, np.uint64, np.bool_]
SPACES = {
    "none": lambda dtype: None,
    "box": lambda dtype: _box(np.dtype(dtype)),
    "discrete": lambda dtype: gym.spaces.Discrete(5),
}
ODD_FLOATS = [0.5, -0.0, 1e40, -1e40, float("nan"), float("inf"), 1e-320, 3.0, 255.0, 1e19]
ODD_INTS = [0, 1, -1, 3, 300, 2**31, 2**53 + 1, 2**60 + 1, 2**63 - 1, -(2**63), 2**63, 2**64]


def _box(dtype: np.dtype):
    if dtype.kind == "b":  # gymnasium has no bool Box
        return gym.spaces.MultiBinary(())
    return gym.spaces.Box(0 if dtype.kind == "u" else -100, 100, (), dtype)


numbers = st.one_of(
    st.lists(st.sampled_from(ODD_FLOATS) | st.floats(), min_size=1, max_size=6),
    st.lists(st.sampled_from(ODD_INTS) | st.integers(-(2**70), 2**70), min_size=1, max_size=6),
    st.lists(st.sampled_from([1.0, 2]), min_size=1, max_size=6),  # mixed: item by item
    st.lists(st.floats(-50, 50, width=16) | st.sampled_from([0.0, 1.0]), min_size=1, max_size=6),
    st.lists(st.integers(0, 4), min_size=1, max_size=6),
)


def _outcome(buffer: InfiniteLookbackBuffer, values, at_indices):
    try:
        buffer.set(values, at_indices=at_indices)
    except Exception as error:  # noqa: BLE001 - the outcome compared is the error itself
        return ("error", type(error).__name__, str(error), buffer.get().tolist())
    got = buffer.get()
    return ("ok", got.dtype.str, [repr(v) for v in got.tolist()])


def _both_paths(make, values, at_indices, monkeypatch):
    fast = _outcome(make(), values, at_indices)
    with monkeypatch.context() as patch:  # the item-by-item path, as before
        patch.setattr(batch_writes, "_stacked_items", lambda items: items)
        slow = _outcome(make(), values, at_indices)
    return fast, slow


@settings(max_examples=300, deadline=None)
@given(
    values=numbers,
    dtype=st.sampled_from(DTYPES),
    space=st.sampled_from(sorted(SPACES)),
    reverse=st.booleans(),
)
def test_list_of_numbers_gives_what_item_by_item_gives(values, dtype, space, reverse):
    def make():
        data = np.zeros(len(values) + 2, dtype)
        buffer = InfiniteLookbackBuffer(data, lookback=1, space=SPACES[space](dtype))
        buffer.finalize()
        return buffer

    n = len(values)
    at = slice(n, 0, -1) if reverse else slice(0, n)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _both_paths(make, values, at, monkeypatch)
    assert fast == slow


ROWS = {
    "float32-rows": [np.full(3, 1.5, np.float32)] * 4,
    "float64-rows-into-float32": [np.full(3, 1e40)] * 4,
    "int-rows": [np.arange(3)] * 4,
    "wrong-shape": [np.zeros(2, np.float32)] * 4,
    "one-wrong-shape": [np.zeros(3, np.float32)] * 3 + [np.zeros(2, np.float32)],
    "mixed-dtypes": [np.zeros(3, np.float32)] * 3 + [np.zeros(3)],
    "outside-the-box": [np.full(3, 7.0, np.float32)] * 4,
    "nan-rows": [np.full(3, np.nan, np.float32)] * 4,
    "zero-d-items": [np.array(1.0)] * 4,
}


@pytest.mark.parametrize("rows", ROWS.values(), ids=ROWS.keys())
@pytest.mark.parametrize("with_space", [False, True])
def test_list_of_arrays_gives_what_item_by_item_gives(rows, with_space, monkeypatch):
    def make():
        space = gym.spaces.Box(-5, 5, (3,), np.float32) if with_space else None
        buffer = InfiniteLookbackBuffer(np.zeros((6, 3), np.float32), lookback=1, space=space)
        buffer.finalize()
        return buffer

    fast, slow = _both_paths(make, rows, slice(0, 4), monkeypatch)
    assert fast == slow


def test_episode_setter_takes_a_list_as_a_batch():
    episode = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 4,
        actions=[0] * 3,
        rewards=[0.0] * 3,
        len_lookback_buffer=0,
    )
    episode.to_numpy()
    episode.set_rewards(new_data=[1.0, 2.0, 3.0])
    episode.set_observations(new_data=[np.ones(2, np.float32)] * 3, at_indices=slice(1, 4))
    assert episode.get_rewards().tolist() == [1.0, 2.0, 3.0]
    assert episode.get_observations().tolist() == [[0.0, 0.0]] + [[1.0, 1.0]] * 3


ZERO_D = {
    "float64-into-float32-scalar-box": (np.float32, [np.array(0.5)] * 4),
    "uint64-into-uint8-scalar-box": (np.uint8, [np.array(3, np.uint64)] * 4),
    "same-dtype": (np.float32, [np.array(0.5, np.float32)] * 4),
}


@pytest.mark.parametrize("dtype,rows", ZERO_D.values(), ids=ZERO_D.keys())
def test_list_of_zero_d_arrays_is_judged_as_item_by_item(dtype, rows, monkeypatch):
    def make():
        low = 0 if np.dtype(dtype).kind == "u" else -1
        space = gym.spaces.Box(low, 100, (), dtype)
        buffer = InfiniteLookbackBuffer(np.zeros(6, dtype), lookback=1, space=space)
        buffer.finalize()
        return buffer

    fast, slow = _both_paths(make, rows, slice(0, 4), monkeypatch)
    assert fast == slow
