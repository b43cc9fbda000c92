"""Merging runner metrics: means weighted by every runner's episodes, listed or not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

pytest.importorskip("ray")

from episodes.distributed import merge_runner_metrics  # noqa: E402
from episodes.runner import RunnerMetrics  # noqa: E402
from tests.runner.test_metrics import fill  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(
    hst.lists(hst.integers(0, 12), min_size=1, max_size=4),
    hst.integers(1, 5),
)
def test_merged_means_weigh_every_runners_episodes(counts, listed):
    rng = np.random.default_rng(sum(counts))
    parts, every_return, every_length = [], [], []
    for count in counts:
        returns = rng.normal(size=count)
        metrics = RunnerMetrics(max_listed=listed)
        fill(metrics, returns, batch=3)
        every_return += returns.tolist()
        every_length += (np.arange(count) % 7 + 1).tolist()
        parts.append(metrics.reduce())
    merged = merge_runner_metrics(parts)
    assert merged["num_episodes"] == sum(counts)
    assert merged["episode_returns"] == [r for p in parts for r in p["episode_returns"]]
    if sum(counts):
        assert merged["mean_episode_return"] == pytest.approx(np.mean(every_return), abs=1e-12)
        assert merged["mean_episode_length"] == pytest.approx(np.mean(every_length), rel=1e-12)
    else:
        assert math.isnan(merged["mean_episode_return"])


def test_merge_takes_plain_lists_without_counts():
    merged = merge_runner_metrics([{"episode_returns": [1.0, 3.0]}, {"episode_returns": [5.0]}])
    assert merged["num_episodes"] == 3 and merged["mean_episode_return"] == 3.0
