"""Spaces as the library stores and checks them, found by a space-serialization hunt.

* A uint64 ``MultiDiscrete`` whose ``nvec`` passes int64 decodes (it was written, then every
  read failed).
* A malformed dict (a tuple where the encoding has lists) is refused whatever was decoded
  before (the cache answered for it).
* A subclass overriding ``contains`` is asked itself by the fast checker (a finalized buffer
  took items its space refuses).
* A Minari export refuses a Discrete whose values pass int64 (Minari records it as int64 and
  could not read it back).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.io.errors import DatasetError
from episodes.io.minari_spaces import check_minari_space
from episodes.spaces import space_from_dict, space_to_dict
from episodes.spaces.contains import make_checker


@pytest.mark.parametrize("nvec", [[2**63], [2**64 - 1, 3]])
def test_a_uint64_multi_discrete_beyond_int64_round_trips(nvec):
    space = gym.spaces.MultiDiscrete(np.array(nvec, np.uint64), dtype=np.uint64)
    assert space_from_dict(space_to_dict(space)) == space
    episode = SingleAgentEpisode("e", observation_space=space)
    assert SingleAgentEpisode.from_state(episode.get_state()).observation_space == space


def test_sizes_a_dtype_cannot_hold_are_refused():
    encoded = space_to_dict(gym.spaces.MultiDiscrete([3], start=[-2], dtype=np.int8))
    encoded["nvec"] = [200]
    with pytest.raises(ValueError, match="outside int8"):
        space_from_dict(encoded)


def test_a_tuple_in_a_space_dict_is_refused_after_the_list_form_was_decoded():
    good = space_to_dict(gym.spaces.Box(0.0, 1.0, (2,), np.float32))
    space_from_dict(good)  # cached
    bad = {**good, "shape": tuple(good["shape"])}
    with pytest.raises(ValueError, match="must be a list"):
        space_from_dict(bad)


class _SumBox(gym.spaces.Box):
    """A Box whose items must also sum to at most 1."""

    def contains(self, x):
        return bool(super().contains(x)) and float(np.sum(x)) <= 1.0


def test_a_subclass_overriding_contains_is_asked_itself():
    space = _SumBox(0.0, 1.0, (2,), np.float32)
    item = np.array([0.9, 0.9], np.float32)
    assert make_checker(space)(item) is False
    assert make_checker(gym.spaces.Box(0.0, 1.0, (2,), np.float32))(item) is True
    buffer = InfiniteLookbackBuffer([np.zeros(2, np.float32)], space=space)
    buffer.finalize()
    with pytest.raises(ValueError, match="not in the buffer's space"):
        buffer.set(item, at_indices=0)


def test_a_minari_export_refuses_a_discrete_beyond_int64():
    check_minari_space(gym.spaces.Discrete(2**63, dtype=np.uint64), "the action space")
    with pytest.raises(DatasetError, match="beyond int64"):
        check_minari_space(gym.spaces.Discrete(2**63 + 5, dtype=np.uint64), "the action space")
