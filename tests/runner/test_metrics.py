"""Runner metrics: bounded episode lists, exact counts and means."""

from __future__ import annotations

import math

import numpy as np
import pytest

from episodes.runner import EnvRunner, RandomPolicy, RunnerMetrics
from tests.runner._runner_env import RewardOnResetEnv


def fill(metrics: RunnerMetrics, returns: np.ndarray, batch: int) -> None:
    for start in range(0, len(returns), batch):
        part = returns[start : start + batch]
        metrics.add_episodes(part, np.arange(start, start + len(part)) % 7 + 1)


# (case, episodes added, batch size per add_episodes call, max_listed)
CASES = [
    ("none", 0, 1, 4),
    ("fewer than listed", 3, 1, 4),
    ("exactly listed", 4, 2, 4),
    ("more, one at a time", 11, 1, 4),
    ("more, in one batch", 11, 11, 4),
    ("batches bigger than the list", 30, 9, 4),
]


@pytest.mark.parametrize(
    ("count", "batch", "listed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_lists_keep_the_latest_while_counts_and_means_cover_all(count, batch, listed):
    returns = np.random.default_rng(count).normal(size=count)
    lengths = np.arange(count) % 7 + 1
    metrics = RunnerMetrics(max_listed=listed)
    fill(metrics, returns, batch)
    assert len(metrics.episode_returns) <= 2 * listed  # bounded between reads too
    out = metrics.reduce()
    assert out["episode_returns"] == returns[len(returns) - min(count, listed) :].tolist()
    assert out["episode_lengths"] == lengths[len(lengths) - min(count, listed) :].tolist()
    assert out["num_episodes"] == count and out["total_episodes"] == count
    if count:
        assert out["mean_episode_return"] == pytest.approx(returns.mean(), rel=1e-12)
        assert out["mean_episode_length"] == pytest.approx(lengths.mean(), rel=1e-12)
    else:
        assert math.isnan(out["mean_episode_return"])
    again = metrics.reduce()
    assert again["num_episodes"] == 0 and again["episode_returns"] == []
    assert again["total_episodes"] == count


def test_next_step_reset_rewards_belong_to_no_episode():
    """A reset step records no transition: its reward is in no chunk and no episode return."""
    env = RewardOnResetEnv(2)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    chunks = list(runner.sample(12)) + list(runner.sample(12))
    assert all(set(c.get_rewards().tolist()) == {1.0} for c in chunks)
    metrics = runner.get_metrics()
    assert metrics["num_episodes"] > 4
    lengths = [int(x) for x in metrics["episode_lengths"]]
    assert metrics["episode_returns"] == [float(n) for n in lengths]


@pytest.mark.parametrize(
    "env_steps, vector_steps, seconds",
    [
        pytest.param(-3, 3, 0.1, id="negative-env-steps"),
        pytest.param(2.7, 3, 0.1, id="fractional-env-steps"),
        pytest.param(3, True, 0.1, id="bool-vector-steps"),
        pytest.param(3, 3, -0.5, id="negative-seconds"),
        pytest.param(3, 3, math.nan, id="nan-seconds"),
        pytest.param(3, 3, math.inf, id="inf-seconds"),
        pytest.param(3, 3, "0.1", id="string-seconds"),
    ],
)
def test_add_time_refuses_bad_figures_and_records_nothing(env_steps, vector_steps, seconds):
    metrics = RunnerMetrics()
    metrics.add_time(4, 2, 0.5)
    before = metrics.reduce(reset=False)
    with pytest.raises(ValueError, match="env_steps|vector_steps|seconds"):
        metrics.add_time(env_steps, vector_steps, seconds)
    assert metrics.reduce(reset=False) == before


def test_add_time_takes_numpy_figures_as_python_numbers():
    metrics = RunnerMetrics()
    metrics.add_time(np.int64(6), np.int32(3), np.float32(0.25))
    out = metrics.reduce()
    assert (out["num_env_steps"], out["num_vector_steps"], out["sample_time_s"]) == (6, 3, 0.25)
    assert type(out["num_env_steps"]) is int and type(out["sample_time_s"]) is float
