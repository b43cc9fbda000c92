"""Differential pin "to_numpy-space-dtypes": numpy'd observations and actions hold space dtypes.

RLlib 2.60's ``to_numpy`` stacks a list-mode column in its items' dtypes: Python-list rows of a
float32 Box become float64 (which that Box's check then refuses: the episode's own stored
observation fails its space), and ``True`` or ``np.uint8(1)`` Discrete actions a bool or uint8
column. Ours stacks them in the space's dtypes, as a column numpy'd while empty opens in them.
Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_space_dtypes.py
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = [
    pytest.mark.differential,
    # Box checks of Python lists defer to gymnasium, which warns that it casts them.
    pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array"),
]

BOX3 = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
D300 = gym.spaces.Discrete(300)

# name -> (first action, the dtype RLlib's numpy'd column gets from it)
FIRST_ACTIONS = {
    "python_bool": (True, np.bool_),
    "uint8": (np.uint8(1), np.uint8),
    "int32": (np.int32(1), np.int32),
}


def _numpyd(cls: Any, first_action: Any) -> Any:
    ep = cls("x", observation_space=BOX3, action_space=D300)
    ep.add_env_reset([0.1, 0.2, 0.3])  # a Python list: float64 as given
    ep.add_env_step([0.0, 0.5, -0.5], copy.deepcopy(first_action), 1.0)
    return ep.to_numpy()


@pytest.mark.parametrize("name", FIRST_ACTIONS)
def test_to_numpy_stacks_observations_and_actions_in_the_space_dtypes(
    name: str,
) -> None:  # "to_numpy-space-dtypes"
    first, rllib_dtype = FIRST_ACTIONS[name]
    ours, theirs = _numpyd(OSAE, first), _numpyd(RSAE, first)
    assert ours.get_observations().dtype == np.float32  # the Box's
    assert theirs.get_observations().dtype == np.float64  # the Python floats'
    assert ours.get_actions().dtype == np.int64  # Discrete's, as gymnasium samples it
    assert theirs.get_actions().dtype == rllib_dtype  # the first action's
    # The same values either way (float32 only rounds them).
    assert ours.get_observations().tolist() == theirs.get_observations().astype(np.float32).tolist()
    assert ours.get_actions().tolist() == theirs.get_actions().astype(np.int64).tolist()
    # Ours takes a later in-space action into the same column, and its own stored observation.
    ours.add_env_step(ours.get_observations(-1), 299, 0.0)
    assert ours.get_actions().dtype == np.int64 and ours.get_actions(-1) == 299
    ours.validate()
    # RLlib's float64 observation is outside the float32 Box: its own step check refuses it.
    assert not BOX3.contains(theirs.get_observations(-1))
    with pytest.raises(AssertionError):
        theirs.add_env_step(theirs.get_observations(-1), 299, 0.0)


def test_the_dtypes_agree_with_a_column_numpyd_while_empty() -> None:  # "to_numpy-space-dtypes"
    # Ours: numpy'd before the first step or after it, the columns hold the same dtypes.
    before = OSAE("x", observation_space=BOX3, action_space=D300).to_numpy()
    before.add_env_reset([0.1, 0.2, 0.3])
    before.add_env_step([0.0, 0.5, -0.5], True, 1.0)
    after = _numpyd(OSAE, True)
    for getter in ("get_observations", "get_actions"):
        a, b = getattr(before, getter)(), getattr(after, getter)()
        assert a.dtype == b.dtype and a.tolist() == b.tolist()


def test_get_return_is_a_python_float() -> None:  # "return-float"
    def stepped(cls: Any, rewards: list[Any]) -> Any:
        ep = cls("x")
        ep.add_env_reset(0)
        for t, reward in enumerate(rewards, 1):
            ep.add_env_step(t, 0, reward)
        return ep

    ours, theirs = stepped(OSAE, [1, 2]), stepped(RSAE, [1, 2])
    assert ours.get_return() == theirs.get_return() == 3
    assert type(ours.get_return()) is float and type(theirs.get_return()) is int
    # Int rewards whose sum no float holds: RLlib's sum is exact, ours +-inf (no OverflowError).
    ours, theirs = stepped(OSAE, [2**1100, 1]), stepped(RSAE, [2**1100, 1])
    assert theirs.get_return() == 2**1100 + 1
    assert ours.get_return() == float("inf")
    assert stepped(OSAE, [-(2**1100), 1]).get_return() == float("-inf")
