"""Infos outside the runner, found by an infos hunt.

* An episode's infos column is a list of dicts: a numpy'd one (in a state, or given to the
  constructor) is refused, not taken into an episode that then refuses every step.
* Infos that cannot be deep-copied (a lock) are refused by replay ``add`` and
  ``AddLearnerColumns`` with a message naming the step, the key and the episode, and the
  buffer unchanged.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(id_="e", infos=None):
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(1, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        infos=infos,
        len_lookback_buffer=0,
    )


def test_a_state_with_numpyd_infos_is_refused():
    state = _episode(infos=[{"a": 1}, {"a": 2}, {"a": 3}]).get_state()
    state["infos"].update(data={"a": np.array([1, 2, 3])}, finalized=True)
    with pytest.raises(ValueError, match="infos must be a list-mode"):
        SingleAgentEpisode.from_state(state)


def test_the_constructor_refuses_numpyd_infos_and_leaves_them_as_they_were():
    infos = InfiniteLookbackBuffer([{"a": 1}, {"a": 2}, {"a": 3}])
    infos.finalize()
    before = infos.get_state()
    with pytest.raises(ValueError, match="infos must be a list-mode"):
        _episode(infos=infos)
    assert infos.get_state().keys() == before.keys()
    assert infos == InfiniteLookbackBuffer.from_state(before)


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_replay_add_names_the_info_that_cannot_be_copied(cls):
    buffer = cls(100)
    bad = _episode("b", infos=[{}, {}, {"lock": threading.Lock()}])
    with pytest.raises(TypeError, match=r"infos\[2\]\['lock'\] of episode 'b' cannot be deep"):
        buffer.add([_episode("g"), bad])
    assert buffer.get_num_episodes() == buffer.get_added_timesteps() == 0


def test_add_learner_columns_names_the_info_that_cannot_be_copied():
    bad = _episode("b", infos=[{}, {"x": [1, threading.Lock()]}, {}])
    with pytest.raises(TypeError, match=r"infos\[1\]\['x'\]\[1\] of episode 'b' cannot be deep"):
        AddLearnerColumns(["obs", "infos"])([bad], {})
