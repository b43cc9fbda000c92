"""PrevActionsPrevRewards refuses rewards that are not one number per step, the same way always.

Vector rewards (a multi-objective env's) gave a ``[rows, n, 2]`` column where the lookback held
the window, and the getter's padding error ("give the buffer a space", which rewards never
have) or numpy's stacking error where it did not.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import PrevActionsPrevRewards

CASES = {  # name -> (len_lookback_buffer, numpy'd, inference)
    "list, padded": (0, False, False),
    "numpy'd, padded": (0, True, False),
    "list, window in the lookback": (2, False, False),
    "numpy'd, window in the lookback": (2, True, False),
    "inference, padded": (0, True, True),
    "inference, window in the lookback": (2, False, True),
}


def _episode(lookback: int, numpy: bool, reward: object) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "a",
        observations=[0] * 5,
        actions=[0] * 4,
        rewards=[reward] * 4,
        len_lookback_buffer=lookback,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("lookback, numpy, inference", CASES.values(), ids=CASES.keys())
def test_vector_rewards_are_refused_naming_the_episode_and_shape(lookback, numpy, inference):
    ep = _episode(lookback, numpy, np.array([1.0, 2.0]))
    batch = {"obs": np.zeros(3)}
    connector = PrevActionsPrevRewards(0, 2, one_hot_discrete=False, inference=inference)
    with pytest.raises(ValueError, match=r"one number per step .* shape \(2,\) in episode 'a'"):
        connector([ep], batch)
    assert list(batch) == ["obs"]  # the batch is left as it was


@pytest.mark.parametrize("lookback, numpy, inference", CASES.values(), ids=CASES.keys())
def test_scalar_rewards_still_give_rows_by_n(lookback, numpy, inference):
    ep = _episode(lookback, numpy, 1.5)
    connector = PrevActionsPrevRewards(0, 2, one_hot_discrete=False, inference=inference)
    out = connector([ep], {})["prev_n_rewards"]
    assert out.dtype == np.float32 and out.ndim == 2 and out.shape[1] == 2
    assert out.shape[0] == (1 if inference else len(ep))
    assert set(out.ravel().tolist()) <= {0.0, 1.5}


LOOKBACK_VECTORS = {  # name -> (rewards, len_lookback_buffer, numpy'd, inference)
    "lookback only, padded, list": ([np.ones(2)], 1, False, True),
    "lookback only, padded, numpy'd": ([np.ones(2)], 1, True, True),
    "vectors in the lookback, scalars after": ([np.ones(2), 1.0, 2.0], 1, False, False),
}


@pytest.mark.parametrize(
    "rewards, lookback, numpy, inference", LOOKBACK_VECTORS.values(), ids=LOOKBACK_VECTORS.keys()
)
def test_vector_rewards_in_the_lookback_are_refused_too(rewards, lookback, numpy, inference):
    ep = SingleAgentEpisode(
        "e",
        observations=[0] * (len(rewards) + 1),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=lookback,
    )
    if numpy:
        ep.to_numpy()
    connector = PrevActionsPrevRewards(0, 2, one_hot_discrete=False, inference=inference)
    with pytest.raises(ValueError, match=r"one number per step .* shape \(2,\) in episode 'e'"):
        connector([ep], {})


def test_ragged_rewards_keep_the_readers_error():
    ep = SingleAgentEpisode(
        "e",
        observations=[0] * 4,
        actions=[0] * 3,
        rewards=[1.0, [1.0, [2.0, 3.0]], 2.0],
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="the rows read do not stack"):
        PrevActionsPrevRewards(0, 2, one_hot_discrete=False)([ep], {})
