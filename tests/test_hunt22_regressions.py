"""Regressions of session 22's own fixes, found by its regression hunt: Fraction and Decimal
rewards are real numbers again on every path; ``get_transitions(gamma=None)`` is the default
gamma, as in ``sample``; float fillers of float columns read the same in both modes (tested in
tests/core/test_hunt22_buffer_rewards.py)."""

from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, PrevActionsPrevRewards
from episodes.replay import EpisodeReplayBuffer

REWARDS = {
    "fraction": [Fraction(1, 2), Fraction(3, 2)],
    "decimal": [decimal.Decimal("0.5"), decimal.Decimal("1.5")],
}


def _episode(rewards):
    return SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=list(rewards),
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
        terminated=True, len_lookback_buffer=0,
    )  # fmt: skip


@pytest.mark.parametrize("case", list(REWARDS))
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_fraction_and_decimal_rewards_are_real_numbers(case, numpy):
    episode = _episode(REWARDS[case])
    if numpy:
        episode.to_numpy()
    assert episode.get_return() == 2.0
    batch = AddLearnerColumns()([episode], {})
    assert batch["rewards"].tolist() == [0.5, 1.5]
    prev = PrevActionsPrevRewards(0, 1)([episode], {})
    assert np.asarray(prev["prev_n_rewards"]).ravel().tolist() == [0.0, 0.5]
    torch = pytest.importorskip("torch")
    from episodes.converter import episodes_to_rollout

    rollout = episodes_to_rollout([[episode]], gamma=0.9)
    assert rollout.storage.rewards[:, 0, 0].tolist() == [0.5, 1.5]
    assert torch.is_tensor(rollout.storage.rewards)


def test_get_transitions_takes_gamma_none_as_the_default():
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add(_episode([1.0, 2.0]))
    indices = buffer.locate("a", [0])
    default = buffer.get_transitions(indices, n_step=2, gamma=None)
    assert (
        default["rewards"].tolist()
        == buffer.get_transitions(indices, n_step=2, gamma=0.99)["rewards"].tolist()
    )


@pytest.mark.parametrize("case", list(REWARDS))
def test_replay_stores_fraction_and_decimal_rewards(case):
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add(_episode(REWARDS[case]))
    batch = buffer.get_transitions(buffer.locate("a", [0, 1]), n_step=1)
    assert batch["rewards"].tolist() == [0.5, 1.5]
