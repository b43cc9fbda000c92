"""Replay under ``np.seterr(under="raise")``: a tiny float64 value rounds to 0, as by default.

A float64 observation below float32's range added to a float32 column, and a discount
``gamma ** n`` below it, raised numpy's bare ``FloatingPointError`` where the user made
underflow an error (hunting NaNs with ``np.seterr(all="raise")``).
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(id_: str, obs: np.ndarray) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[obs] * 6,
        actions=[0] * 5,
        rewards=[1.0] * 5,
        len_lookback_buffer=0,
    )


def _filled(cls) -> EpisodeReplayBuffer:
    buf = cls(100, seed=0)
    buf.add(_episode("a", np.ones(2, np.float32)))
    return buf


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_a_tiny_float64_observation_joins_a_float32_column_as_zero(cls):
    want, got = _filled(cls), _filled(cls)
    tiny = _episode("b", np.array([1e-50, 1.0]))
    want.add(tiny)
    with np.errstate(all="raise"):
        got.add(tiny)
    assert got.get_num_timesteps() == want.get_num_timesteps() == 10
    stored = got.get_episodes()[1].get_observations()
    assert stored.dtype == np.float32 and stored[:, 0].tolist() == [0.0] * 6


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("gamma", [1e-20, 1e-30])
def test_discounts_below_float32s_range_are_zero(cls, gamma):
    want = _filled(cls).sample(16, n_step=3, gamma=gamma)
    with np.errstate(all="raise"):
        got = _filled(cls).sample(16, n_step=3, gamma=gamma)
    assert got["discounts"].dtype == np.float32
    assert np.array_equal(got["discounts"], want["discounts"])
    assert np.array_equal(got["rewards"], want["rewards"])
