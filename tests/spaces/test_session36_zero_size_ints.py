"""Zero-size int arrays of both signs stack (numpy's join), as in ``to_numpy``.

int64 beside uint64 rows numpy joins as float64, and the check for ints that float64 rounds
looked at the first value of arrays holding none: an ``IndexError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode

ZERO_SIZE = {
    # name: (items, dtype numpy joins them in)
    "int64 beside uint64": ([np.zeros(0, np.int64), np.zeros(0, np.uint64)], np.float64),
    "rows of int64 beside uint64": (
        [np.zeros((0, 2), np.int64), np.zeros((0, 2), np.uint64)],
        np.float64,
    ),
    "int8 beside uint8": ([np.zeros(0, np.int8), np.zeros(0, np.uint8)], np.int16),
}


@pytest.mark.parametrize("name", list(ZERO_SIZE))
def test_zero_size_int_arrays_of_both_signs_stack(name):
    # They raised an IndexError looking for rounded ints in arrays holding none.
    items, dtype = ZERO_SIZE[name]
    ep = SingleAgentEpisode(observations=items, actions=[0], rewards=[0.0], len_lookback_buffer=0)
    observations = ep.to_numpy().get_observations()
    assert observations.dtype == dtype and observations.size == 0
