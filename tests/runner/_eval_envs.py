"""Envs, deterministic policies and the hand-written evaluation recipe shared by the
evaluation tests (tests/runner/test_session54_eval.py, test_session54_evaluate.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from episodes.runner import EpisodeTally

MODES = {
    "next_step": gym.vector.AutoresetMode.NEXT_STEP,
    "same_step": gym.vector.AutoresetMode.SAME_STEP,
    "disabled": gym.vector.AutoresetMode.DISABLED,
}


class Success(gym.Wrapper):
    """Sets ``info["is_success"]`` at the last step (a truncation counts as a success)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "is_success": bool(truncated)}
        return obs, reward, terminated, truncated, info


def cartpole_policy(obs):
    """Deterministic; on the seeds below some episodes end terminated, some truncated at 40."""
    return (np.asarray(obs)[:, 2] > 0).astype(np.int64), {}


def pendulum_policy(obs):
    """A deterministic torque in [-2, 2] (a Gaussian policy's mean)."""
    obs = np.asarray(obs)
    return np.clip(-1.5 * obs[:, 2:3] - 0.7 * obs[:, 0:1], -2.0, 2.0).astype(np.float32), {}


ENVS = {
    "cartpole": ("CartPole-v1", 40, cartpole_policy),
    "pendulum": ("Pendulum-v1", 25, pendulum_policy),
}


def vector_env(name, num_envs, mode, limit=None):
    env_id, default_limit, _ = ENVS[name]
    return gym.make_vec(
        env_id,
        num_envs,
        vectorization_mode="sync",
        wrappers=[Success],
        vector_kwargs={"autoreset_mode": MODES[mode]},
        max_episode_steps=default_limit if limit is None else limit,
    )


def recipe(runner, seeds, num_steps=16):
    """Exactly ``len(seeds)`` episodes, episode j from ``reset(seed=seeds[j])``, by hand.

    Rounds of ``runner.num_envs`` seeds: a full reset seeds sub-env i with the round's i-th
    seed, and the first episode each of those sub-envs finishes is kept, whatever its length;
    the episodes the sub-envs start after it, and the unseeded sub-envs of a last short round,
    are thrown away unseen. (What docs/evaluation.md showed before ``evaluate`` existed.)
    """
    n = runner.num_envs
    finished, episodes = [], []
    for start in range(0, len(seeds), n):
        batch = list(seeds[start : start + n])
        runner.reset(seed=batch + [None] * (n - len(batch)))
        tally, first, pieces = EpisodeTally(), {}, {}
        while len(first) < len(batch):
            chunks = runner.sample(num_steps)
            for chunk in chunks:
                pieces.setdefault(chunk.id_, []).append(chunk)
            for e in tally.add(chunks):
                if e.env_index < len(batch) and e.env_index not in first:
                    first[e.env_index] = e
        for i, seed in enumerate(batch):
            e = first[i]
            whole, *rest = pieces[e.id_]
            for piece in rest:
                whole.concat_episode(piece)
            whole.custom_data["seed"] = seed
            finished.append(e)
            episodes.append(whole)
    return finished, episodes
