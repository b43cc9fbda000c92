"""Connectors refuse rewards that are not real numbers instead of casting them to float32."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, PrevActionsPrevRewards


def _episode(rewards: list, numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "ep-c",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 0],
        rewards=rewards,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


_CONNECTORS = {
    "learner": (lambda: AddLearnerColumns(["rewards"]), "AddLearnerColumns"),
    "prev": (
        lambda: PrevActionsPrevRewards(0, 1, one_hot_discrete=False),
        "PrevActionsPrevRewards",
    ),
}
_MODES = {"list": False, "numpy": True}


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize("which", list(_CONNECTORS))
def test_complex_rewards_are_refused_naming_the_episode(which: str, mode: str) -> None:
    make, who = _CONNECTORS[which]
    batch = {"kept": 1}
    with pytest.raises(TypeError, match=rf"{who}: rewards must be real numbers.*'ep-c'"):
        make()([_episode([1 + 5j, 2 + 7j], _MODES[mode])], batch)
    assert batch == {"kept": 1}  # a refusal leaves the batch as it was


_LIST_MODE_REFUSED = {
    "strings": ["1.5", "2"],  # a float32 cast would parse them
    "complex-among-big-ints": [1j, 2**70],  # an object column (prev reads the first)
    "string-among-big-ints": ["3", 2**70],
    "none": [None, 1.0],
}


@pytest.mark.parametrize("case", list(_LIST_MODE_REFUSED))
@pytest.mark.parametrize("which", list(_CONNECTORS))
def test_other_non_real_rewards_are_refused(which: str, case: str) -> None:
    make, who = _CONNECTORS[which]
    batch: dict = {}
    with pytest.raises(TypeError, match=rf"{who}: rewards must be real numbers.*'ep-c'"):
        make()([_episode(_LIST_MODE_REFUSED[case], False)], batch)
    assert batch == {}


@pytest.mark.parametrize("mode", list(_MODES))
def test_real_rewards_still_become_float32(mode: str) -> None:
    # Bools, ints (also beyond int64, an object column) and floats are real numbers.
    for rewards, expected in (([True, 2], [1.0, 2.0]), ([2**70, 1], [2.0**70, 1.0])):
        ep = _episode(rewards, _MODES[mode])
        out = AddLearnerColumns(["rewards"])([ep], {})["rewards"]
        assert out.dtype == np.float32 and out.tolist() == pytest.approx(expected)
        prev = PrevActionsPrevRewards(0, 1, one_hot_discrete=False)([ep], {})["prev_n_rewards"]
        assert prev.dtype == np.float32
        assert prev[:, 0].tolist() == pytest.approx([0.0, expected[0]])
