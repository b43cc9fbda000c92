"""Two findings of a deep property fuzz: list mode against numpy mode, and empty filled slices.

* Int rewards spanning int64 and uint64 (``2**63`` beside a negative int) are float64 to numpy,
  which rounds them, while ``to_numpy`` keeps them as Python ints: ``get_return`` in list mode
  must give the exact sum numpy mode gives (and the dataset writer stores).
* A backward slice with ``fill`` that holds no item is empty whatever its bounds; a stop beyond
  int64 made it a ``MemoryError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

# name: (rewards, exact return)
SPANNING_INTS = {
    "int64-and-uint64": ([2**63, -(2**63 - 1)], 1.0),
    "uint64-scalar-beside-a-negative-int": ([np.uint64(2**63), -(2**63 - 1)], 1.0),
    "three-terms": ([2**63, 5, -(2**63)], 5.0),
    "beyond-uint64": ([2**64, -(2**64) + 1], 1.0),
}
# Floats among the ints: both modes hold float64 and agree on its rounding.
MIXED_WITH_FLOATS = {
    "a-float-among-them": [2**63, -(2**63 - 1), 0.5],
    "large-floats": [2.0**63, -(2.0**63), 1.0],
}


def _episode(rewards):
    return SingleAgentEpisode(
        observations=[0] * (len(rewards) + 1),
        actions=[0] * len(rewards),
        rewards=list(rewards),
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("rewards,expected", SPANNING_INTS.values(), ids=SPANNING_INTS.keys())
def test_get_return_of_ints_spanning_int64_and_uint64_is_exact_in_both_modes(rewards, expected):
    episode = _episode(rewards)
    listed = episode.get_return()
    episode.to_numpy()
    assert listed == expected
    assert episode.get_return() == expected


@pytest.mark.parametrize("rewards", MIXED_WITH_FLOATS.values(), ids=MIXED_WITH_FLOATS.keys())
def test_get_return_with_floats_among_the_ints_agrees_between_modes(rewards):
    episode = _episode(rewards)
    listed = episode.get_return()
    episode.to_numpy()
    assert listed == episode.get_return() == float(np.sum(np.asarray(rewards, np.float64)))


EMPTY_BACKWARD = {
    "stop-beyond-int64": slice(None, 10**30, -1),
    "start-far-left-stop-far-right": slice(-(10**30), 10**30 + 5, -1),
    "start-inside-stop-far-right": slice(2, 10**30, -1),
    "both-far-right-equal": slice(10**30, 10**30, -1),
    "start-far-left-stop-inside": slice(-(2**70), 1, -1),
    "start-far-left-stop-on-zero": slice(-(2**70), 0, -1),
}


@pytest.mark.parametrize("index", EMPTY_BACKWARD.values(), ids=EMPTY_BACKWARD.keys())
@pytest.mark.parametrize("neg_index_as_lookback", [False, True])
@pytest.mark.parametrize("numpy_mode", [False, True])
def test_empty_backward_filled_slice_beyond_int64_is_empty(
    index, neg_index_as_lookback, numpy_mode
):
    buffer = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1)
    if numpy_mode:
        buffer.finalize()
    got = buffer.get(index, fill=0, neg_index_as_lookback=neg_index_as_lookback)
    assert len(got) == 0
    assert list(buffer.get()) == [2, 3, 4]


def test_nonempty_backward_filled_slice_far_out_is_all_fillers():
    buffer = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1)
    assert list(buffer.get(slice(10**30, 10**30 - 3, -1), fill=0)) == [0, 0, 0]
