"""Docs claims the code missed when checked (fixed since), and RLlib's filter keywords."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.connectors import MeanStdFilter

SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


@pytest.mark.parametrize(
    ("keywords", "hint"),
    [
        ({"multi_agent": True}, "multi-agent"),
        ({"input_observation_space": SPACE}, "spaces come from the episodes"),
        ({"as_learner_connector": True}, "inference="),
    ],
    ids=["multi_agent", "input_observation_space", "as_learner_connector"],
)
def test_mean_std_filter_explains_rllib_keywords(keywords, hint) -> None:
    with pytest.raises(TypeError, match="MeanStdFilter takes no") as err:
        MeanStdFilter(**keywords)
    assert hint in str(err.value)


def test_mean_std_filter_explains_a_space_by_position() -> None:
    with pytest.raises(
        TypeError, match="MeanStdFilter got a gymnasium space.*spaces come from the episodes"
    ):
        MeanStdFilter(SPACE)  # type: ignore[misc]


RLLIB_FILTER_KEYWORDS = {
    # RLlib 2.60's MeanStdFilter keyword: what the refusal names of ours
    "clip_by_value": "clip=",
    "update_stats": "update=True",
    "de_mean_to_zero": "std + eps",
    "de_std_to_one": "std + eps",
}


@pytest.mark.parametrize(
    ("keyword", "ours"), RLLIB_FILTER_KEYWORDS.items(), ids=list(RLLIB_FILTER_KEYWORDS)
)
def test_mean_std_filter_names_our_options_for_rllibs(keyword, ours):
    with pytest.raises(TypeError, match=f"MeanStdFilter takes no {keyword}=") as caught:
        MeanStdFilter(**{keyword: True})
    assert ours in str(caught.value)
