"""Hunt 22 NaN/inf fixes: a NaN among int rewards beyond 2**53 no longer switches off their
refusal in step rows; replay n-step sums add a discount below float32's range in float64, so
a far inf reward is inf (as TransitionDataset sums it), not 0 * inf = NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import UnstorableValueError
from episodes.replay import EpisodeReplayBuffer


def _episode(rewards, **kw):
    n = len(rewards)
    return SingleAgentEpisode(
        "a",
        observations=[float(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        len_lookback_buffer=0,
        **kw,
    )


@pytest.mark.parametrize(
    "rewards",
    [[math.nan, 2**70 + 1], [2**70 + 1, math.nan], [math.inf, -(2**70)], [2**64, 1.0]],
    ids=["nan-first", "nan-last", "inf-beside", "beyond-int64"],
)
def test_step_rows_refuse_big_int_rewards_beside_nan_or_inf(rewards):
    pytest.importorskip("ray")
    from episodes.distributed.rows import step_columns

    with pytest.raises(UnstorableValueError, match="int rewards beyond 2"):
        step_columns(_episode(rewards).to_numpy())


@pytest.mark.parametrize(
    "rewards", [[math.nan, 2**53, 1.0], [math.inf, 5, -math.inf]], ids=["exact-int", "inf"]
)
def test_step_rows_keep_rewards_float64_holds(rewards):
    pytest.importorskip("ray")
    from episodes.distributed.rows import step_columns

    column = step_columns(_episode(rewards).to_numpy())["reward"]
    np.testing.assert_array_equal(column, np.array(rewards, dtype=np.float64))


@pytest.mark.parametrize(
    "gamma, rewards, n_step",
    [(1e-23, [1.0, 2.0, math.inf], 3), (0.5, [0.0] * 151 + [math.inf], 200)],
    ids=["gamma-below-float32", "far-inf"],
)
def test_replay_n_step_sum_of_a_far_inf_reward_is_inf(gamma, rewards, n_step):
    buffer = EpisodeReplayBuffer(1000, seed=0)
    buffer.add(_episode(rewards, terminated=True))
    batch = buffer.sample(64, n_step=n_step, gamma=gamma)
    # Every window reaches the inf reward: its sum is inf whatever its weight, never NaN.
    assert np.isposinf(batch["rewards"]).all(), batch["rewards"]
