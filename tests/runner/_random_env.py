"""A small random env family (and deterministic policies) for the batched-vs-per-step property."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

OBS_SPACES: dict[str, gym.Space[Any]] = {
    "box": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "discrete": gym.spaces.Discrete(7),
    "dict": gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(3)}
    ),
    "tuple": gym.spaces.Tuple(
        (gym.spaces.Box(-1.0, 1.0, (2,), np.float64), gym.spaces.Discrete(4))
    ),
}
ACTION_SPACES: dict[str, gym.Space[Any]] = {
    "discrete": gym.spaces.Discrete(3),
    "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    "dict": gym.spaces.Dict(
        {"move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "jump": gym.spaces.Discrete(2)}
    ),
}


def draw(space: gym.Space[Any], rng: np.random.Generator) -> Any:
    """A value of ``space`` from ``rng`` (the env's own generator, so it follows the seed)."""
    if isinstance(space, gym.spaces.Box):
        return rng.uniform(-1.0, 1.0, space.shape).astype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return np.int64(rng.integers(space.n))
    if isinstance(space, gym.spaces.Dict):
        return {key: draw(sub, rng) for key, sub in space.spaces.items()}
    assert isinstance(space, gym.spaces.Tuple)
    return tuple(draw(sub, rng) for sub in space.spaces)


@dataclass(frozen=True)
class EnvSpec:
    """Which spaces and how often episodes end, and infos appear."""

    obs: str
    action: str
    p_terminate: float
    p_truncate: float
    p_info: float


class RandomEnv(gym.Env):  # type: ignore[type-arg]
    """Random observations, rewards, endings (both flags at once too) and sparse infos."""

    metadata: dict[str, Any] = {}

    def __init__(self, spec: EnvSpec):
        self.spec_ = spec
        self.observation_space = OBS_SPACES[spec.obs]
        self.action_space = ACTION_SPACES[spec.action]
        self.t = 0

    def _info(self) -> dict[str, Any]:
        roll = self.np_random.random()
        if roll < self.spec_.p_info / 2:
            return {"t": self.t}
        if roll < self.spec_.p_info:
            return {"nested": {"x": float(self.np_random.random())}, "t": self.t}
        return {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return draw(self.observation_space, self.np_random), self._info()

    def step(self, action: Any):
        self.t += 1
        terminated = bool(self.np_random.random() < self.spec_.p_terminate)
        truncated = bool(self.np_random.random() < self.spec_.p_truncate)
        leaves = action.values() if isinstance(action, dict) else [action]
        reward = float(self.np_random.normal()) + sum(float(np.sum(a)) for a in leaves)
        obs = draw(self.observation_space, self.np_random)
        return obs, reward, terminated, truncated, self._info()


def make_vec(spec: EnvSpec, num_envs: int, mode: str) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv(
        [lambda: RandomEnv(spec) for _ in range(num_envs)], autoreset_mode=mode
    )


def features(obs: Any) -> np.ndarray:
    """Batched observations ``[B, ...]`` (any structure) as float64 ``[B, D]``."""
    if isinstance(obs, dict):
        leaves = [obs[key] for key in sorted(obs)]
    elif isinstance(obs, tuple):
        leaves = list(obs)
    else:
        leaves = [obs]
    n = len(leaves[0])
    return np.concatenate([np.asarray(leaf, np.float64).reshape(n, -1) for leaf in leaves], 1)


def value_fn(obs: Any) -> np.ndarray:
    """A deterministic value of batched observations."""
    x = features(obs)
    return np.tanh(x @ np.linspace(0.3, 1.1, x.shape[1]))


class Policy:
    """Deterministic actions and extras from the observations (optionally with a state)."""

    def __init__(self, action_space: gym.Space[Any], recurrent: bool, nested_extras: bool = False):
        self.action_space = action_space
        self.nested_extras = nested_extras
        if recurrent:
            self.initial_state = self._initial_state

    @staticmethod
    def _initial_state(num_envs: int) -> np.ndarray:
        return np.zeros((num_envs, 2), np.float32)

    def _act(self, obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        x = features(obs)
        score = x.sum(1)
        index = (np.floor(np.abs(score) * 7)).astype(np.int64)
        vector = np.stack([np.tanh(score), np.cos(score)], 1).astype(np.float32)
        actions: Any
        if isinstance(self.action_space, gym.spaces.Discrete):
            actions = index % self.action_space.n
        elif isinstance(self.action_space, gym.spaces.Dict):
            actions = {"jump": index % 2, "move": vector}
        else:
            actions = vector
        extras: dict[str, Any] = {
            "vf": value_fn(obs).astype(np.float32),
            "logp": -np.abs(score),
            "logits": np.stack([score, -score], 1).astype(np.float32),
        }
        if self.nested_extras:  # a distribution's parameters as one structured output
            extras["dist"] = {"mean": vector, "scale": (np.abs(vector) + 0.5, index % 3)}
        return actions, extras

    def __call__(self, obs: Any, state: Any = None) -> Any:
        actions, extras = self._act(obs)
        if state is None:
            return actions, extras
        extras["h"] = state.copy()
        return actions, extras, state + features(obs)[:, :2].astype(np.float32)


def obs_fn_for(kind: str) -> Any:
    """An ``obs_fn`` making ``[T, N, D]`` float32 columns of structured or discrete obs."""
    if kind == "box":
        return None

    def obs_fn(obs: Any) -> np.ndarray:
        if isinstance(obs, dict):
            leaves = [obs[key] for key in sorted(obs)]
        elif isinstance(obs, tuple):
            leaves = list(obs)
        else:
            leaves = [obs]
        t, n = np.asarray(leaves[0]).shape[:2]
        parts = [np.asarray(leaf, np.float32).reshape(t, n, -1) for leaf in leaves]
        return np.concatenate(parts, axis=2)

    return obs_fn
