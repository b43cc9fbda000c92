"""A chunk without steps that ends an episode, listed before that episode's chunks."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout


def _chunks() -> tuple[SingleAgentEpisode, SingleAgentEpisode]:
    steps = SingleAgentEpisode(
        "a",
        observations=np.array([[0.0], [1.0], [2.0]]),
        actions=[0, 0],
        rewards=[1.0, 1.0],
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
        len_lookback_buffer=0,
    )
    end = SingleAgentEpisode(
        "a", observations=np.array([[2.0]]), t_started=2, terminated=True, len_lookback_buffer=0
    )
    return steps, end


def _values(observations: np.ndarray) -> np.ndarray:
    return np.full(len(observations), 10.0)


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_an_end_listed_after_its_chunk_ends_it(layout: str) -> None:
    steps, end = _chunks()
    rollout = episodes_to_rollout([steps, end], gamma=0.5, value_fn=_values, layout=layout)
    assert rollout.storage.dones[:, 0, 0].tolist() == [False, True]


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_an_end_listed_before_its_chunk_is_refused(layout: str) -> None:
    # It used to take an env of its own and hold nothing: the episode bootstrapped from V.
    steps, end = _chunks()
    with pytest.raises(ValueError, match=r"ended episode 'a' at t=2 is listed before"):
        episodes_to_rollout([end, steps], gamma=0.5, value_fn=_values, layout=layout)


def test_an_end_of_an_episode_not_listed_is_still_left_out() -> None:
    steps, end = _chunks()
    other = SingleAgentEpisode(
        "b", observations=np.array([[5.0]]), t_started=4, terminated=True, len_lookback_buffer=0
    )
    rollout = episodes_to_rollout([other, steps, end], gamma=0.5, value_fn=_values)
    assert rollout.storage.dones.shape[1] == 1
