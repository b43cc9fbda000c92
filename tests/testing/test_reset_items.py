"""The contract checks' just-reset episodes, and float16 Boxes without bounds in the strategies.

Before, a just-reset episode's observation was gymnasium's ``sample()``: a ``Text(10**9)``
sampled up to a billion characters (killed for memory), a float64 ``Box(-1e308, 1e308)`` raised
gymnasium's ``OverflowError``. An unbounded float16 Box made hypothesis discard most draws
(``filter_too_much``), so ``check_connector`` failed on a connector that does nothing.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes.testing import check_connector, check_handles_empty_and_reset
from episodes.testing.reset_items import reset_item

SPACES = {
    "wide float64 Box": gym.spaces.Box(-1e308, 1e308, (2,), np.float64),
    "Box above 0": gym.spaces.Box(1.0, 2.0, (3,), np.float32),
    "int Box below 0": gym.spaces.Box(-9, -2, (2,), np.int64),
    "bool Box": gym.spaces.Box(0, 1, (2,), np.bool_),
    "int64 Box beyond 2**53": gym.spaces.Box(2**53 + 1, 2**53 + 1, (2,), np.int64),
    "uint64 Box at its top": gym.spaces.Box(2**64 - 1, 2**64 - 1, (1,), np.uint64),
    "huge Text": gym.spaces.Text(10**9, min_length=3),
    "Discrete with a start": gym.spaces.Discrete(3, start=-5),
    "MultiDiscrete": gym.spaces.MultiDiscrete([2, 3]),
    "Dict of Text and Box": gym.spaces.Dict(
        {"t": gym.spaces.Text(10**9), "b": gym.spaces.Box(-1e308, 1e308, (), np.float64)}
    ),
    "Tuple": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(5, min_length=1))),
}


def _noop(episodes, batch):
    return dict(batch)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_the_reset_item_is_in_the_space_and_the_same_each_time(space) -> None:
    item = reset_item(space)
    assert space.contains(item)
    assert repr(reset_item(space)) == repr(item)


@pytest.mark.parametrize("space", SPACES.values(), ids=SPACES.keys())
def test_a_connector_that_does_nothing_passes_the_reset_check(space) -> None:
    check_handles_empty_and_reset(_noop, space)


def test_an_unbounded_float16_box_passes_check_connector() -> None:
    box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float16)
    check_connector(_noop, observation_space=box, action_space=gym.spaces.Discrete(2))
