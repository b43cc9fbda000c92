"""n-step rows past float max: inf and NaN results, as the other readers give, no warnings."""

import warnings

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.distributed.rows import nstep_columns
from episodes.io.nstep import discount_weights, discounted_sum


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([1e308, 1e308, 1.0], [np.inf, 1e308, 1.0]),
        ([np.inf, -np.inf, 1.0], [np.nan, -np.inf, 1.0]),
    ],
    ids=["overflow", "inf beside -inf"],
)
def test_nstep_columns_sum_without_warnings(rewards, expected):
    episode = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 0, 0], rewards=rewards,
        terminated=True, len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nstep_columns(episode, 3, 1.0)["reward"]
    np.testing.assert_array_equal(got, expected)
    weights = discount_weights(1.0, 3)
    reference = [discounted_sum(np.asarray(rewards[k:], float), weights) for k in range(3)]
    np.testing.assert_array_equal(got, reference)
