"""A deterministic gymnasium env whose episodes are known in advance, for runner tests."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from episodes import SingleAgentEpisode

# (length, "term" | "trunc") per episode, cycled.
Script = list[tuple[int, str]]


def obs_of(env_id: int, k: int, t: int) -> np.ndarray:
    return np.array([env_id, k, t], dtype=np.float32)


def reward_of(k: int, t: int) -> float:
    return float(10 * k + t)


class ScriptedEnv(gym.Env):  # type: ignore[type-arg]
    """Episode ``k`` of sub-env ``env_id`` lasts ``script[k % len(script)][0]`` steps.

    Observation at step ``t`` of episode ``k``: ``[env_id, k, t]``; reward for reaching step
    ``t``: ``10 * k + t``; info: ``{"k": k, "t": t}``. Every action the env receives is logged.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, env_id: int, script: Script):
        self.env_id = env_id
        self.script = script
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.k = -1
        self.t = 0
        self.actions: list[tuple[int, int, int]] = []  # (k, t before the step, action)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.k += 1
        self.t = 0
        return obs_of(self.env_id, self.k, 0), {"k": self.k, "t": 0}

    def step(self, action: Any):
        self.actions.append((self.k, self.t, int(action)))
        self.t += 1
        length, ending = self.script[self.k % len(self.script)]
        done = self.t >= length
        return (
            obs_of(self.env_id, self.k, self.t),
            reward_of(self.k, self.t),
            done and ending == "term",
            done and ending == "trunc",
            {"k": self.k, "t": self.t},
        )


def make_vec(scripts: list[Script], mode: str) -> gym.vector.SyncVectorEnv:
    fns = [lambda i=i, s=s: ScriptedEnv(i, s) for i, s in enumerate(scripts)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


def action_policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Acts ``t % 5`` and records ``vf = 100 * k + t`` so rows can be matched to observations."""
    t = obs[:, 2].astype(np.int64)
    return t % 5, {"vf": (100 * obs[:, 1] + obs[:, 2]).astype(np.float32)}


def stitch(chunks: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Concatenates successive chunks of the same episode (checks ids, t and the shared obs)."""
    episodes: list[SingleAgentEpisode] = []
    for chunk in chunks:
        if episodes and episodes[-1].id_ == chunk.id_:
            episodes[-1].concat_episode(copy.deepcopy(chunk))
        else:
            episodes.append(copy.deepcopy(chunk))
    return episodes


class RewardOnResetEnv(gym.vector.VectorEnv):
    """Next-step autoreset; sub-env ``i`` terminates every ``3 + i`` steps, reward 1 a step,
    and, unlike gymnasium's own envs, it pays 100 on the reset step after an ending."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.t = np.zeros(num_envs, np.int64)
        self.ended = np.zeros(num_envs, bool)

    def reset(self, *, seed=None, options=None):
        self.t[:] = 0
        self.ended[:] = False
        return self.t[:, None].astype(np.float32), {}

    def step(self, actions):
        resetting = self.ended
        self.t = np.where(resetting, 0, self.t + 1)
        rewards = np.where(resetting, 100.0, 1.0)
        self.ended = ~resetting & (self.t == 3 + np.arange(self.num_envs))
        obs = self.t[:, None].astype(np.float32)
        return obs, rewards, self.ended.copy(), np.zeros(self.num_envs, bool), {}


class CountingSteps(gym.vector.VectorWrapper):
    """Counts the vector steps taken, to tell whether a refusal came before env.step."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self.steps = 0

    def step(self, actions: Any) -> Any:
        self.steps += 1
        return self.env.step(actions)
