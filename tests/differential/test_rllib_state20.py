"""Differential: a column's own space survives from_state, deepcopy and pickle, as in RLlib 2.60.

Both libraries' episodes get the same edits of their columns' spaces (observations None, actions
another Discrete, rewards None) and every copy keeps them. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_state20.py
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402

from episodes import SingleAgentEpisode as OSAE  # noqa: E402

COPIES = {
    "from_state": lambda ep: type(ep).from_state(ep.get_state()),
    "deepcopy": copy.deepcopy,
    "pickle": lambda ep: pickle.loads(pickle.dumps(ep)),
}


def _edited(cls: Any) -> Any:
    ep = cls(observation_space=gym.spaces.Discrete(5), action_space=gym.spaces.Discrete(3))
    ep.add_env_reset(0)
    ep.add_env_step(1, 1, 1.0)
    ep.observations.space = None
    ep.actions.space = gym.spaces.Discrete(5)
    ep.rewards.space = None
    return ep


def _spaces(ep: Any) -> tuple[Any, ...]:
    columns = (ep.observations.space, ep.actions.space, ep.rewards.space)
    return (*columns, ep.observation_space, ep.action_space)


@pytest.mark.parametrize("how", sorted(COPIES))
def test_column_spaces_survive_copies_as_in_rllib(how: str) -> None:
    ours, theirs = COPIES[how](_edited(OSAE)), COPIES[how](_edited(RSAE))
    assert _spaces(ours) == _spaces(theirs)
    assert _spaces(ours) == (None, gym.spaces.Discrete(5), None, *_spaces(_edited(OSAE))[3:])
