"""Namedtuple items of a Tuple space make a plain-tuple column, numpy'd before or after.

Gymnasium's ``Tuple.contains`` takes namedtuples. An episode numpy'd before its steps held
plain tuples, one numpy'd after them the namedtuples: the two compared unequal and only the
first could be written to a dataset.
"""

from __future__ import annotations

import collections

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, load_episode
from episodes.spaces import batch_in_space

NT = collections.namedtuple("NT", "pos n")
BOX = gym.spaces.Box(-10, 10, (2,), np.float32)
TUPLE = gym.spaces.Tuple((BOX, gym.spaces.Discrete(3)))
SPACES = {
    "Tuple": (TUPLE, lambda t: NT(np.full(2, t, np.float32), np.int64(t % 3))),
    "Dict holding a Tuple": (
        gym.spaces.Dict({"a": TUPLE, "b": BOX}),
        lambda t: {
            "a": NT(np.full(2, t, np.float32), np.int64(t % 3)),
            "b": np.zeros(2, np.float32),
        },
    ),
    "Tuple holding a Tuple": (
        gym.spaces.Tuple((TUPLE, BOX)),
        lambda t: (NT(np.full(2, t, np.float32), np.int64(t % 3)), np.zeros(2, np.float32)),
    ),
}


def _episode(name, numpy_first):
    space, make = SPACES[name]
    ep = SingleAgentEpisode("x", observation_space=space, action_space=gym.spaces.Discrete(3))
    if numpy_first:
        ep.to_numpy()
    ep.add_env_reset(make(0))
    for t in range(1, 4):
        ep.add_env_step(make(t), 1, 1.0)
    return ep if numpy_first else ep.to_numpy()


def _tuple_types(value):
    """The classes of every tuple in ``value``, walked as the column nests."""
    if isinstance(value, dict):
        return set().union(*(_tuple_types(v) for v in value.values()))
    if isinstance(value, tuple):
        return {type(value)}.union(*(_tuple_types(v) for v in value))
    return set()


@pytest.mark.parametrize("name", list(SPACES))
def test_numpyd_before_and_after_hold_the_same(name):
    after, before = _episode(name, False), _episode(name, True)
    assert _tuple_types(after.get_observations()) == {tuple}
    assert _tuple_types(before.get_observations()) == {tuple}
    assert after == before


@pytest.mark.parametrize("name", list(SPACES))
def test_numpyd_after_is_written_and_read_back(tmp_path, name):
    ep = _episode(name, False)
    with DatasetWriter(tmp_path / "d") as w:
        w.write(ep)
    assert load_episode(tmp_path / "d", "x") == ep


def test_batch_in_space_makes_tuples_of_namedtuples():
    items = [NT(np.zeros(2, np.float32), 1), NT(np.ones(2, np.float32), 2)]
    batched = batch_in_space(items, TUPLE)
    assert type(batched) is tuple
    assert batched[0].shape == (2, 2) and batched[1].tolist() == [1, 2]
