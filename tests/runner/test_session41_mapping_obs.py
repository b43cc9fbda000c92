"""Observations that are a mapping other than a dict (rsl_rl's TensorDict) are named.

The runner nests dicts (and tuples) only; another mapping was taken for one leaf and failed in
numpy's words ("Could not convert object to sequence"). It is a ``TypeError`` naming it and
what to return instead, at the first reset, with the runner left unstarted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes.runner import EnvRunner

N = 2


class _Groups(Mapping):  # type: ignore[type-arg]
    """A read-only mapping of observation groups, as a TensorDict is one."""

    def __init__(self, **groups: np.ndarray):
        self._groups = groups

    def __getitem__(self, key: str) -> np.ndarray:
        return self._groups[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


class _Env(VectorEnv):  # type: ignore[type-arg]
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, wrap: Any):
        self.num_envs, self.wrap = N, wrap
        self.single_observation_space = gym.spaces.Dict(
            {"policy": gym.spaces.Box(-1, 1, (3,), np.float32)}
        )
        self.single_action_space = gym.spaces.Discrete(2)

    def _obs(self) -> Any:
        return self.wrap(policy=np.zeros((N, 3), np.float32))

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return self._obs(), {}

    def step(self, actions: Any) -> Any:
        return self._obs(), np.zeros(N), np.zeros(N, bool), np.zeros(N, bool), {}


def _tensordict(**groups: np.ndarray) -> Any:
    torch = pytest.importorskip("torch")
    tensordict = pytest.importorskip("tensordict")
    tensors = {key: torch.from_numpy(value) for key, value in groups.items()}
    return tensordict.TensorDict(tensors, batch_size=[N])


WRAPS = {"a Mapping": _Groups, "a TensorDict": _tensordict}


@pytest.mark.parametrize("wrap", WRAPS.values(), ids=WRAPS)
def test_a_mapping_that_is_no_dict_is_named(wrap: Any) -> None:
    env = _Env(wrap)
    env.reset()  # skips here without tensordict
    runner = EnvRunner(env, lambda obs: (np.zeros(N, np.int64), {}), seed=0)
    with pytest.raises(TypeError, match=r"reset observations: got a \w+, a mapping .* to_dict"):
        runner.sample(2)
    env.wrap = dict  # the plain dict the message asks for: the runner was left unstarted
    chunks = runner.sample(2)
    assert sum(len(chunk) for chunk in chunks) == N * 2
