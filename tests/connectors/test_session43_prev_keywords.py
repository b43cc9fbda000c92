"""``PrevActionsPrevRewards`` takes RLlib's keyword names, so ported code runs as it is written.

RLlib 2.60 spells them ``n_prev_actions`` / ``n_prev_rewards`` (keyword-only there); ours are
``n_actions`` / ``n_rewards``. Given both, they must agree.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import PrevActionsPrevRewards


def episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0, 0, 0, 0],
        actions=[1, 0, 1],
        rewards=[1.0, 2.0, 3.0],
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


SAME = [
    ("RLlib's keywords", {"n_prev_actions": 2, "n_prev_rewards": 3}),
    ("one of each", {"n_actions": 2, "n_prev_rewards": 3}),
    ("both, agreeing", {"n_actions": 2, "n_prev_actions": 2, "n_rewards": 3, "n_prev_rewards": 3}),
]


@pytest.mark.parametrize("kwargs", [c[1] for c in SAME], ids=[c[0] for c in SAME])
def test_rllib_keywords_give_what_ours_give(kwargs: dict[str, Any]) -> None:
    theirs = PrevActionsPrevRewards(**kwargs)
    ours = PrevActionsPrevRewards(2, 3)
    assert (theirs.n_actions, theirs.n_rewards) == (2, 3)
    got, want = theirs([episode()], {}), ours([episode()], {})
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_rllib_keyword_zero_leaves_the_column_out() -> None:
    out = PrevActionsPrevRewards(n_prev_actions=0, n_prev_rewards=1)([episode()], {})
    assert list(out) == ["prev_n_rewards"]


REFUSED = [
    ("disagreeing counts", {"n_actions": 2, "n_prev_actions": 3}, ValueError, "give one of them"),
    # a 1 given is a count like any other: only the default gives way to RLlib's keyword
    ("a given 1 against RLlib's 3", {"n_actions": 1, "n_prev_actions": 3}, ValueError, "=1 and"),
    ("a given reward 1 against 3", {"n_rewards": 1, "n_prev_rewards": 3}, ValueError, "=1 and"),
    ("a negative RLlib count", {"n_prev_rewards": -1}, ValueError, "n_prev_rewards"),
    ("a float RLlib count", {"n_prev_actions": 1.5}, TypeError, "n_prev_actions"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_bad_rllib_keywords_are_refused(kwargs: dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        PrevActionsPrevRewards(**kwargs)
