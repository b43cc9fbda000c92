"""Values too small for float32 round to zero or a subnormal, as numpy rounds them, also where
numpy is told to raise on underflow (``np.seterr(all="raise")``): the float32 casts guarded only
their overflow, so an underflow was refused as "beyond float32's range" or escaped as a bare
``FloatingPointError``.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import FlattenObservations
from episodes.replay import EpisodeReplayBuffer

TINY = 1e-50  # float64, below float32's smallest subnormal: 0 in float32


@pytest.fixture(autouse=True)
def _raise_on_every_float_error():
    old = np.seterr(all="raise")
    yield
    np.seterr(**old)


def _episode(observations, rewards, *, space=None):
    return SingleAgentEpisode(
        observations=observations,
        actions=[0] * len(rewards),
        rewards=rewards,
        observation_space=space,
        len_lookback_buffer=0,
    )


def test_a_connector_casts_tiny_observations_to_float32():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    ep = _episode([np.array([TINY, 1.0])] * 3, [1.0, 1.0], space=space)
    ep.to_numpy()
    out = FlattenObservations()([ep], {})
    assert np.asarray(out["obs"])[0].tolist() == [0.0, 1.0]


def test_a_numpy_episode_takes_a_step_whose_value_underflows_float32():
    ep = _episode([np.zeros(2, np.float32)] * 2, [1.0])
    ep.to_numpy()
    ep.add_env_step(np.array([1e-40, 0.0]), 0, 1.0)
    got = ep.get_observations(-1)
    assert got.dtype == np.float32 and got[0] == np.float32(1e-40)


def test_replay_stores_and_samples_tiny_rewards():
    tiny = math.exp(-100)  # a shaped reward far from the goal
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 0],
            rewards=[tiny, 1e-45],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    batch = buf.sample(16, n_step=2, gamma=1e-10)
    assert np.all(np.isfinite(batch["rewards"]))
