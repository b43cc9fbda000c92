"""RunnerMetrics refuses malformed episodes and bounds (hunt fixes): nothing is counted then."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from episodes.runner import RunnerMetrics

BAD_EPISODES = {
    "more lengths than returns": ([1.0, 2.0], [3, 4, 5]),
    "more returns than lengths": ([1.0, 2.0, 3.0], [3, 4]),
    "2-D arrays": ([[1.0, 2.0]], [[3, 4]]),
    "2-D returns": ([[1.0], [2.0]], [3, 4]),
    "0-D arrays": (1.0, 3),
    "fractional length": ([1.0], [2.7]),
    "NaN length": ([1.0], [math.nan]),
    "infinite length": ([1.0], [math.inf]),
    "negative length": ([1.0], [-1]),
    "bool lengths": ([1.0], [True]),
    "string returns": (["1.0"], [3]),
    "string lengths": ([1.0], ["3"]),
    "complex returns": ([1j], [3]),
    "object returns": ([None], [3]),
}


def figures(m: RunnerMetrics) -> dict:
    return dataclasses.asdict(m)


@pytest.mark.parametrize("returns, lengths", BAD_EPISODES.values(), ids=BAD_EPISODES.keys())
def test_add_episodes_refuses_malformed_input_and_counts_nothing(returns, lengths):
    m = RunnerMetrics()
    m.add_episodes([5.0], [5])
    before = figures(m)
    with pytest.raises(ValueError):
        m.add_episodes(returns, lengths)
    assert figures(m) == before
    out = m.reduce()  # still readable
    assert out["episode_returns"] == [5.0] and out["mean_episode_length"] == 5.0


@pytest.mark.parametrize(
    "episode_return, length",
    [(1.0, 2.7), (1.0, -1), (1.0, True), ([1.0, 2.0], 3), ("1.0", 3)],
    ids=["fractional", "negative", "bool", "two returns", "string return"],
)
def test_add_episode_refuses_what_add_episodes_refuses(episode_return, length):
    m = RunnerMetrics()
    with pytest.raises(ValueError):
        m.add_episode(episode_return, length)
    assert figures(m) == figures(RunnerMetrics())


def test_whole_valued_float_lengths_and_nan_returns_are_taken():
    m = RunnerMetrics()
    m.add_episodes(np.array([1.0, math.nan], np.float32), np.array([3.0, 0.0]))
    m.add_episodes([], [])  # a call that finished no episode
    out = m.reduce()
    assert out["episode_lengths"] == [3, 0] and all(type(n) is int for n in out["episode_lengths"])
    assert out["num_episodes"] == 2 and math.isnan(out["mean_episode_return"])


@pytest.mark.parametrize("bound", [-3, 1.5, 2.0, True, "10", None], ids=repr)
def test_max_listed_must_be_a_whole_number_at_least_zero(bound):
    with pytest.raises(ValueError, match="max_listed"):
        RunnerMetrics(max_listed=bound)


def test_max_listed_zero_lists_nothing_but_counts_everything():
    m = RunnerMetrics(max_listed=np.int64(0))
    m.add_episodes([1.0, 3.0], [1, 3])
    out = m.reduce()
    assert out["episode_returns"] == [] and out["num_episodes"] == 2
    assert out["mean_episode_return"] == 2.0 and type(m.max_listed) is int
