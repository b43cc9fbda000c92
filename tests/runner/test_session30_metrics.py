"""``RunnerMetrics.add_episodes`` refuses lengths int64 cannot hold (a metrics hunt).

They passed the ``>= 0`` check and were wrapped into negative lengths by the int64 cast.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes.runner import RunnerMetrics


@pytest.mark.parametrize(
    "lengths",
    [[2**63], np.array([1e20]), np.array([2**64 - 1], np.uint64), np.array([2.0**63])],
)
def test_lengths_past_int64_are_refused_and_nothing_counted(lengths):
    metrics = RunnerMetrics()
    with pytest.raises(ValueError, match="must fit int64"):
        metrics.add_episodes([1.0], lengths)
    assert metrics.num_episodes == 0 and metrics.reduce()["num_episodes"] == 0


def test_the_longest_int64_length_is_taken():
    metrics = RunnerMetrics()
    metrics.add_episodes([1.0], np.array([2**63 - 1], np.uint64))
    assert metrics.num_episodes == 1
