"""Items that are all ``[]`` batch as zero-size values (a Box((0,))'s), not as nothing."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.spaces import batch, unbatch

SPACES = {"none": None, "box": gym.spaces.Box(0, 1, (0,))}


@pytest.mark.parametrize("case", list(SPACES))
def test_empty_list_items_keep_their_count(case: str) -> None:
    stacked = batch([[], [], []], space=SPACES[case])
    assert isinstance(stacked, np.ndarray)
    assert stacked.shape == (3, 0) and stacked.dtype == np.float64
    assert len(unbatch(stacked)) == 3


def test_a_tuple_space_reads_them_as_empty_structs() -> None:
    assert batch([[], []], space=gym.spaces.Tuple(())) == []


def test_a_buffer_and_an_episode_of_empty_list_items_numpy() -> None:
    buffer = InfiniteLookbackBuffer([[], [], []], 1)
    buffer.finalize()
    assert buffer.get().shape == (2, 0) and len(buffer) == 2
    episode = SingleAgentEpisode(
        observations=[[], []], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    episode.to_numpy()
    assert episode.get_observations().shape == (2, 0)
