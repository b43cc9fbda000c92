"""episodes_to_batch over chunks whose Tuple items were recorded as tuples or as lists.

gymnasium's ``Tuple`` space contains both forms, so chunks of one space may hold either; the
batch nests as the space says (a tuple) and joins them, in list and numpy mode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch

SPACE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))


def _episode(id_: str, item_type: type, numpy: bool, space: gym.Space | None = SPACE):
    observations = [item_type((k % 3, np.full(2, k / 10, np.float32))) for k in range(3)]
    ep = SingleAgentEpisode(
        id_,
        observations=observations,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "forms", [(list, tuple), (tuple, list), (list, list)], ids=["list-tuple", "tuple-list", "lists"]
)
def test_tuple_and_list_items_join_as_the_space_nests(numpy: bool, forms: tuple) -> None:
    a = _episode("a", forms[0], numpy)
    b = _episode("b", forms[1], numpy)
    batch = episodes_to_batch([a, b])
    for column, first in (("obs", 0), ("next_obs", 1)):
        value = batch[column]
        assert isinstance(value, tuple) and len(value) == 2
        expected = [k % 3 for k in range(first, first + 2)] * 2
        np.testing.assert_array_equal(value[0], expected)
        assert value[1].shape == (4, 2) and value[1].dtype == np.float32


def test_spaceless_chunks_that_nest_differently_name_the_column() -> None:
    a = _episode("a", list, False, space=None)
    b = _episode("b", tuple, False, space=None)
    with pytest.raises(ValueError, match="'obs' rows do not join"):
        episodes_to_batch([a, b])
