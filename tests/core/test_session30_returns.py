"""``get_return`` of odd rewards, found by a metrics hunt.

numpy ints beside a Fraction or Decimal (an object column) were added with int8/int64
wrap-around; text, None and dicts got numpy's or ``float()``'s words instead of a
``TypeError`` naming the reward.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from episodes import SingleAgentEpisode


def _episode(rewards, numpyd=False):
    episode = SingleAgentEpisode()
    episode.add_env_reset(0)
    for reward in rewards:
        episode.add_env_step(1, 0, reward)
    return episode.to_numpy() if numpyd else episode


EXACT = {
    "int8 and a Fraction": ([np.int8(100), np.int8(100), Fraction(1, 2)], 200.5),
    "int64 and a Decimal": ([np.int64(2**62), np.int64(2**62), Decimal("0.5")], 2.0**63),
}


@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", list(EXACT))
def test_numpy_ints_beside_other_numbers_add_without_wrapping(name, numpyd):
    rewards, total = EXACT[name]
    assert _episode(rewards, numpyd).get_return() == total


@pytest.mark.parametrize("rewards", [["a", "b"], [None], [{"x": 1}], [1.0, "a"]])
def test_rewards_that_are_no_numbers_are_a_type_error_naming_one(rewards):
    with pytest.raises(TypeError, match="get_return needs real numbers as rewards, got"):
        _episode(rewards).get_return()
