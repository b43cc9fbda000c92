"""Differential tests: our connectors against RLlib 2.60's env-to-module pieces.

RLlib's ``PrevActionsPrevRewards`` writes, for each episode's last step, the previous actions
(one-hot) and rewards into that step's observation; ours returns them as batch columns with
``inference=True``. Same chunks, same values; the documented differences are pinned. Run with
the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_connectors.py
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.connectors.env_to_module import (  # noqa: E402
    PrevActionsPrevRewards as RPrevActionsPrevRewards,
)
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.connectors import PrevActionsPrevRewards  # noqa: E402

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(4)
KEYS = ("prev_n_actions", "prev_n_rewards")


def _twins(count: int, lookback: int, steps: int, seed: int = 0) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for i in range(count):
        obs = rng.uniform(-1, 1, (lookback + steps + 1, 3)).astype(np.float32)
        kwargs = dict(
            observations=list(obs),
            actions=[int(a) for a in rng.integers(0, 4, lookback + steps)],
            rewards=[float(r) for r in rng.normal(size=lookback + steps)],
            observation_space=OBS,
            action_space=ACT,
            len_lookback_buffer=lookback,
        )
        ours.append(OSAE(f"ep_{i}", **kwargs))
        theirs.append(RSAE(id_=f"ep_{i}", **kwargs))
    return ours, theirs


def _rllib(episodes: list, n_actions: int, n_rewards: int) -> dict[str, np.ndarray]:
    # RLlib 2.60 reads ``self._multi_agent`` while its constructor sets the spaces: set after.
    piece = RPrevActionsPrevRewards(n_prev_actions=n_actions, n_prev_rewards=n_rewards)
    piece.input_action_space, piece.input_observation_space = ACT, OBS
    piece(rl_module=None, batch={}, episodes=episodes, explore=False, shared_data={})
    last = [ep.get_observations(-1) for ep in episodes]
    return {key: np.stack([item[key] for item in last]) for key in KEYS}


@pytest.mark.parametrize("lookback", [0, 1, 4])
@pytest.mark.parametrize("n_actions, n_rewards", [(1, 1), (2, 3), (4, 2)])
def test_prev_actions_prev_rewards_values_match_rllib(lookback, n_actions, n_rewards):
    ours, theirs = _twins(5, lookback, 6)
    got = PrevActionsPrevRewards(n_actions, n_rewards, inference=True)(ours, {})
    want = _rllib(theirs, n_actions, n_rewards)
    np.testing.assert_array_equal(
        got["prev_n_actions"].reshape(5, -1), want["prev_n_actions"].reshape(5, -1)
    )
    np.testing.assert_array_equal(got["prev_n_rewards"], want["prev_n_rewards"].astype(np.float32))


def test_rllib_deviation_prev_rewards_dtype():  # "prev-rewards-dtype"
    """Pinned: RLlib's column is float64 (though its own output space says float32)."""
    ours, theirs = _twins(3, 2, 4)
    got = PrevActionsPrevRewards(1, 2, inference=True)(ours, {})
    want = _rllib(theirs, 1, 2)
    assert got["prev_n_rewards"].dtype == np.float32
    assert want["prev_n_rewards"].dtype == np.float64


def test_rllib_deviation_env_to_module_numpy_episodes():  # "env-to-module-numpy"
    """Pinned: RLlib's env-to-module piece refuses numpy'd episodes; ours reads them as list
    mode gives."""
    ours, theirs = _twins(3, 2, 4)
    for ep in theirs:
        ep.to_numpy()
    with pytest.raises(AssertionError):
        _rllib(theirs, 2, 2)
    listed = PrevActionsPrevRewards(2, 2, inference=True)(ours, {})
    numpyd = PrevActionsPrevRewards(2, 2, inference=True)([ep.to_numpy() for ep in ours], {})
    for key in KEYS:
        np.testing.assert_array_equal(listed[key], numpyd[key])
