"""A policy output whose ``__array__`` raises is named with its own error, not as a ragged list.

The runner read every ``ValueError`` from ``np.shape`` of an output as a ragged list, so an
object whose ``__array__`` raised (a value head not synced yet) was reported as "a list whose
items differ in shape", with its own message dropped. Now only a list numpy cannot shape is a
ragged list; otherwise the message names the output, quotes the object's error and chains it.
A refusal at a call's first step still leaves the runner untouched.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner
from tests.runner._runner_env import CountingSteps

N = 2


class NotReady:
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise ValueError("value head output not synced")


def _actions() -> np.ndarray:
    return np.zeros(N, np.int64)


def _good(obs: Any) -> Any:
    return _actions(), {"vf": np.zeros(N)}


UNREADABLE = "cannot be read as an array (numpy reading a NotReady in it raised: value head"
CASES = {
    "extra output": (lambda: (_actions(), {"vf": NotReady()}), "extra output 'vf'", UNREADABLE),
    "actions": (lambda: (NotReady(), {}), "actions", UNREADABLE),
    "inside a dict output": (
        lambda: (_actions(), {"vf": {"h": NotReady()}}),
        "extra output 'vf'",
        UNREADABLE,
    ),
    "inside a list output": (
        lambda: (_actions(), {"vf": [NotReady(), NotReady()]}),
        "extra output 'vf'",
        UNREADABLE,
    ),
    # A list numpy cannot shape is still a ragged list.
    "ragged list": (
        lambda: (_actions(), {"vf": [[1.0, 2.0], [3.0]]}),
        "extra output 'vf'",
        "is a list whose items differ in shape (a ragged list)",
    ),
}


@pytest.mark.parametrize(("outputs", "name", "words"), CASES.values(), ids=CASES.keys())
def test_an_unreadable_first_output_is_named_with_its_own_error(outputs, name, words) -> None:
    env = CountingSteps(gym.make_vec("CartPole-v1", N, vectorization_mode="sync"))
    policy: dict[str, Any] = {"fn": lambda obs: outputs()}
    runner = EnvRunner(env, lambda obs: policy["fn"](obs), seed=0)
    with pytest.raises(ValueError) as info:
        runner.sample(4)
    assert str(info.value).startswith(f"the policy's {name} {words}")
    if words is UNREADABLE:
        cause = info.value.__cause__
        assert isinstance(cause, ValueError) and str(cause) == "value head output not synced"
    assert env.steps == 0  # refused before the env stepped: the runner goes on untouched
    policy["fn"] = _good
    assert [len(c) for c in runner.sample(3)] == [3] * N


def test_an_unreadable_later_output_is_named_with_its_own_error() -> None:
    calls = {"n": 0}

    def policy(obs: Any) -> Any:
        calls["n"] += 1
        return _actions(), {"vf": np.zeros(N) if calls["n"] < 3 else NotReady()}

    env = gym.make_vec("CartPole-v1", N, vectorization_mode="sync")
    with pytest.raises(ValueError) as info:
        EnvRunner(env, policy, seed=0).sample(5)
    assert str(info.value).startswith(f"the policy's extra output 'vf' {UNREADABLE}")
    assert str(info.value.__cause__) == "value head output not synced"
