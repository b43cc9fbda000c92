"""A numpy env's same-step ``final_obs`` batched per leaf, for Dict and Tuple observations.

The torch path takes (and requires) one ``[N, ...]`` array per observation leaf; on the host
path a Box's batched form worked, a Dict's raised a bare ``KeyError: 0`` (leaving the runner
dead) and a Tuple's a ``ValueError`` saying the env's nesting changed. Both forms now record
the same chunks.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner

N = 3
BOX = gym.spaces.Box(-99, 99, (2,), np.float32)
SPACES = {
    "dict": gym.spaces.Dict({"a": BOX, "b": gym.spaces.Box(-99, 99, (), np.float32)}),
    "tuple": gym.spaces.Tuple((BOX, gym.spaces.Box(-99, 99, (), np.float32))),
    "box": BOX,
}


def _item(space, values):
    """Observations of the sub-envs as the space batches them (``values``: one per sub-env)."""
    rows = np.asarray(values, np.float32)
    if isinstance(space, gym.spaces.Dict):
        return {"a": np.stack([rows, -rows], 1), "b": rows * 10}
    if isinstance(space, gym.spaces.Tuple):
        return (np.stack([rows, -rows], 1), rows * 10)
    return np.stack([rows, -rows], 1)


class SameStepEnv(gym.vector.VectorEnv):
    """Sub-env i ends its episodes after i + 2 steps; observations count the steps taken."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, space, batched_finals: bool):
        self.num_envs = N
        self.single_observation_space = space
        self.single_action_space = gym.spaces.Discrete(2)
        self.batched = batched_finals
        self.total = 0

    def reset(self, *, seed=None, options=None):
        self.t = np.zeros(N, np.int64)
        return _item(self.single_observation_space, 100 + self.t), {}

    def step(self, actions):
        self.t += 1
        self.total += 1
        done = self.t >= np.arange(N) + 2
        infos = {}
        if done.any():
            final = _item(self.single_observation_space, self.t + 0.5)
            if not self.batched:  # gymnasium's form: one item per sub-env, in an object array
                per_env = np.empty(N, object)
                for i in range(N):
                    per_env[i] = _per_env(final, i)
                final = per_env
            infos = {"final_obs": final, "_final_obs": done}
            self.t[done] = 0
        obs = _item(self.single_observation_space, 100 * self.total + self.t)
        return obs, np.ones(N), done, np.zeros(N, bool), infos


def _per_env(batch, i):
    if isinstance(batch, dict):
        return {k: v[i] for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(v[i] for v in batch)
    return batch[i]


def _policy(obs):
    return np.zeros(N, np.int64), {}


def _record(space, batched: bool):
    runner = EnvRunner(SameStepEnv(space, batched), _policy, seed=0)
    return [
        (
            c.t_started,
            c.is_terminated,
            c.get_observations(),
            c.get_rewards().tolist(),
            c.get_actions().tolist(),
        )
        for _ in range(3)
        for c in runner.sample(4)
    ]


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("kind", SPACES, ids=SPACES.keys())
def test_batched_final_observations_record_as_per_env_ones(kind):
    batched, per_env = _record(SPACES[kind], True), _record(SPACES[kind], False)
    assert _same(batched, per_env)
    # The final observation (its step count + 0.5) ends each finished chunk.
    ended = [obs for _, done, obs, *_ in per_env if done]
    assert ended
    leaf = {"dict": lambda o: o["a"], "tuple": lambda o: o[0], "box": lambda o: o}[kind]
    assert all(leaf(obs)[-1, 0] % 1 == 0.5 for obs in ended)


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_a_batched_leaf_of_another_shape_is_a_value_error_naming_it(kind):
    env = SameStepEnv(SPACES[kind], True)
    step = env.step

    def short_rows(actions):
        obs, rewards, done, truncated, infos = step(actions)
        if "final_obs" in infos:
            leaves = infos["final_obs"]
            infos["final_obs"] = (
                {k: v[:2] for k, v in leaves.items()}
                if isinstance(leaves, dict)
                else tuple(v[:2] for v in leaves)
            )
        return obs, rewards, done, truncated, infos

    env.step = short_rows
    with pytest.raises(ValueError, match=r"infos\['final_obs'\].*leaf 0: got a batch of shape"):
        EnvRunner(env, _policy, seed=0).sample(4)
