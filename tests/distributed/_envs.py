"""Env and policy factories for the runner-group tests (importable by the Ray workers)."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.distributed import RunnerContext


class SlowOrCrashing(gym.Wrapper):
    """CartPole sleeping ``sleep`` s per step; raises at step ``crash_at`` (if given)."""

    def __init__(self, env: gym.Env, sleep: float, crash_at: int | None):
        super().__init__(env)
        self.sleep = sleep
        self.crash_at = crash_at
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            raise RuntimeError("the env crashed")
        if self.sleep:
            time.sleep(self.sleep)
        return self.env.step(action)


def cartpole(ctx: RunnerContext) -> gym.vector.VectorEnv:
    """``config``: ``num_envs`` (4), ``sleep`` (0.0 s per sub-env step; only runner
    ``sleep_runner``'s if given), ``crash_at`` (gen 0; every generation with ``crash_always``),
    ``crash_runner`` (1)."""
    cfg = ctx.config
    sleep = float(cfg.get("sleep", 0.0))
    if cfg.get("sleep_runner") is not None and ctx.index != cfg["sleep_runner"]:
        sleep = 0.0  # only that runner is slow
    crash_at = cfg.get("crash_at") if ctx.generation == 0 or cfg.get("crash_always") else None
    if crash_at is not None and ctx.index != cfg.get("crash_runner", 1):
        crash_at = None

    def make() -> gym.Env:
        env = gym.make("CartPole-v1")
        if sleep or crash_at is not None:
            env = SlowOrCrashing(env, sleep, crash_at)
        return env

    return gym.vector.SyncVectorEnv([make] * int(cfg.get("num_envs", 4)))


class WeightedPolicy:
    """A seeded stochastic policy whose action probabilities come from broadcast weights.

    Records ``vf_preds`` and ``action_logp`` so the converter can take its chunks.
    """

    def __init__(self, num_envs: int, seed: int | None):
        self.rng = np.random.default_rng(seed)
        self.num_envs = num_envs
        self.p_right = 0.5
        self.version = -1

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.p_right = float(weights["p_right"])

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        actions = (self.rng.random(self.num_envs) < self.p_right).astype(np.int64)
        p = np.where(actions == 1, self.p_right, 1 - self.p_right)
        return actions, {
            "vf_preds": obs[:, 0].astype(np.float32),
            "action_logp": np.log(np.maximum(p, 1e-8)).astype(np.float32),
        }


def weighted_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> WeightedPolicy:
    return WeightedPolicy(env.num_envs, ctx.seed)


def random_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> Any:
    from episodes.runner import RandomPolicy

    return RandomPolicy(env.action_space, seed=ctx.seed)


def value_fn(obs: np.ndarray) -> np.ndarray:
    return np.asarray(obs)[:, 0].astype(np.float64)
