"""A vector env that declares no autoreset mode and acts same-step is warned of.

The runner reads next-step where ``env.metadata`` names no mode. A same-step env that says
none and reports no final observation (Isaac Lab's) was recorded as next-step silently: each
next episode lost its first transition. A true next-step env's reset step returns reward 0 and
neither flag; a reset step that returned something else, from an env declaring no mode, is an
``AutoresetModeWarning`` (once per runner, as the last thing the call does).
"""

from __future__ import annotations

import warnings
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes.runner import EnvRunner
from episodes.runner.modes import AutoresetModeWarning

N = 2


class _Env(VectorEnv):  # type: ignore[type-arg]
    """Sub-env 0 ends every third step; what the step after an ending returns is configurable."""

    def __init__(self, declared: Any, after_end: str, tensors: bool = False):
        self.num_envs = N
        self.metadata: Any = {} if declared is None else {"autoreset_mode": declared}
        if isinstance(declared, MappingProxyType):  # a read-only mapping declaring it
            self.metadata = declared
        self.single_observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.after_end, self.tensors, self.t = after_end, tensors, 0
        self.ended = np.zeros(N, bool)

    def _out(self, value: np.ndarray) -> Any:
        return torch.from_numpy(value) if self.tensors else value

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return self._out(np.zeros((N, 2), np.float32)), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        rewards = np.full(N, 0.5)
        truncated = np.array([self.t % 3 == 0, False])
        terminated = np.zeros(N, bool)
        if self.after_end == "zero":  # a true next-step reset step
            rewards[self.ended] = 0.0
        elif self.after_end == "flag":  # an episode of one step after the ending
            terminated |= self.ended
        self.ended = truncated | terminated
        obs = np.full((N, 2), float(self.t), np.float32)
        return tuple(map(self._out, (obs, rewards, terminated, truncated))) + ({},)


def _policy(obs: Any) -> Any:
    return np.zeros(N, np.int64), {}


def _torch_policy(obs: Any) -> Any:
    return torch.zeros(N, dtype=torch.int64), {}


# name -> (declared mode, what the step after an ending returns, warns)
CASES: dict[str, tuple[Any, str, bool]] = {
    "undeclared, a real reward after the ending": (None, "reward", True),
    "undeclared, a flag after the ending": (None, "flag", True),
    "undeclared, reward 0 and no flag (next-step)": (None, "zero", False),
    "declared next-step, paying at reset steps": (AutoresetMode.NEXT_STEP, "reward", False),
    "declared next-step as a string": ("NextStep", "reward", False),
    "declared in a read-only mapping": (
        MappingProxyType({"autoreset_mode": AutoresetMode.NEXT_STEP}),
        "reward",
        False,
    ),
}


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy env", "torch env"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_undeclared_env_that_acts_same_step_warns_once(case: str, tensors: bool) -> None:
    declared, after_end, warns = CASES[case]
    env = _Env(declared, after_end, tensors)
    runner = EnvRunner(env, _torch_policy if tensors else _policy, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chunks = [runner.sample(4) for _ in range(3)]
    doubts = [w for w in caught if issubclass(w.category, AutoresetModeWarning)]
    assert len(doubts) == (1 if warns else 0), [str(w.message) for w in caught]
    if warns:
        assert doubts[0].filename == __file__  # the line that called sample
        assert "sub-env 0" in str(doubts[0].message)
        assert "AutoresetMode.SAME_STEP" in str(doubts[0].message)
    assert all(sum(len(c) for c in call if c.custom_data["env_index"] == 1) == 4 for call in chunks)


def test_a_filter_raising_it_leaves_the_runner_usable() -> None:
    runner = EnvRunner(_Env(None, "reward"), _policy, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoresetModeWarning)
        with pytest.raises(AutoresetModeWarning):
            runner.sample(4)
        chunks = runner.sample(4)  # once said, not again; the runner goes on
    assert sum(len(c) for c in chunks) == 2 * 4
