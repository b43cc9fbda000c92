"""One-hot and filled reads of items that do not stack the way their space says.

List mode does not check items against the space (RLlib parity), so a column may hold a plain
int beside a shaped array. Every read form encodes such items one by one, as an index read of
each does, instead of failing inside numpy.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[1, np.array([2])],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
        action_space=gym.spaces.Discrete(3),
    )


@pytest.mark.parametrize(
    "indices",
    [
        pytest.param(slice(0, 2), id="slice"),
        pytest.param([0, 1], id="index-list"),
        pytest.param(None, id="all"),
    ],
)
def test_ragged_items_encode_like_their_index_reads(indices: object) -> None:
    ep = _episode()
    got = ep.get_actions(indices, one_hot_discrete=True)
    expected = [ep.get_actions(i, one_hot_discrete=True) for i in range(2)]
    assert len(got) == 2
    for row, want in zip(got, expected):
        np.testing.assert_array_equal(row, want)
    np.testing.assert_array_equal(got[0], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(got[1], [[0.0, 0.0, 1.0]])


def test_a_filled_read_of_items_off_their_space_blames_the_items() -> None:
    # The buffer has a space: the error must not tell the user to give it one.
    buffer = InfiniteLookbackBuffer(
        [np.zeros(3, np.float32), np.ones(3, np.float32)],
        space=gym.spaces.Box(-1, 1, (2,), np.float32),
    )
    buffer.finalize()
    with pytest.raises(ValueError, match="laid out as the buffer's space Box") as info:
        buffer.get(slice(0, 3), fill=0.0)
    assert "without a space" not in str(info.value)
