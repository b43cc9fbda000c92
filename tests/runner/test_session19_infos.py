"""Arrays inside a sub-env's list, tuple or dict info value are copied each step.

An env that writes its info arrays in place must not change the infos of earlier steps,
whether the array is the value itself or sits in a list, tuple or dict value (gymnasium
batches those into an object array whose items are the list, tuple or dict).
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes.runner import EnvRunner

Pair = namedtuple("Pair", "x y")


class Items(list):
    pass


WRAPS = {
    "array": lambda a: a,
    "in a list": lambda a: [a],
    "in a tuple": lambda a: (a,),
    "in a dict": lambda a: {"x": a},
    "in a list in a dict": lambda a: {"x": [a]},
    "0-d array": lambda a: a.reshape(()),
    "in a namedtuple": lambda a: Pair(a, 0),
    "in a list subclass": lambda a: Items([a]),
    "in an OrderedDict": lambda a: OrderedDict(x=a),
}


def _read(name: str, value: Any) -> float:
    if name in ("in a list", "in a tuple", "in a namedtuple", "in a list subclass"):
        value = value[0]
    elif name in ("in a dict", "in an OrderedDict"):
        value = value["x"]
    elif name == "in a list in a dict":
        value = value["x"][0]
    return float(np.asarray(value).reshape(-1)[0])


class _ReusingEnv(gym.Env):
    observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, name: str):
        self.array = np.zeros(1)
        self.value = WRAPS[name](self.array)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"v": self.value}

    def step(self, action):
        self.t += 1
        self.array[...] = self.t  # in place: the info value holds the same array each step
        return np.full(1, self.t, np.float32), 0.0, False, False, {"v": self.value}


@pytest.mark.parametrize("name", list(WRAPS))
def test_reused_info_arrays_keep_each_steps_value(name):
    env = gym.vector.SyncVectorEnv([lambda: _ReusingEnv(name)] * 2)
    policy = lambda obs: (np.zeros(len(obs), np.int64), None)  # noqa: E731
    chunks = EnvRunner(env, policy, seed=0).sample(3)
    for chunk in chunks:
        infos = chunk.get_infos()
        assert [_read(name, info["v"]) for info in infos] == [0.0, 1.0, 2.0, 3.0]
        if name in ("in a namedtuple", "in a list subclass"):  # kept whole, as the env gave it
            assert all(type(info["v"]) is type(WRAPS[name](np.zeros(1))) for info in infos)
