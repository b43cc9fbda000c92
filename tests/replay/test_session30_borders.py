"""Replay joins compare a chunk's border in the space's dtypes too, as ``concat_episode``
does (an equality hunt): a float32 tail of a float64 head in a float32 Box was refused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def _chunk(obs, dtype, t_started=0, space=BOX):
    return SingleAgentEpisode(
        "e",
        observations=[np.array([o], dtype) for o in obs],
        actions=[0] * (len(obs) - 1),
        rewards=[1.0] * (len(obs) - 1),
        t_started=t_started,
        observation_space=space,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_a_float32_tail_of_a_float64_head_joins_in_a_float32_box(cls):
    head, tail = _chunk([0.5, 0.1], np.float64), _chunk([0.1, 0.2], np.float32, 1)
    joined = _chunk([0.5, 0.1], np.float64)
    joined.concat_episode(_chunk([0.1, 0.2], np.float32, 1))  # concat joins them
    buffer = cls(100)
    buffer.add([head])
    buffer.add([tail])
    assert buffer.get_num_episodes() == 1 and buffer.get_num_timesteps() == 2


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_without_a_space_a_different_value_is_still_refused(cls):
    buffer = cls(100)
    buffer.add([_chunk([0.5, 0.25], np.float64, space=None)])
    with pytest.raises(ValueError, match="differs from the one the buffer holds"):
        buffer.add([_chunk([0.3, 0.2], np.float64, 1, space=None)])
