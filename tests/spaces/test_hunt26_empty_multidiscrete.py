"""An empty MultiDiscrete keeps its shape through ``space_to_dict`` (nested lists cannot say it:
``nvec`` of shape ``(0, 2)`` is ``[]``, and came back as shape ``(0,)``)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces as gs

from episodes import SingleAgentEpisode
from episodes.spaces import space_from_dict, space_to_dict

SHAPES = [(0,), (0, 2), (2, 0), (0, 0), (3, 0, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_an_empty_multidiscrete_round_trips(shape):
    space = gs.MultiDiscrete(np.ones(shape, np.int64))
    back = space_from_dict(space_to_dict(space))
    assert back == space and back.nvec.shape == shape and back.start.shape == shape


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_an_episode_of_an_empty_multidiscrete_round_trips_through_its_state(shape):
    space = gs.MultiDiscrete(np.ones(shape, np.int64), seed=0)
    episode = SingleAgentEpisode("e", observation_space=space, action_space=space)
    episode.add_env_reset(space.sample())
    episode.add_env_step(space.sample(), space.sample(), 1.0)
    assert SingleAgentEpisode.from_state(episode.get_state()) == episode


def test_a_non_empty_multidiscrete_is_stored_as_before():
    assert "shape" not in space_to_dict(gs.MultiDiscrete([[2, 3], [4, 5]]))


BAD = [
    ("shape of a non-empty nvec", {"nvec": [2, 3], "start": [0, 0], "shape": [2]}),
    ("shape with elements", {"nvec": [], "start": [], "shape": [2, 3]}),
    ("negative size", {"nvec": [], "start": [], "shape": [0, -2]}),
    ("nested shape", {"nvec": [], "start": [], "shape": [[0, 2]]}),
    ("not ints", {"nvec": [], "start": [], "shape": [0, 2.0]}),
]


@pytest.mark.parametrize("name, fields", BAD, ids=[b[0] for b in BAD])
def test_a_malformed_shape_is_refused(name, fields):
    with pytest.raises(ValueError, match="'shape'"):
        space_from_dict({"type": "MultiDiscrete", "dtype": "int64", **fields})
