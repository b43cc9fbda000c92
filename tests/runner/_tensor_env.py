"""A numpy vector env seen through torch: what a GPU simulator hands the runner, on the CPU.

``TensorVectorEnv`` returns the wrapped env's observations, rewards, flags and infos as torch
tensors (same-step final observations as one batched tensor), so a runner on it and a runner
on the numpy env see the same data. ``TensorPolicy`` runs a numpy policy on tensors.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tree

from episodes.structs import map_leaves


def to_tensors(item: Any, device: str = "cpu") -> Any:
    """Numeric numpy leaves (and dicts of them) as tensors; object arrays left alone."""
    if isinstance(item, dict):
        return {key: to_tensors(value, device) for key, value in item.items()}
    if isinstance(item, tuple):
        return tuple(to_tensors(value, device) for value in item)
    if isinstance(item, np.ndarray) and item.dtype != object:
        return torch.from_numpy(item.copy()).to(device)
    return item


def to_arrays(item: Any) -> Any:
    return map_leaves(lambda x: x.cpu().numpy() if isinstance(x, torch.Tensor) else x, item)


class TensorVectorEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """The wrapped vector env with torch tensors in and out."""

    def __init__(self, env: gym.vector.VectorEnv, device: str = "cpu"):
        self.env = env
        self.device = device
        self.num_envs = env.num_envs
        self.metadata = env.metadata
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_space = env.observation_space
        self.action_space = env.action_space

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = self.env.reset(**kwargs)
        return to_tensors(obs, self.device), to_tensors(infos, self.device)

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = self.env.step(to_arrays(actions))
        infos = dict(infos)
        if "final_obs" in infos:
            # Same-step: one batched tensor, zeros where no episode ended.
            done = np.asarray(infos["_final_obs"], bool)
            finals = [obs_ if d else None for obs_, d in zip(infos["final_obs"], done)]
            template = next(f for f in finals if f is not None)
            zeros = map_leaves(np.zeros_like, template)
            stacked = [f if f is not None else zeros for f in finals]
            infos["final_obs"] = tree.map_structure(lambda *leaves: np.stack(leaves), *stacked)
        return (
            to_tensors(obs, self.device),
            to_tensors(np.asarray(rewards, np.float64), self.device),
            to_tensors(np.asarray(terminated, bool), self.device),
            to_tensors(np.asarray(truncated, bool), self.device),
            to_tensors(infos, self.device),
        )


class TensorPolicy:
    """A numpy policy (``tests.runner._random_env.Policy``) acting on and returning tensors."""

    def __init__(self, policy: Any, device: str = "cpu"):
        self.policy = policy
        self.device = device
        if hasattr(policy, "initial_state"):
            self.initial_state = lambda n: to_tensors(policy.initial_state(n), device)

    def __call__(self, obs: Any, state: Any = None) -> Any:
        if state is None:
            actions, extras = self.policy(to_arrays(obs))
            return to_tensors(actions, self.device), to_tensors(extras, self.device)
        actions, extras, state = self.policy(to_arrays(obs), state.cpu().numpy())
        return (
            to_tensors(actions, self.device),
            to_tensors(extras, self.device),
            to_tensors(state, self.device),
        )
