"""Int rewards whose int64 sum wraps, and an empty infos list (RLlib reads it as none given)."""

from __future__ import annotations

import pytest

from episodes import SingleAgentEpisode
from episodes.episode.returns import reward_sum

WRAPPING = {
    "two halves of 2**63": ([2**62, 2**62], 2.0**63),
    "max plus one": ([2**63 - 1, 1], 2.0**63),
    "min minus one": ([-(2**63), -1], -(2.0**63)),
    "cancelling giants": ([2**62, 2**62, -(2**62), -(2**62), 3], 3.0),
    "beyond float range": ([2**1100, 1], float("inf")),
    "small ints": ([1, 2, 3], 6.0),
    "floats": ([0.5, 0.25], 0.75),
    "none": ([], 0.0),
}


@pytest.mark.parametrize("rewards, expected", WRAPPING.values(), ids=WRAPPING.keys())
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_get_return_of_int_rewards_does_not_wrap(rewards, expected, numpy):
    if numpy and rewards and abs(max(rewards, key=abs)) >= 2**63:
        pytest.skip("no int64 column holds these")
    n = len(rewards)
    episode = SingleAgentEpisode(
        observations=list(range(n + 1)), actions=[0] * n, rewards=rewards, len_lookback_buffer=0
    )
    if numpy:
        episode.to_numpy()
    assert episode.get_return() == expected
    assert reward_sum(rewards) == expected


@pytest.mark.parametrize("observations", [[], [0], [0, 1, 2]], ids=["no obs", "one", "three"])
def test_an_empty_infos_list_is_read_as_no_infos(observations):
    n = max(len(observations) - 1, 0)
    episode = SingleAgentEpisode(
        observations=observations,
        infos=[],
        actions=[0] * n,
        rewards=[0.0] * n,
        len_lookback_buffer=0,
    )
    assert episode.get_infos() == [{} for _ in observations]
    episode.validate()  # raises if the columns disagree


def test_infos_given_as_a_buffer_of_lookback_items_are_kept():
    from episodes.buffer import InfiniteLookbackBuffer

    infos = InfiniteLookbackBuffer([{"a": 1}, {"b": 2}], lookback=2)
    episode = SingleAgentEpisode(
        observations=InfiniteLookbackBuffer([0, 1], lookback=2),
        infos=infos,
        actions=InfiniteLookbackBuffer([0], lookback=1),
        rewards=InfiniteLookbackBuffer([0.0], lookback=1),
    )
    assert episode.get_infos(slice(-2, None), neg_index_as_lookback=True) == [{"a": 1}, {"b": 2}]
